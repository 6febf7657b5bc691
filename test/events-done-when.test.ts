/**
 * The events issue's "done when", as one owner lives it: the owner sets wallet.low at 10.00 and
 * their keys' thresholds at 80 % through the API (their own token), and then receives exactly one
 * signed event for each crossing, in order — whether the crossing is booked by a usage record
 * (`POST /v1/usage`) or by a metered answer (ext_proc on a real sidecar, priced from the price
 * table), interleaved; with nothing for the bookings that cross nothing, and the wallet alert again
 * only after a credit re-arms it. The crossings are exact from both sources: a metered answer that
 * lands the balance on 10.000000 tells nothing, the next one tells; a key's spend reaching its 80 %
 * exactly, by a record or by a metered answer, tells. A real console (its delivery worker), a real Redis, a real
 * receiver on loopback; every delivery is checked with the docs' own verification snippet.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { encodePrice } from '../src/schema/prices.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { callApi, startTestConsole } from './helpers/console-api.ts';
import { ExtProcClient } from './helpers/ext-proc-client.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startTestSidecar, waitFor, waitTracking, type TestSidecar } from './helpers/sidecars.ts';
import { until } from './helpers/until.ts';
import { startReceiver, verifyDocs, type Receiver } from './helpers/webhook-receiver.ts';
import { fixture } from './unit/metering-helpers.ts';


/** openai-chat.json at `openai/*` with these prices: 93 × 2.5 + 1024 × 1.25 + 46 × 10 = 1972.5 → 1973 micro-units. */
const METERED = 1973;
const s = schema();
const saved = { ...process.env };
let redis: RedisServer | undefined;
let db: Redis;
let srv: ConsoleServer | undefined;
let base: string;
let admin: string;
let sc: TestSidecar | undefined;
let ep: ExtProcClient | undefined;
let r: Receiver | undefined;

beforeAll(async () => {
  process.env.KEYGATE_WEBHOOK_ALLOW_PRIVATE = 'true'; // the receiver is on loopback
  redis = await startRedis();
  db = redis.client();
  await db.hset(s.prices(), 'openai/*', encodePrice({ input: 2_500_000, output: 10_000_000, cachedInput: 1_250_000 }));
  ({ srv, base, admin } = await startTestConsole(redis.url, `unused-${randomBytes(3).toString('hex')}`));
  sc = await startTestSidecar(redis.url, { meterFlushMs: 50, stalenessBoundMs: 2000 });
  await waitTracking(sc);
  ep = new ExtProcClient(`127.0.0.1:${sc.sidecar.grpcPort}`);
  r = await startReceiver();
}, 60_000);

afterAll(async () => {
  process.env = saved;
  ep?.close();
  await sc?.close();
  await srv?.close();
  await r?.close();
  if (redis) await destroyRedis(redis);
});

it('wallet.low at 10.00 and key thresholds at 80 %: exactly one signed event per crossing, in order, from usage records and metered bookings', async () => {
  const a = `owner-${randomBytes(4).toString('hex')}`;
  const owner = (await srv!.console.createToken({ name: 'owner', account: a }, CLI_ACTOR)).token;
  const api = async (method: string, path: string, body: unknown, token = owner) => {
    const res = await callApi(base, method, path, { token, body });
    expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
    return res.body;
  };
  const balance = async () => Number(await db.hget(s.wallet(a), 'balance'));

  // The owner's setup, with their own token.
  const { secret } = await api('POST', '/v1/webhooks', { url: r!.url, account: a });
  expect(await api('PUT', `/v1/accounts/${a}/alerts`, { wallet_low_micros: 10_000_000 })).toEqual({ account: a, wallet_low_micros: 10_000_000 });
  const k1 = await api('POST', `/v1/accounts/${a}/keys`, { name: 'records', limit: { amount_micros: 10_000_000, period: 'day' } }); // 80 % = 8.000000
  const k2 = await api('POST', `/v1/accounts/${a}/keys`, { name: 'metered', limit: { amount_micros: 4932, period: 'day' } }); // 80 % = ⌈3945.6⌉ = 3946 micro-units: two metered answers exactly
  const k3 = await api('POST', `/v1/accounts/${a}/keys`, { name: 'unlimited' });
  for (const k of [k1, k2]) await api('PATCH', `/v1/keys/${k.id}`, { alert_thresholds: [80] });

  const record = (keyId: string, amount: number, requestId: string) => api('POST', '/v1/usage', { key_id: keyId, amount_micros: amount, request_id: requestId }, admin);
  const credit = (amount: number, reference: string) => api('POST', `/v1/accounts/${a}/credits`, { amount_micros: amount, reference }, admin);
  /** One metered answer through the sidecar's ext_proc, waited for until booked (the next step starts after it). */
  let n = 0;
  const metered = async (keyId: string) => {
    const before = await balance();
    const res = await ep!.exchange({
      path: '/v1/chat/completions',
      requestId: `m-${++n}-${randomBytes(3).toString('hex')}`,
      identity: { keyId, accountId: a },
      requestBody: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      responseHeaders: { 'content-type': 'application/json' },
      chunks: [fixture('openai-chat.json')],
    });
    expect(res.code).toBe(0);
    await waitFor(async () => (await balance()) === before - METERED, `metered booking ${n}`, 10_000);
  };

  await credit(18_003_947, 'c1'); // 18.003947
  await record(k1.id, 7_999_999, 'u1'); // 10.003948; k1 at 7.999999: nothing
  await record(k1.id, 1, 'u2'); // 10.003947; k1 at exactly 8.000000: k1's 80 %
  await record(k1.id, 1, 'u3'); // 10.003946; k1 past it: nothing
  await metered(k2.id); // 10.001973; k2 at 1973: nothing
  await metered(k2.id); // exactly 10.000000: not below; k2 at exactly 3946: k2's 80 %
  await metered(k3.id); // 9.998027: wallet.low, from a metered booking
  await metered(k3.id); // 9.996054, still below: nothing
  await record(k3.id, 1_000_000, 'u4'); // still below: nothing
  expect(await balance()).toBe(8_996_054);
  await credit(1_003_945, 'c2'); // 9.999999: still below, not re-armed
  await record(k3.id, 1, 'u5'); // nothing
  await credit(2, 'c3'); // exactly 10.000000: not below, but not above either: not re-armed
  await metered(k3.id); // 9.998027: below again, not re-armed: nothing
  await credit(1974, 'c4'); // 10.000001: above the threshold, re-armed
  await record(k3.id, 2, 'u6'); // 9.999999: wallet.low again, from a usage record
  await metered(k3.id); // 9.998026, still below: nothing
  await credit(1975, 'c5'); // 10.000001: re-armed
  await metered(k3.id); // 9.998028: wallet.low again, from a metered booking
  await record(k3.id, 1, 'u7'); // nothing
  await metered(k2.id); // k2 at 5919: its 80 % told already this period; nothing

  const want = [
    'key.created', 'key.created', 'key.created',
    'wallet.credited',
    'key.limit.threshold:records',
    'key.limit.threshold:metered',
    'wallet.low:9998027',
    'wallet.credited', 'wallet.credited',
    'wallet.credited',
    'wallet.low:9999999',
    'wallet.credited',
    'wallet.low:9998028',
  ];
  const name = { [k1.id]: 'records', [k2.id]: 'metered' } as Record<string, string>;
  const seen = () =>
    r!.received.map((x) => {
      const e = x.event;
      if (e.type === 'key.limit.threshold') return `${e.type}:${name[e.data.key_id]}`;
      if (e.type === 'wallet.low') return `${e.type}:${e.data.balance_micros}`;
      return e.type;
    });
  await until('every event', () => r!.received.length >= want.length, 20_000);
  await new Promise((x) => setTimeout(x, 1500)); // and nothing more
  expect(seen()).toEqual(want);
  expect(new Set(r!.received.map((x) => x.event.id)).size).toBe(want.length); // each once: no repeat delivery

  const th = r!.received.filter((x) => x.event.type === 'key.limit.threshold').map((x) => x.event.data);
  expect(th).toEqual([
    { key_id: k1.id, threshold: 80, period: 'day', spend_micros: 8_000_000, limit_micros: 10_000_000 },
    { key_id: k2.id, threshold: 80, period: 'day', spend_micros: 2 * METERED, limit_micros: 4932 },
  ]);
  for (const x of r!.received.filter((y) => y.event.type === 'wallet.low')) expect(x.event.data.threshold_micros).toBe(10_000_000);
  for (const x of r!.received) {
    const sig = String(x.headers['keygate-signature']);
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyDocs(secret, x.body, sig)).toBe(true);
    expect(verifyDocs(`${secret}x`, x.body, sig)).toBe(false);
    expect(x.event.account).toBe(a);
  }
  // In the order they were written: their created_at never goes back.
  const times = r!.received.map((x) => Date.parse(x.event.created_at));
  expect(times).toEqual([...times].sort((p, q) => p - q));
}, 90_000);
