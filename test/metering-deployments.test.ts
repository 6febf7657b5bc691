/**
 * Metered bookings on Redis Cluster and Sentinel: the usage-record script with its token and event
 * KEYS runs in the account's slot (no CROSSSLOT), the price table is read through the cached store,
 * and the wallet is debited by exactly the priced amount, once, with the token counters written.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { parseTokenCounters } from '../src/schema/money.ts';
import { encodePrice } from '../src/schema/prices.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { ExtProcClient } from './helpers/ext-proc-client.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { startSentinel, type SentinelDeployment } from './helpers/redis-sentinel.ts';
import { startTestSidecar, waitFor, type TestSidecar } from './helpers/sidecars.ts';
import { fixture } from './unit/metering-helpers.ts';

const s = schema();
const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
/** openai-chat.json at `openai/*` (see metering-service.test.ts): 1973 micro-units. */
const COST = 1973;
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

async function meterOnce(url: string, db: Redis | Cluster): Promise<void> {
  const kc = new KeyConsole({ redis: url, revealKey: REVEAL });
  cleanups.push(() => kc.close());
  await db.hset(s.prices(), 'openai/*', encodePrice({ input: 2_500_000, output: 10_000_000, cachedInput: 1_250_000 }));
  const sc: TestSidecar = await startTestSidecar(url, { meterFlushMs: 50 });
  cleanups.push(() => sc.close());
  const account = `acct-${randomBytes(4).toString('hex')}`;
  const k = await kc.createKey({ account, name: 'metered' });
  await kc.creditAccount(account, 1_000_000, 'c1');
  const c = new ExtProcClient(`127.0.0.1:${sc.sidecar.grpcPort}`);
  cleanups.push(async () => c.close());
  const x = {
    path: '/v1/chat/completions',
    requestId: 'same-request',
    identity: { keyId: k.id, accountId: account },
    responseHeaders: { 'content-type': 'application/json' },
    chunks: [fixture('openai-chat.json')],
  };
  await c.exchange(x);
  await c.exchange(x); // the same request id again: booked once
  const balance = async () => Number(await db.hget(s.wallet(account), 'balance'));
  await waitFor(async () => (await balance()) < 1_000_000, 'the booking', 15_000);
  await new Promise((r) => setTimeout(r, 300));
  expect(await balance()).toBe(1_000_000 - COST);
  expect(parseTokenCounters(await db.hgetall(s.tokens(account, k.id)), Date.now()).today).toEqual({ input: 1117, output: 46 });
}

describe('metering on other deployments', () => {
  it('Redis Cluster: booked once, exactly, in the account slot', async () => {
    const cluster: ClusterDeployment = await startCluster();
    cleanups.push(() => cluster.destroy());
    await meterOnce(cluster.url, cluster.client());
  }, 90_000);

  it('Redis Sentinel: booked once, exactly', async () => {
    const sentinel: SentinelDeployment = await startSentinel();
    cleanups.push(() => sentinel.destroy());
    const db = sentinel.master.client();
    await meterOnce(sentinel.url, db);
  }, 90_000);
});
