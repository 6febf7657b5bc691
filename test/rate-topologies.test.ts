/**
 * Rate limits through a real sidecar on Redis Cluster (three masters) and on Sentinel
 * (docs/rate-limits.md): an exact rate allows exactly its count per window and refuses the rest
 * with a 429 RATE_LIMITED in the client's shape; a leased rate stays within its bound; on Cluster
 * every record the TAKE script touches (a key's window and its account's) hashes to one slot, for
 * accounts on every master. During a planned Sentinel failover the limiter pauses with the store:
 * no request is allowed on a count the new master never sees (every allowed request is counted on
 * the master that holds the window afterwards), and the answers in between are 503 AUTH_UNAVAILABLE.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { parseRateText, rateKeys, type Rate } from '../src/schema/rates.ts';
import { deniedBody, deniedHeaders, type CheckResponseMsg } from './helpers/envoy-client.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { startSentinel, type SentinelDeployment } from './helpers/redis-sentinel.ts';
import { chatRequest, outcomeOf, startTestSidecar, waitFor, waitTracking, type Settings, type TestSidecar } from './helpers/sidecars.ts';

const s = schema();
const rk = rateKeys(s);
const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const rate = (t: string): Rate => {
  const r = parseRateText(t, 'requests');
  if ('error' in r) throw new Error(r.error);
  return r;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `n` checks of `key` inside one minute window (sent `parallel` at a time); tried again with a fresh
 * key (from `make`) when the burst crossed a minute boundary on a slow machine.
 */
async function burstInOneMinute(sc: TestSidecar, make: () => Promise<{ key: string; id: string; account: string }>, n: number, parallel = 1) {
  for (let attempt = 0; ; attempt++) {
    if (60_000 - (Date.now() % 60_000) < 15_000) await sleep(60_000 - (Date.now() % 60_000) + 50);
    const k = await make();
    const minute = Math.floor(Date.now() / 60_000);
    const res: CheckResponseMsg[] = [];
    for (let i = 0; i < n; i += parallel) {
      res.push(...(await Promise.all(Array.from({ length: Math.min(parallel, n - i) }, () => sc.client.check(chatRequest(k.key))))));
    }
    if (Math.floor(Date.now() / 60_000) === minute) return { k, res };
    if (attempt >= 2) throw new Error('could not send the burst within one minute');
  }
}

function expectRateLimited(res: CheckResponseMsg, text: string): void {
  expect(res.status?.code).toBe(8); // RESOURCE_EXHAUSTED
  expect(res.denied_response?.status?.code).toBe(429);
  const body = deniedBody(res) as { error: { type: string; code: string } };
  expect(body.error.type).toBe('rate_limit_error'); // the OpenAI client's shape (the request's family)
  expect(body.error.code).toBe('RATE_LIMITED');
  expect(JSON.stringify(body)).toContain(text);
  const h = deniedHeaders(res);
  expect(Number(h['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(Number(h['retry-after-ms'])).toBeGreaterThanOrEqual(1);
  expect(h['x-should-retry']).toBeUndefined();
}

/**
 * Registers beforeAll/afterAll for the file's deployment (`start`), a sidecar on it with `settings`
 * (tracking before the tests) and a key console; read the fixture inside tests.
 */
function useRateStack<D extends { url: string; destroy(): Promise<void> }>(start: () => Promise<D>, settings: Settings): { dep: D; sc: TestSidecar; kc: KeyConsole } {
  const f = {} as { dep: D; sc: TestSidecar; kc: KeyConsole };
  beforeAll(async () => {
    f.dep = await start();
    f.sc = await startTestSidecar(f.dep.url, settings);
    f.kc = new KeyConsole({ redis: f.dep.url, revealKey: REVEAL });
    await waitTracking(f.sc);
  }, 60_000);
  afterAll(async () => {
    await f.kc?.close();
    await f.sc?.close();
    await f.dep?.destroy();
  });
  return f;
}

const count = (res: CheckResponseMsg[], outcome: string) => res.filter((r) => outcomeOf(r) === outcome).length;

describe('Cluster (three masters): rate limits through a sidecar', () => {
  let dep: ClusterDeployment;
  let sc: TestSidecar;
  let kc: KeyConsole;
  const f = useRateStack(() => startCluster(3), { countUsage: false, stalenessBoundMs: 10_000 });
  beforeAll(() => ({ dep, sc, kc } = f));

  it('on every master: a key rate 10/m and an account rate 12/m allow exactly their counts; the records of one TAKE share a slot', async () => {
    const db = dep.client();
    const seen = new Set<number>();
    for (let i = 0; seen.size < dep.nodes.length && i < 200; i++) {
      const account = `acct-rl-${randomBytes(3).toString('hex')}`;
      const node = await dep.nodeOf(rk.requests(account));
      if (seen.has(node.port)) continue;
      seen.add(node.port);
      await kc.setAccountRates(account, { requests: rate('12/m') });
      // Key 1 (10/m) and key 2 (no key rate) of the same account: 10 + 2 = the account's 12.
      const { k, res } = await burstInOneMinute(sc, async () => {
        const made = await kc.createKey({ account, name: 'k1', rates: { requests: rate('10/m') } });
        return { key: made.key, id: made.id, account };
      }, 13);
      expect(count(res, 'allow')).toBe(10);
      expect(count(res, 'RATE_LIMITED')).toBe(3);
      expectRateLimited(res[10]!, 'key request rate 10/m');
      // Both windows of the key's TAKE, its token records and gate: one slot, the account's node.
      const slot = Number(await db.cluster('KEYSLOT', rk.requests(account)));
      for (const key of [rk.requests(account, k.id), rk.tokens(account), rk.tokens(account, k.id), s.gate(account)]) {
        expect(Number(await db.cluster('KEYSLOT', key))).toBe(slot);
      }
      expect(await dep.nodeOf(rk.requests(account, k.id))).toBe(node);
      expect(Number(await db.hget(rk.requests(account, k.id), 'c'))).toBe(10);
      const k2 = await kc.createKey({ account, name: 'k2' });
      const more: CheckResponseMsg[] = [];
      for (let j = 0; j < 3; j++) more.push(await sc.client.check(chatRequest(k2.key)));
      if (Math.floor(Date.now() / 60_000) !== Math.floor((Date.now() - 1000) / 60_000)) continue; // just crossed a minute: not conclusive
      expect(more.map(outcomeOf)).toEqual(['allow', 'allow', 'RATE_LIMITED']);
      expectRateLimited(more[2]!, 'account request rate 12/m');
      expect(Number(await db.hget(rk.requests(account), 'c'))).toBe(12);
    }
    expect(seen.size).toBe(dep.nodes.length);
  });

  it('a leased rate (200/m) through the Cluster stays within its bound: at most 200 of 260, at least 190', async () => {
    const account = `acct-rl-${randomBytes(3).toString('hex')}`;
    const { k, res } = await burstInOneMinute(sc, async () => {
      const made = await kc.createKey({ account, name: 'leased', rates: { requests: rate('200/m') } });
      return { key: made.key, id: made.id, account };
    }, 260, 20);
    const allowed = count(res, 'allow');
    expect(allowed + count(res, 'RATE_LIMITED')).toBe(260);
    expect(allowed).toBeLessThanOrEqual(200);
    expect(allowed).toBeGreaterThanOrEqual(190);
    expect(Number(await dep.client().hget(rk.requests(account, k.id), 'c'))).toBeLessThanOrEqual(200);
    expectRateLimited(res.find((r) => outcomeOf(r) === 'RATE_LIMITED')!, 'key request rate 200/m');
  });
});

describe('Sentinel: rate limits through a sidecar, and during a planned failover', () => {
  let dep: SentinelDeployment;
  let sc: TestSidecar;
  let kc: KeyConsole;
  // Cached grants answer while the store is paused, so requests reach the rate phase during the failover.
  const f = useRateStack(startSentinel, { countUsage: false, redisTimeoutMs: 500, serveCachedDuringOutage: true });
  beforeAll(() => ({ dep, sc, kc } = f));

  it('a key rate 10/m allows exactly 10 of 13 and refuses the rest with a 429 in the client shape', async () => {
    const account = `acct-rl-${randomBytes(3).toString('hex')}`;
    const { k, res } = await burstInOneMinute(sc, async () => {
      const made = await kc.createKey({ account, name: 's', rates: { requests: rate('10/m') } });
      return { key: made.key, id: made.id, account };
    }, 13);
    expect(res.map(outcomeOf)).toEqual([...Array(10).fill('allow'), 'RATE_LIMITED', 'RATE_LIMITED', 'RATE_LIMITED']);
    expectRateLimited(res[12]!, 'key request rate 10/m');
    expect(Number(await dep.master.client().hget(rk.requests(account, k.id), 'c'))).toBe(10);
  });

  it('SENTINEL FAILOVER: every allowed request is counted on the new master; 503 while the switch is under way', async () => {
    const account = `acct-rl-${randomBytes(3).toString('hex')}`;
    // Exact (below 100): each request is one TAKE; an hour window, so the count spans the whole failover.
    const k = await kc.createKey({ account, name: 'f', rates: { requests: rate('99/h') } });
    const outcomes: string[] = [];
    const check = async () => outcomes.push(outcomeOf(await sc.client.check(chatRequest(k.key))));
    for (let i = 0; i < 3; i++) await check();
    expect(outcomes).toEqual(['allow', 'allow', 'allow']);
    await dep.master.client().wait(1, 5000); // the replica has every count so far
    let switched = false;
    const switching = dep.switchover().finally(() => (switched = true));
    while (!switched) {
      await check();
      await sleep(50);
    }
    await switching;
    await waitTracking(sc);
    await waitFor(async () => (await check(), outcomes.at(-1) === 'allow'), 'allowed on the new master', 10_000);
    const hour = Math.floor(Date.now() / 3_600_000);
    const allowed = outcomes.filter((o) => o === 'allow').length;
    const counted = Number(await dep.master.client().hget(rk.requests(account, k.id), 'c'));
    console.log(`planned failover: ${outcomes.length} checks, ${allowed} allowed, ${outcomes.filter((o) => o === 'AUTH_UNAVAILABLE').length} answered 503, ${counted} counted on the new master`);
    if (Math.floor((Date.now() - 60_000) / 3_600_000) !== hour) return; // an hour boundary fell in the test: not conclusive
    expect(outcomes.filter((o) => o !== 'allow' && o !== 'AUTH_UNAVAILABLE' && o !== 'RATE_LIMITED')).toEqual([]);
    expect(outcomes).toContain('AUTH_UNAVAILABLE');
    expect(allowed).toBeLessThanOrEqual(counted);
  }, 60_000);
});
