/**
 * One account the delivery worker cannot examine (here a delivery state whose cursor is not a stream
 * id, so reading it throws) holds back no other account: the sweep and the pass go on to the rest, and
 * an event of another account in the same claimed batch is delivered at once, not after a lease.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { EventPublisher, eventKeysFor } from '../src/events/publish.ts';
import { WebhookStore } from '../src/events/webhooks.ts';
import { DeliveryWorker } from '../src/events/worker.ts';
import { eventsSchema } from '../src/schema/events.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { startRedis, destroyRedis, type RedisServer } from './helpers/redis-server.ts';
import { startReceiver, type Receiver } from './helpers/webhook-receiver.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const es = eventsSchema('kg');
let redis: RedisServer | undefined;
let db: Redis;
let receiver: Receiver | undefined;
let worker: DeliveryWorker | undefined;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  receiver = await startReceiver();
}, 30_000);

afterAll(async () => {
  await worker?.stop(1000);
  await receiver?.close();
  if (redis) await destroyRedis(redis);
});

describe('an account the worker cannot examine', () => {
  it('does not hold back the other accounts of its sweep or its claimed batch', async () => {
    const { endpoint: ep } = await new KeyConsole({ redis: db, revealKey: REVEAL }).createWebhook({ url: receiver!.url, account: null, events: null }, undefined, { allowPrivate: true });
    await sleep(5); // the events come after the endpoint's creation millisecond
    const pub = new EventPublisher(db, 'kg');
    // 'a-bad' sorts before 'b-good' in the due set (both due now), so it is examined first.
    await pub.publish('a-bad', 'account.disabled', { account_id: 'a-bad', status: 'disabled' });
    await db.hset(es.deliveryState('a-bad'), ep.id, JSON.stringify({ cursor: 'not-a-stream-id', attempts: 0, nextAt: 0 }));
    await pub.publish('b-good', 'account.disabled', { account_id: 'b-good', status: 'disabled' });

    worker = new DeliveryWorker({
      redis: db,
      namespace: 'kg',
      webhooks: new WebhookStore(db, 'kg', REVEAL),
      config: { retryScheduleSeconds: [0.2], allowPrivate: true, disableAfterMs: 86_400_000, timeoutMs: 5000, concurrency: 8 },
      log: createLogger('silent'),
      pollMs: 100,
      leaseMs: 60_000,
    });
    worker.start();
    const end = Date.now() + 5000;
    while (!receiver!.received.some((x) => x.event.account === 'b-good') && Date.now() < end) await sleep(50);
    expect(receiver!.received.map((x) => x.event.account)).toEqual(['b-good']);
    // The bad account stays claimed (looked at again after a lease), like one whose console died.
    expect(Number(await db.zscore(es.due(), 'a-bad'))).toBeGreaterThan(Date.now());
  }, 30_000);
});

describe('the list of accounts with events', () => {
  it('is written in each namespace that a client publishes in (one client, two namespaces)', async () => {
    await eventKeysFor(db, 'ns1', 'acct-two-ns');
    await eventKeysFor(db, 'ns2', 'acct-two-ns');
    expect(await db.sismember(eventsSchema('ns1').accounts(), 'acct-two-ns')).toBe(1);
    expect(await db.sismember(eventsSchema('ns2').accounts(), 'acct-two-ns')).toBe(1);
    await new EventPublisher(db, 'ns3').publish('acct-two-ns', 'account.disabled', { account_id: 'acct-two-ns', status: 'disabled' });
    await eventKeysFor(db, 'ns3', 'acct-other');
    expect((await db.smembers(eventsSchema('ns3').accounts())).sort()).toEqual(['acct-other', 'acct-two-ns']);
  });
});
