/**
 * The delivery worker touches only accounts with due work (docs/events.md "Delivery"): with 1,000
 * accounts whose events are all handled, its passes read none of their streams or delivery states
 * (counted by the real server's INFO commandstats over ten passes); a new event still goes out at
 * the next pass, and an event whose wake-up was lost (a publisher that died between its write and
 * the wake-up) is found by the slow sweep. Events written inside money scripts (a credit, a usage
 * record, a metered booking) wake their account; a record that writes no event wakes nothing.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { EventPublisher } from '../src/events/publish.ts';
import { redisBookingWrite } from '../src/metering/booker.ts';
import { WebhookStore } from '../src/events/webhooks.ts';
import { DeliveryWorker } from '../src/events/worker.ts';
import { eventsSchema } from '../src/schema/events.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { startRedis, destroyRedis, type RedisServer } from './helpers/redis-server.ts';
import { startReceiver, type Receiver } from './helpers/webhook-receiver.ts';
import { until } from './helpers/until.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const es = eventsSchema('kg');
let redis: RedisServer | undefined;
let db: Redis;
let receiver: Receiver | undefined;
const workers: DeliveryWorker[] = [];
const ACCOUNTS = Array.from({ length: 1000 }, (_, i) => `idle-${String(i).padStart(4, '0')}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  receiver = await startReceiver();
}, 30_000);

afterAll(async () => {
  for (const w of workers) await w.stop(1000);
  await receiver?.close();
  if (redis) await destroyRedis(redis);
});

function worker(sweepMs: number): DeliveryWorker {
  const w = new DeliveryWorker({
    redis: db,
    namespace: 'kg',
    webhooks: new WebhookStore(db, 'kg', REVEAL),
    config: { retryScheduleSeconds: [0.2], allowPrivate: true, disableAfterMs: 86_400_000, timeoutMs: 5000, concurrency: 8 },
    log: createLogger('silent'),
    pollMs: 100,
    sweepMs,
  });
  workers.push(w);
  w.start();
  return w;
}

/** Calls per command since the last CONFIG RESETSTAT. */
async function commandCalls(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of (await db.info('commandstats')).matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) out[m[1]!] = Number(m[2]);
  return out;
}

describe('the delivery worker and idle accounts', () => {
  it('reads none of 1,000 idle accounts in its passes; a new event still goes out at once; a lost wake-up is found by the sweep', async () => {
    const pub = new EventPublisher(db, 'kg');
    // 1,000 accounts with events, all published before the endpoint exists (so none is due to it).
    for (let i = 0; i < ACCOUNTS.length; i += 100) {
      await Promise.all(ACCOUNTS.slice(i, i + 100).map((a) => pub.publish(a, 'account.disabled', { account_id: a, status: 'disabled' })));
    }
    await new KeyConsole({ redis: db, revealKey: REVEAL }).createWebhook({ url: receiver!.url, account: null, events: ['account.enabled'] }, undefined, { allowPrivate: true });
    worker(600_000);
    // The wake-ups of the 1,000 publishes are handled once (nothing to deliver), then the set is empty.
    await until('the due set handled', async () => (await db.zcard(es.due())) === 0);
    await sleep(300);

    await db.config('RESETSTAT');
    await sleep(1000); // about ten passes
    const calls = await commandCalls();
    const perAccount = ['xrevrange', 'xrange', 'hmget', 'hget', 'sscan', 'smembers'].reduce((n, c) => n + (calls[c] ?? 0), 0);
    const total = Object.values(calls).reduce((n, c) => n + c, 0);
    console.log(`1,000 idle accounts, ~10 passes: ${total} commands in all, ${perAccount} reads of streams, states or the account list (${JSON.stringify(calls)})`);
    expect(perAccount).toBe(0);
    expect(total).toBeLessThan(150); // a handful per pass, whatever the number of accounts

    // A new event on one of them is delivered at the next pass.
    const a = ACCOUNTS[500]!;
    await pub.publish(a, 'account.enabled', { account_id: a, status: 'active' });
    const got = await until('the new event', () => receiver!.received.find((x) => x.event.account === a), 5000);
    expect(got.event.type).toBe('account.enabled');
    expect(got.headers['keygate-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);

    // A lost wake-up: the event is written but the account never marked due. The sweep finds it.
    for (const w of workers.splice(0)) await w.stop(1000);
    const b = ACCOUNTS[7]!;
    await db.xadd(es.stream(b), '*', 'type', 'account.enabled', 'account', b, 'data', JSON.stringify({ account_id: b, status: 'active' }));
    worker(500);
    const swept = await until('the event found by the sweep', () => receiver!.received.find((x) => x.event.account === b), 5000);
    expect(swept.event.type).toBe('account.enabled');
    expect(receiver!.received.filter((x) => x.event.type === 'account.enabled').map((x) => x.event.account)).toEqual([a, b]);
  }, 60_000);
});

describe('events written inside money scripts wake their account', () => {
  it('a credit, a usage record and a metered booking that cross a threshold put the account in the due set; a record that crosses none does not', async () => {
    for (const w of workers.splice(0)) await w.stop(1000);
    const kc = new KeyConsole({ redis: redis!.url, revealKey: REVEAL });
    try {
      const a = `money-${randomBytes(4).toString('hex')}`;
      const k = await kc.createKey({ account: a, name: 'm', limit: { amountMicros: 1000, period: 'day' } });
      const woken = async () => (await db.zscore(es.due(), a)) === '0';
      await db.zrem(es.due(), a);
      await kc.creditAccount(a, 10_000, 'c1'); // wallet.credited
      expect(await woken()).toBe(true);
      await db.zrem(es.due(), a);
      await kc.recordUsage({ keyId: k.id, amountMicros: 100, requestId: 'r-none' }); // 10 % of the limit: no event
      expect(await db.zscore(es.due(), a)).toBeNull();
      await kc.recordUsage({ keyId: k.id, amountMicros: 500, requestId: 'r-50' }); // key.limit.threshold 50
      expect(await woken()).toBe(true);
      await db.zrem(es.due(), a);
      const write = redisBookingWrite(kc.redis, kc.schema);
      const booking = {
        booking_id: 'm-80', request_id: 'm-80', key_id: k.id, account: a, model: 'gpt-4o', family: 'openai' as const,
        input_tokens: 10, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 5, reasoning_tokens: 0, estimated: false,
      };
      expect(await write([{ booking, amountMicros: 250, unpriced: false, endedAt: Date.now() }])).toEqual(['booked']); // 850: threshold 80
      expect(await woken()).toBe(true);
      const types = (await db.xrange(es.stream(a), '-', '+')).map(([, f]) => f[f.indexOf('type') + 1]);
      expect(types).toEqual(expect.arrayContaining(['wallet.credited', 'key.limit.threshold']));
    } finally {
      await kc.close();
    }
  }, 30_000);
});
