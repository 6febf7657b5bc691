/**
 * Metered bookings on Redis Cluster and Sentinel: the usage-record script with its token and event
 * KEYS runs in the account's slot (no CROSSSLOT), the price table is read through the cached store,
 * and the wallet is debited by exactly the priced amount, once across two sidecars, with the token
 * counters written; a wallet driven below zero by metered bookings at one sidecar is refused (402)
 * on the next request at the other (the gate written by the crossing booking).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { parseTokenCounters } from '../src/schema/money.ts';
import { encodePrice } from '../src/schema/prices.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { ExtProcClient } from './helpers/ext-proc-client.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { startSentinel, type SentinelDeployment } from './helpers/redis-sentinel.ts';
import { chatRequest, outcomeOf, startTestSidecar, waitFor, waitTracking, type TestSidecar } from './helpers/sidecars.ts';
import { fixture } from './unit/metering-helpers.ts';

const s = schema();
const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
/** openai-chat.json at `openai/*` (see metering-service.test.ts): 1973 micro-units. */
const COST = 1973;
/** Bookings a sidecar has written or found already booked (`keygate_metering_bookings_total`, booked + duplicate). */
async function attempts(sc: TestSidecar): Promise<number> {
  const counter = sc.sidecar.metrics.registry.getSingleMetric('keygate_metering_bookings_total');
  const { values } = await counter!.get();
  return values.filter((v) => v.labels['result'] === 'booked' || v.labels['result'] === 'duplicate').reduce((n, v) => n + v.value, 0);
}
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

/**
 * Two sidecars on the deployment: the same allowed request (booking id) metered at both is booked once, exactly,
 * with its tokens; a wallet driven below zero by metered bookings at one is refused (402) on the
 * next request at the other.
 */
async function meterAcross(url: string, db: Redis | Cluster): Promise<void> {
  const kc = new KeyConsole({ redis: url, revealKey: REVEAL });
  cleanups.push(() => kc.close());
  await db.hset(s.prices(), 'openai/*', encodePrice({ input: 2_500_000, output: 10_000_000, cachedInput: 1_250_000 }));
  const settings = { meterFlushMs: 50, stalenessBoundMs: 2000 };
  const [a, b]: TestSidecar[] = await Promise.all([startTestSidecar(url, settings), startTestSidecar(url, settings)]);
  cleanups.push(() => a!.close(), () => b!.close());
  await waitTracking(a!, b!);
  const ca = new ExtProcClient(`127.0.0.1:${a!.sidecar.grpcPort}`);
  const cb = new ExtProcClient(`127.0.0.1:${b!.sidecar.grpcPort}`);
  cleanups.push(async () => ca.close(), async () => cb.close());
  /** One allowed request's answer: `request` names it (its booking id, as the allow's metadata carries it). */
  const exchange = (accountId: string, keyId: string, request: string) => ({
    path: '/v1/chat/completions',
    requestId: request,
    identity: { keyId, accountId, bookingId: `kb:${createHash('sha256').update(request).digest('hex').slice(0, 32)}` },
    responseHeaders: { 'content-type': 'application/json' },
    chunks: [fixture('openai-chat.json')],
  });
  const balance = async (account: string) => Number(await db.hget(s.wallet(account), 'balance'));

  const account = `acct-${randomBytes(4).toString('hex')}`;
  const k = await kc.createKey({ account, name: 'metered' });
  await kc.creditAccount(account, 1_000_000, 'c1');
  // the same allowed request at both sidecars, twice at one: booked once
  await Promise.all([ca.exchange(exchange(account, k.id, 'same-request')), cb.exchange(exchange(account, k.id, 'same-request'))]);
  await ca.exchange(exchange(account, k.id, 'same-request'));
  // every attempt written or refused as already booked, at both sidecars, before the balance is read
  await waitFor(async () => (await attempts(a!)) + (await attempts(b!)) === 3, 'three booking attempts', 15_000);
  expect(await balance(account)).toBe(1_000_000 - COST);
  expect(parseTokenCounters(await db.hgetall(s.tokens(account, k.id)), Date.now()).today).toEqual({ input: 1117, output: 46 });

  // the crossing: 3000 credited, two answers metered at a (2 × 1973) → −946; b refuses the next request
  const low = `acct-${randomBytes(4).toString('hex')}`;
  const lk = await kc.createKey({ account: low, name: 'metered' });
  await kc.creditAccount(low, 3000, 'c1');
  expect(outcomeOf(await b!.client.check(chatRequest(lk.key)))).toBe('allow'); // b has the key and a positive wallet cached
  await ca.exchange(exchange(low, lk.id, 'cross-1'));
  await ca.exchange(exchange(low, lk.id, 'cross-2'));
  await waitFor(async () => (await balance(low)) === 3000 - 2 * COST, 'both bookings', 15_000);
  await waitFor(async () => outcomeOf(await b!.client.check(chatRequest(lk.key))) === 'INSUFFICIENT_BALANCE', '402 at the other sidecar', 5000);
}

describe('metering on other deployments', () => {
  it('Redis Cluster: booked once across two sidecars, exactly, in the account slot; a wallet driven below zero is refused at the other sidecar', async () => {
    const cluster: ClusterDeployment = await startCluster();
    cleanups.push(() => cluster.destroy());
    await meterAcross(cluster.url, cluster.client());
  }, 90_000);

  it('Redis Sentinel: booked once across two sidecars, exactly; a wallet driven below zero is refused at the other sidecar', async () => {
    const sentinel: SentinelDeployment = await startSentinel();
    cleanups.push(() => sentinel.destroy());
    const db = sentinel.master.client();
    await meterAcross(sentinel.url, db);
  }, 90_000);
});
