/**
 * Propagation on a standalone Redis: every change the console can make is seen on the very next request
 * by two sidecars sharing one Redis while they answer from their caches; coalescing and bounds of
 * the cache; outages (Redis killed mid-load, links killed) and recovery without a restart; the
 * staleness bound for what Redis cannot announce (a link dead without FIN/RST, SWAPDB).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { generateKey } from '../src/core/key-format.ts';
import { encodeModels, KeyField, schema } from '../src/schema/redis-schema.ts';
import { startBlackholeProxy } from './helpers/redis-blackhole.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { seedKey, setAccountStatus } from './helpers/seed.ts';
import { chatRequest, outcomeOf, startSharedPair, startTestSidecar, waitFor, waitTracking, warmAllow, type SharedPair, type TestSidecar } from './helpers/sidecars.ts';
import type { EnvoyRequest } from './helpers/envoy-client.ts';
import { changeSeenAtOnce } from './helpers/propagation.ts';

const s = schema();
const TRIALS = 8;

async function commandCalls(db: Redis, cmd: string): Promise<number> {
  const info = await db.info('commandstats');
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info);
  return m ? Number(m[1]) : 0;
}

describe('two sidecars sharing one standalone Redis', () => {
  let pair: SharedPair;
  let redis: RedisServer;
  let db: Redis;
  let a: TestSidecar;
  let b: TestSidecar;
  let both: TestSidecar[];

  beforeAll(async () => {
    // Round-trip counts must depend neither on heartbeat timing under load (the bound has its own
    // tests below) nor on a usage-counter flush, whose script's HGETs count in commandstats.
    pair = await startSharedPair({ stalenessBoundMs: 10_000, countUsage: false });
    ({ redis, db, a, b } = pair);
    both = [a, b];
  });

  afterAll(() => pair?.close());

  async function warm(req: EnvoyRequest, expected: string) {
    for (const sc of both) {
      expect(outcomeOf(await sc.client.check(req))).toBe(expected);
      const before = sc.sidecar.store.stats().hits;
      expect(outcomeOf(await sc.client.check(req))).toBe(expected);
      expect(sc.sidecar.store.stats().hits).toBeGreaterThan(before); // answered from the cache
    }
  }

  it('answers a warm key from memory: no Redis read per request', async () => {
    const k = await seedKey(db, s);
    await warm(chatRequest(k.key), 'allow');
    const [hmget, hget] = [await commandCalls(db, 'hmget'), await commandCalls(db, 'hget')];
    for (let i = 0; i < 20; i++) for (const sc of both) expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('allow');
    expect(await commandCalls(db, 'hmget')).toBe(hmget);
    expect(await commandCalls(db, 'hget')).toBe(hget);
  });

  it('revoke is seen on the next request at both sidecars', async () => {
    for (let t = 0; t < TRIALS; t++) {
      const k = await seedKey(db, s);
      await warm(chatRequest(k.key), 'allow');
      await changeSeenAtOnce(both, chatRequest(k.key), () => db.hset(s.keyRecord(k.digest), KeyField.status, 'revoked'), 'INVALID_API_KEY');
    }
  });

  it('deleting the record is seen on the next request', async () => {
    const k = await seedKey(db, s);
    await warm(chatRequest(k.key), 'allow');
    await changeSeenAtOnce(both, chatRequest(k.key), () => db.del(s.keyRecord(k.digest)), 'INVALID_API_KEY');
  });

  it('disabling and re-enabling the account is seen on the next request', async () => {
    for (let t = 0; t < TRIALS; t++) {
      const k = await seedKey(db, s);
      await warm(chatRequest(k.key), 'allow');
      await changeSeenAtOnce(both, chatRequest(k.key), () => setAccountStatus(db, s, k.account, 'disabled'), 'USER_BLOCKED');
      await changeSeenAtOnce(both, chatRequest(k.key), () => setAccountStatus(db, s, k.account, 'active'), 'allow');
    }
  });

  it('restricting the models is seen on the next request', async () => {
    for (let t = 0; t < TRIALS; t++) {
      const k = await seedKey(db, s);
      const req = chatRequest(k.key, 'openai/gpt-4o');
      await warm(req, 'allow');
      await changeSeenAtOnce(both, req, () => db.hset(s.keyRecord(k.digest), KeyField.models, encodeModels(['openai/gpt-4o-mini'])), 'MODEL_NOT_ALLOWED');
    }
  });

  it('setting an expiry in the past is seen on the next request', async () => {
    for (let t = 0; t < TRIALS; t++) {
      const k = await seedKey(db, s);
      await warm(chatRequest(k.key), 'allow');
      await changeSeenAtOnce(both, chatRequest(k.key), () => db.hset(s.keyRecord(k.digest), KeyField.expiresAt, String(Date.now() - 1000)), 'API_KEY_EXPIRED');
    }
  });

  it('a key created after being looked up (negative entry) is allowed on the next request', async () => {
    for (let t = 0; t < TRIALS; t++) {
      const key = generateKey();
      await warm(chatRequest(key), 'INVALID_API_KEY');
      await changeSeenAtOnce(both, chatRequest(key), () => seedKey(db, s, { key }), 'allow');
    }
  });

  it('FLUSHALL drops every cached answer', async () => {
    const k = await seedKey(db, s);
    await warm(chatRequest(k.key), 'allow');
    await changeSeenAtOnce(both, chatRequest(k.key), () => db.flushall(), 'INVALID_API_KEY');
  });

  it('a burst of concurrent requests for one cold key makes one Redis lookup', async () => {
    const k = await seedKey(db, s);
    const [hmget, hget, hgetall] = [await commandCalls(db, 'hmget'), await commandCalls(db, 'hget'), await commandCalls(db, 'hgetall')];
    const coalescedBefore = a.sidecar.store.stats().coalesced;
    const results = await Promise.all(Array.from({ length: 64 }, () => a.client.check(chatRequest(k.key))));
    expect(results.map(outcomeOf)).toEqual(results.map(() => 'allow'));
    // One read of each record for all 64: the key and the account (HMGET each, with their rate
    // fields), the account's gate (HGETALL).
    expect(await commandCalls(db, 'hmget')).toBe(hmget + 2);
    expect(await commandCalls(db, 'hget')).toBe(hget);
    expect(await commandCalls(db, 'hgetall')).toBe(hgetall + 1);
    expect(a.sidecar.store.stats().coalesced).toBeGreaterThan(coalescedBefore);
  });

  for (const [link, victim] of [
    ['invalidation', 'TYPE pubsub'],
    ['data', 'name'],
  ] as const) {
    it(`a change made while the ${link} link is down is honoured after it comes back`, async () => {
      for (let t = 0; t < 3; t++) {
        const k = await seedKey(db, s);
        await warm(chatRequest(k.key), 'allow');
        const flushes = both.map((sc) => sc.sidecar.store.stats().flushes);
        if (victim === 'name') {
          const ids = String(await db.call('CLIENT', 'LIST')).split('\n').filter((l: string) => l.includes(' name=keygate-sidecar ')).map((l: string) => /id=(\d+)/.exec(l)![1]!);
          expect(ids.length).toBe(2);
          for (const id of ids) await db.call('CLIENT', 'KILL', 'ID', id);
        } else {
          expect(Number(await db.call('CLIENT', 'KILL', 'TYPE', 'pubsub'))).toBe(2);
        }
        // The links are down (they take ≥100 ms to come back): change the key now.
        await db.hset(s.keyRecord(k.digest), KeyField.status, 'revoked');
        await waitFor(() => both.every((sc, i) => sc.sidecar.store.stats().flushes > flushes[i]!), 'cache drop');
        await waitTracking(a, b);
        for (const sc of both) expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('INVALID_API_KEY');
        // …and caching resumed.
        const k2 = await seedKey(db, s);
        await warm(chatRequest(k2.key), 'allow');
      }
    });
  }

  it('a flood of random unknown keys keeps the cache within its bound and keeps warm keys warm', async () => {
    const c = await startTestSidecar(redis.url, { cacheMaxEntries: 40, storeMaxInflight: 8 });
    try {
      await waitTracking(c);
      const good = await seedKey(db, s);
      expect(outcomeOf(await c.client.check(chatRequest(good.key)))).toBe('allow');
      let maxInflight = 0;
      for (let round = 0; round < 10; round++) {
        const res = await Promise.all(Array.from({ length: 50 }, () => c.client.check(chatRequest(generateKey()))));
        for (const r of res) expect(['INVALID_API_KEY', 'AUTH_UNAVAILABLE']).toContain(outcomeOf(r));
        const st = c.sidecar.store.stats();
        expect(st.size).toBeLessThanOrEqual(40);
        expect(st.negativeSize).toBeLessThanOrEqual(10);
        maxInflight = Math.max(maxInflight, st.inflight);
      }
      expect(maxInflight).toBeLessThanOrEqual(8);
      const hmget = await commandCalls(db, 'hmget');
      expect(outcomeOf(await c.client.check(chatRequest(good.key)))).toBe('allow');
      expect(await commandCalls(db, 'hmget')).toBe(hmget); // the grant survived the flood
    } finally {
      await c.close();
    }
  });
});

describe('Redis outage', () => {
  let redis: RedisServer;
  let db: Redis;
  let sc: TestSidecar;

  beforeAll(async () => {
    redis = await startRedis();
    db = redis.client();
    sc = await startTestSidecar(redis.url, { redisTimeoutMs: 300 });
    await waitTracking(sc);
  });

  afterAll(async () => {
    await sc?.close();
    await destroyRedis(redis);
  });

  it('killed mid-load: 503s, every request answered in bounded time; restarted: recovers by itself', async () => {
    const keys = await Promise.all(Array.from({ length: 5 }, () => seedKey(db, s)));
    let stop = false;
    let killed = false;
    const seen: Array<{ outcome: string; ms: number; afterKill: boolean }> = [];
    const loops = Array.from({ length: 8 }, async (_, i) => {
      for (let n = 0; !stop; n++) {
        const key = n % 3 === 0 ? generateKey() : keys[(i + n) % keys.length]!.key;
        const afterKill = killed;
        const t0 = Date.now();
        const res = await sc.client.check(chatRequest(key), 10_000);
        seen.push({ outcome: outcomeOf(res), ms: Date.now() - t0, afterKill });
        await new Promise((r) => setTimeout(r, 2));
      }
    });
    await new Promise((r) => setTimeout(r, 300));
    await redis.stop();
    killed = true;
    await new Promise((r) => setTimeout(r, 1500));
    const during = seen.filter((x) => x.afterKill);
    expect(during.length).toBeGreaterThan(20);
    for (const x of during) expect(x.outcome).toBe('AUTH_UNAVAILABLE');
    expect(sc.sidecar.store.ready()).toBe(false);

    await redis.start();
    db = redis.client();
    for (const k of keys) await seedKey(db, s, { key: k.key });
    await waitFor(() => seen.at(-1)?.outcome === 'allow' || seen.at(-1)?.outcome === 'INVALID_API_KEY', 'recovery', 30_000);
    await waitTracking(sc);
    stop = true;
    await Promise.all(loops);
    // No request waited past the bound: two store lookups of ≤300 ms each, plus scheduling slack.
    expect(Math.max(...seen.map((x) => x.ms))).toBeLessThan(3000);
    expect(sc.sidecar.store.ready()).toBe(true);
    expect(sc.sidecar.store.stats().reconnects).toBeGreaterThan(0);
    expect(outcomeOf(await sc.client.check(chatRequest(keys[0]!.key)))).toBe('allow');
  });
});

describe('serveCachedDuringOutage', () => {
  it('on: cached answers are served while Redis is down, and dropped once it is back', async () => {
    const redis = await startRedis();
    const sc = await startTestSidecar(redis.url, { redisTimeoutMs: 300, serveCachedDuringOutage: true });
    try {
      await waitTracking(sc);
      const k = await seedKey(redis.client(), s);
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('allow');
      expect(outcomeOf(await sc.client.check(chatRequest(generateKey())))).toBe('INVALID_API_KEY');
      await redis.stop();
      await waitFor(() => !sc.sidecar.store.stats().tracking, 'link loss');
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('allow');
      expect(outcomeOf(await sc.client.check(chatRequest(generateKey())))).toBe('AUTH_UNAVAILABLE'); // not cached
      expect(sc.sidecar.store.stats().staleServed).toBeGreaterThan(0);
      // Restarted empty (no persistence): the key is gone, and the stale entry must not survive.
      await redis.start();
      await waitTracking(sc);
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('INVALID_API_KEY');
    } finally {
      await sc.close();
      await destroyRedis(redis);
    }
  });

  it('off (default): nothing cached is served while Redis is down', async () => {
    const redis = await startRedis();
    const sc = await startTestSidecar(redis.url, { redisTimeoutMs: 300 });
    try {
      await waitTracking(sc);
      const k = await seedKey(redis.client(), s);
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('allow');
      await redis.stop();
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('AUTH_UNAVAILABLE');
      expect(sc.sidecar.store.stats().size).toBe(0);
    } finally {
      await sc.close();
      await destroyRedis(redis);
    }
  });
});

/** Default staleness bound (`KEYGATE_STALENESS_BOUND_MS`). */
const BOUND_MS = 250;

/**
 * Sends checks one after another for `forMs` from `t0` and returns when each was sent and what it
 * got. A decision is made after its request was sent, so an allow sent at `t0 + BOUND_MS` or later
 * was decided at least the bound after `t0`.
 */
async function checksFrom(sc: TestSidecar, key: string, t0: number, forMs: number): Promise<Array<{ at: number; outcome: string }>> {
  const seen: Array<{ at: number; outcome: string }> = [];
  while (Date.now() - t0 < forMs) {
    const at = Date.now() - t0;
    seen.push({ at, outcome: outcomeOf(await sc.client.check(chatRequest(key), 10_000)) });
  }
  return seen;
}

describe(`staleness bound (${BOUND_MS} ms by default) for what Redis does not announce`, () => {
  it('a link that dies silently (no FIN, no RST) stops cached answers within the bound and drops the cache', async () => {
    const redis = await startRedis();
    const proxy = await startBlackholeProxy(redis.port).catch(async (err) => {
      await destroyRedis(redis);
      throw err;
    });
    let sc: TestSidecar | undefined;
    try {
      sc = await startTestSidecar(proxy.url, { redisTimeoutMs: 300, stalenessBoundMs: BOUND_MS });
      await waitTracking(sc);
      const db = redis.client(); // straight to Redis, not through the proxy
      const k = await seedSettled(sc, db);
      await warmAllow(sc, k.key);
      const flushes = sc.sidecar.store.stats().flushes;
      const t0 = Date.now();
      proxy.blackhole();
      await db.hset(s.keyRecord(k.digest), KeyField.status, 'revoked'); // its invalidation is lost in the hole
      const seen = await checksFrom(sc, k.key, t0, 1500);
      const lastAllow = Math.max(-1, ...seen.filter((x) => x.outcome === 'allow').map((x) => x.at));
      console.log(`silent link death: last cached allow sent ${lastAllow} ms after the link died (bound ${BOUND_MS} ms)`);
      const late = seen.filter((x) => x.at >= BOUND_MS);
      expect(late.length).toBeGreaterThan(0);
      expect(late.filter((x) => x.outcome === 'allow')).toEqual([]);
      expect(sc.sidecar.store.stats().flushes).toBeGreaterThan(flushes);
      expect(sc.sidecar.store.stats().tracking).toBe(false);
      // The network heals: the sidecar reconnects by itself and sees the revoke.
      proxy.heal();
      await waitTracking(sc);
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('INVALID_API_KEY');
    } finally {
      await sc?.close();
      await proxy.close();
      await destroyRedis(redis);
    }
  });

  it('SWAPDB to a copy of the data where the key is revoked (not announced by Redis) is seen within the bound', async () => {
    const redis = await startRedis();
    let sc: TestSidecar | undefined;
    const db1 = new Redis({ port: redis.port, host: '127.0.0.1', db: 1 });
    db1.on('error', () => {});
    try {
      sc = await startTestSidecar(redis.url, { stalenessBoundMs: BOUND_MS });
      await waitTracking(sc);
      const db = redis.client();
      const k = await seedSettled(sc, db);
      await seedKey(db1, s, { key: k.key, account: k.account, status: 'revoked' });
      await warmAllow(sc, k.key);
      const t0 = Date.now();
      await db.swapdb(0, 1);
      const seen = await checksFrom(sc, k.key, t0, 800);
      const lastAllow = Math.max(-1, ...seen.filter((x) => x.outcome === 'allow').map((x) => x.at));
      console.log(`SWAPDB: last cached allow sent ${lastAllow} ms after the swap (bound ${BOUND_MS} ms)`);
      const late = seen.filter((x) => x.at >= BOUND_MS);
      expect(late.length).toBeGreaterThan(0);
      expect(late.filter((x) => x.outcome === 'allow')).toEqual([]);
      await waitTracking(sc);
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('INVALID_API_KEY');
      // Swapped back: the original data (key active) is seen again, and caching resumes.
      await db.swapdb(0, 1);
      await waitFor(async () => outcomeOf(await sc!.client.check(chatRequest(k.key))) === 'allow', 'swap back seen', 5000);
      await waitTracking(sc);
      await warmAllow(sc, k.key);
    } finally {
      db1.disconnect();
      await sc?.close();
      await destroyRedis(redis);
    }
  });
});

/** Seeds a key and waits until the sidecar has received the invalidation of that write. */
async function seedSettled(sc: TestSidecar, db: Redis) {
  const inv = sc.sidecar.store.stats().invalidations;
  const k = await seedKey(db, s);
  await waitFor(() => sc.sidecar.store.stats().invalidations > inv, 'invalidation of the seeded record');
  return k;
}
