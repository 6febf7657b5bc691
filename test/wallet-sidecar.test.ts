/**
 * Wallet, spend limits and usage counting as the sidecars see them: two sidecars sharing one Redis
 * answer from their caches and still refuse on the very next request once a usage record empties a
 * wallet or takes a key to its limit, and allow again on the next request after a credit, a raised
 * limit or a new period. Recording usage below the thresholds never invalidates their caches.
 * Allowed requests are counted in memory and flushed at most once a second.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis as IORedis, type Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { KeyUseField, periodBounds } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { redisUsageWrite, UsageCounter } from '../src/store/usage-counter.ts';
import { changeSeenAtOnce } from './helpers/propagation.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { chatRequest, outcomeOf, startSharedPair, startTestSidecar, waitFor, waitTracking, type SharedPair, type TestSidecar } from './helpers/sidecars.ts';
import { FakeClock } from './unit/fake-clock.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const s = schema();
let pair: SharedPair;
let redis: RedisServer;
let db: Redis;
let kc: KeyConsole;
let a: TestSidecar;
let b: TestSidecar;
let both: TestSidecar[];

beforeAll(async () => {
  pair = await startSharedPair({ stalenessBoundMs: 10_000 });
  ({ redis, db, a, b } = pair);
  both = [a, b];
  kc = new KeyConsole({ redis: redis.url, revealKey: REVEAL });
});

afterAll(async () => {
  await kc?.close();
  await pair?.close();
});

const acct = () => `acct-${randomBytes(4).toString('hex')}`;
let seq = 0;
const rid = () => `req-${++seq}-${randomBytes(3).toString('hex')}`;

/** Both sidecars answer `expected` twice, the second time from memory. */
async function warm(key: string, expected: string): Promise<void> {
  for (const sc of both) {
    expect(outcomeOf(await sc.client.check(chatRequest(key)))).toBe(expected);
    const hits = sc.sidecar.store.stats().hits;
    expect(outcomeOf(await sc.client.check(chatRequest(key)))).toBe(expected);
    expect(sc.sidecar.store.stats().hits).toBeGreaterThan(hits);
  }
}

describe('the wallet', () => {
  it('a record that empties the wallet is refused on the next request at both sidecars; a credit lifts it the same way', async () => {
    for (let t = 0; t < 4; t++) {
      const account = acct();
      const k = await kc.createKey({ account, name: 'w' });
      await kc.creditAccount(account, 1_000, `seed-${t}`);
      await kc.recordUsage({ keyId: k.id, amountMicros: 600, requestId: rid() });
      await warm(k.key, 'allow');
      await changeSeenAtOnce(both, chatRequest(k.key), () => kc.recordUsage({ keyId: k.id, amountMicros: 400, requestId: rid() }), 'INSUFFICIENT_BALANCE');
      await changeSeenAtOnce(both, chatRequest(k.key), () => kc.creditAccount(account, 1, `pay-${t}`), 'allow');
    }
  });

  it('recording usage below the thresholds keeps the caches warm: no invalidation, no Redis read', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'busy', limit: { amountMicros: 1_000_000_000, period: 'day' } });
    await kc.creditAccount(account, 1_000_000_000, 'seed');
    await warm(k.key, 'allow');
    const before = both.map((sc) => ({ ...sc.sidecar.store.stats() }));
    await Promise.all(Array.from({ length: 300 }, () => kc.recordUsage({ keyId: k.id, amountMicros: 1_000, requestId: rid() })));
    for (const [i, sc] of both.entries()) {
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('allow');
      const st = sc.sidecar.store.stats();
      expect(st.invalidations).toBe(before[i]!.invalidations);
      expect(st.misses).toBe(before[i]!.misses);
      expect(st.flushes).toBe(before[i]!.flushes);
    }
  });

  it('an account never credited is not metered; with KEYGATE_REQUIRE_WALLET it is refused until credited', async () => {
    const strict = await startTestSidecar(redis.url, { requireWallet: true });
    try {
      await waitTracking(strict);
      const account = acct();
      const k = await kc.createKey({ account, name: 'n' });
      expect(outcomeOf(await a.client.check(chatRequest(k.key)))).toBe('allow');
      expect(outcomeOf(await strict.client.check(chatRequest(k.key)))).toBe('INSUFFICIENT_BALANCE');
      await kc.creditAccount(account, 5, 'first');
      expect(outcomeOf(await strict.client.check(chatRequest(k.key)))).toBe('allow');
    } finally {
      await strict.close();
    }
  });

  it('a corrupt gate record fails closed (503) for the account, and recovers when repaired', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'corrupt' });
    await warm(k.key, 'allow');
    await changeSeenAtOnce(both, chatRequest(k.key), () => db.hset(s.gate(account), 'wallet', 'bogus'), 'AUTH_UNAVAILABLE');
    await changeSeenAtOnce(both, chatRequest(k.key), () => db.hdel(s.gate(account), 'wallet'), 'allow');
  });
});

describe('a cold key', () => {
  it('costs the key read, then the account and gate reads together (two round trips), and nothing once cached', async () => {
    const calls = async () => {
      const info = await db.info('commandstats');
      const n = (c: string) => Number(new RegExp(`cmdstat_${c}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      return { hmget: n('hmget'), hget: n('hget'), hgetall: n('hgetall') };
    };
    const account = acct();
    const k = await kc.createKey({ account, name: 'cold' });
    await kc.creditAccount(account, 10, 'seed');
    // Its own sidecar without usage counting, and the pair's counts written first: a counter flush's
    // script HGETs would count in commandstats.
    const c = await startTestSidecar(redis.url, { countUsage: false, stalenessBoundMs: 10_000 });
    try {
      await waitTracking(c);
      for (const sc of both) await sc.sidecar.usage!.flush();
      const before = await calls();
      expect(outcomeOf(await c.client.check(chatRequest(k.key)))).toBe('allow');
      const after = await calls();
      // The key record and the account's state with its rates are HMGETs; the gate an HGETALL.
      expect([after.hmget - before.hmget, after.hget - before.hget, after.hgetall - before.hgetall]).toEqual([2, 0, 1]);
      for (let i = 0; i < 5; i++) expect(outcomeOf(await c.client.check(chatRequest(k.key)))).toBe('allow');
      expect(await calls()).toEqual(after);
    } finally {
      await c.close();
    }
  });
});

describe('key spend limits', () => {
  it('reaching the limit is refused on the next request at both sidecars; raising it lifts it the same way', async () => {
    for (let t = 0; t < 4; t++) {
      const account = acct();
      const k = await kc.createKey({ account, name: 'l', limit: { amountMicros: 500, period: 'week' } });
      await kc.recordUsage({ keyId: k.id, amountMicros: 499, requestId: rid() });
      await warm(k.key, 'allow');
      await changeSeenAtOnce(both, chatRequest(k.key), () => kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid() }), 'KEY_LIMIT_EXCEEDED');
      await changeSeenAtOnce(both, chatRequest(k.key), () => kc.setKeyLimit(k.id, { amountMicros: 501, period: 'week' }), 'allow');
      await changeSeenAtOnce(both, chatRequest(k.key), () => kc.setKeyLimit(k.id, { amountMicros: 100, period: 'total' }), 'KEY_LIMIT_EXCEEDED');
      await changeSeenAtOnce(both, chatRequest(k.key), () => kc.setKeyLimit(k.id, null), 'allow');
    }
  });

  it('a block ends with its period at both sidecars from their caches, without any write', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'p' });
    // A block that ends shortly (as a limit reached just before midnight would).
    const ends = Date.now() + 600;
    await db.hset(s.gate(account), `limit:${k.id}`, String(ends));
    await warm(k.key, 'KEY_LIMIT_EXCEEDED');
    const before = both.map((sc) => ({ ...sc.sidecar.store.stats() }));
    await waitFor(() => Date.now() > ends + 5, 'the end of the period');
    for (const [i, sc] of both.entries()) {
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('allow');
      expect(sc.sidecar.store.stats().invalidations).toBe(before[i]!.invalidations);
      expect(sc.sidecar.store.stats().misses).toBe(before[i]!.misses);
    }
    expect(periodBounds('day', ends).end).toBeGreaterThan(ends);
  });

  it('a limit on one key does not refuse the account\'s other keys', async () => {
    const account = acct();
    const capped = await kc.createKey({ account, name: 'capped', limit: { amountMicros: 1, period: 'month' } });
    const free = await kc.createKey({ account, name: 'free' });
    await kc.recordUsage({ keyId: capped.id, amountMicros: 1, requestId: rid() });
    expect(outcomeOf(await a.client.check(chatRequest(capped.key)))).toBe('KEY_LIMIT_EXCEEDED');
    expect(outcomeOf(await a.client.check(chatRequest(free.key)))).toBe('allow');
  });
});

describe('402 in each family\'s shape', () => {
  it('OpenAI insufficient_quota, Anthropic billing_error, Google FAILED_PRECONDITION; never retried', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'shapes' });
    await kc.creditAccount(account, 1, 'seed');
    await kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid() });
    const shapes = {
      openai: (body: any) => expect(body.error).toMatchObject({ type: 'insufficient_quota', code: 'INSUFFICIENT_BALANCE', param: null }),
      anthropic: (body: any) => expect(body).toMatchObject({ type: 'error', error: { type: 'billing_error', code: 'INSUFFICIENT_BALANCE' } }),
      google: (body: any) =>
        expect(body.error).toMatchObject({ code: 402, status: 'FAILED_PRECONDITION', details: [{ reason: 'INSUFFICIENT_BALANCE' }] }),
    };
    for (const [protocol, check] of Object.entries(shapes)) {
      const res = await a.client.check({ ...chatRequest(k.key), contextExtensions: { protocol } });
      const d = res.denied_response!;
      expect(d.status?.code).toBe(402);
      const headers = Object.fromEntries((d.headers ?? []).map((h) => [h.header.key, h.header.value]));
      expect(headers['x-should-retry']).toBe('false');
      expect(headers['content-type']).toBe('application/json');
      const body = JSON.parse(d.body!);
      check(body);
      expect(JSON.stringify(body)).not.toContain(k.key);
    }
  });
});

describe('usage counting', () => {
  it('counts allowed requests of both sidecars, flushes within about a second, shows them on the key', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'counted' });
    const started = Date.now();
    for (let i = 0; i < 7; i++) expect(outcomeOf(await (i % 2 ? b : a).client.check(chatRequest(k.key)))).toBe('allow');
    await waitFor(async () => (await kc.getKeyView(k.id)).usage.requests.today === 7, 'counts flushed', 5_000);
    const u = (await kc.getKeyView(k.id)).usage;
    expect(u.requests).toEqual({ today: 7, month: 7 });
    expect(u.lastUsedAt).toBeGreaterThanOrEqual(started - 5);
    expect(u.lastUsedAt).toBeLessThanOrEqual(Date.now());
  });

  it("the sidecar writes its counts once a second (USAGE_FLUSH_MS): 4.5 s of requests, at least three separate writes, none 2 s apart", async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'cadence' });
    const useKey = s.keyUse(account, k.id);
    const writes: number[] = [];
    const mon = await db.monitor();
    mon.on('monitor', (time: string, args: string[]) => {
      // the KEY_USE script call itself (MONITOR also shows the commands it runs)
      if (/^eval/i.test(args[0] ?? '') && args.includes(useKey)) writes.push(Math.round(Number(time) * 1000));
    });
    try {
      await new Promise((r) => setTimeout(r, 100));
      const end = Date.now() + 4500;
      while (Date.now() < end) {
        expect(outcomeOf(await a.client.check(chatRequest(k.key)))).toBe('allow');
        await new Promise((r) => setTimeout(r, 50));
      }
      await waitFor(async () => (await kc.getKeyView(k.id)).usage.requests.today > 0, 'a write', 3000);
    } finally {
      mon.disconnect();
    }
    // a 4 s interval writes at most twice in 4.5 s; one second writes four or five times
    expect(writes.length, `writes at ${writes.join(', ')}`).toBeGreaterThanOrEqual(3);
    const gaps = writes.slice(1).map((t, i) => t - writes[i]!);
    expect(Math.max(...gaps), `gaps ${gaps.join(', ')} ms`).toBeLessThan(2000);
  }, 20_000);

  it('denied requests are not counted', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'denied', limit: { amountMicros: 1, period: 'day' } });
    await kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid() });
    for (let i = 0; i < 3; i++) expect(outcomeOf(await a.client.check(chatRequest(k.key)))).toBe('KEY_LIMIT_EXCEEDED');
    await a.sidecar.usage!.flush();
    expect((await kc.getKeyView(k.id)).usage).toMatchObject({ lastUsedAt: null, requests: { today: 0, month: 0 } });
  });

  it('a sidecar that shuts down flushes what it counted', async () => {
    const c = await startTestSidecar(redis.url);
    const account = acct();
    const k = await kc.createKey({ account, name: 'shutdown' });
    try {
      await waitTracking(c); // connected and settled before the counted checks
      for (let i = 0; i < 3; i++) expect(outcomeOf(await c.client.check(chatRequest(k.key)))).toBe('allow');
    } finally {
      await c.close();
    }
    expect((await kc.getKeyView(k.id)).usage.requests.today).toBe(3);
  });

  it('holds at most maxKeys keys between flushes and writes them in one pipeline', async () => {
    const log = createLogger('silent');
    const counter = new UsageCounter(redisUsageWrite(db, s), log, { intervalMs: 60_000, maxKeys: 10 });
    try {
      const account = acct();
      const ids = Array.from({ length: 40 }, (_, i) => `key_flood${String(i).padStart(12, '0')}`);
      for (const id of ids) for (let n = 0; n < 3; n++) counter.count(id, account);
      expect(counter.pendingKeys).toBe(10);
      expect(counter.dropped).toBe(90);
      const calls = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await db.info('commandstats'))?.[1] ?? 0) + Number(/cmdstat_eval:calls=(\d+)/.exec(await db.info('commandstats'))?.[1] ?? 0);
      const before = await calls();
      await counter.flush();
      expect(counter.pendingKeys).toBe(0);
      expect((await calls()) - before).toBeLessThanOrEqual(11); // one script call per key (+ one load)
      const use = await db.hgetall(s.keyUse(account, ids[0]!));
      expect(use).toMatchObject({ day: '3', month: '3' });
      expect(await db.exists(s.keyUse(account, ids[39]!))).toBe(0);
    } finally {
      await counter.close();
    }
  });

  it('an older flush never overwrites a newer last_used (two sidecars, the later one flushing first)', async () => {
    const account = acct();
    const id = 'key_lastusedlastused';
    const T = 1_800_000_000_000;
    const flushAt = async (t: number) => {
      const counter = new UsageCounter(redisUsageWrite(db, s), createLogger('silent'), { intervalMs: 60_000, clock: new FakeClock(t) });
      counter.count(id, account);
      await counter.close();
    };
    await flushAt(T + 5000); // the newer use, written first
    await flushAt(T); // an older use, written later
    expect(await db.hget(s.keyUse(account, id), KeyUseField.lastUsed)).toBe(String(T + 5000));
    await flushAt(T + 5001); // the control: a newer one does move it
    expect(await db.hget(s.keyUse(account, id), KeyUseField.lastUsed)).toBe(String(T + 5001));
  });

  it('a flush asked for while another is writing also writes what was counted since', async () => {
    const counter = new UsageCounter(redisUsageWrite(db, s), createLogger('silent'), { intervalMs: 60_000 });
    try {
      const account = acct();
      counter.count('key_racedracedraced', account);
      const first = counter.flush(); // the timer's flush, say: it has taken its batch
      counter.count('key_racedracedraced', account);
      counter.count('key_racedracedraced', account);
      await counter.flush(); // the caller's: must cover the two counted after the first began
      await first;
      expect(await db.hget(s.keyUse(account, 'key_racedracedraced'), 'day')).toBe('3');
      expect(counter.pendingKeys).toBe(0);
    } finally {
      await counter.close();
    }
  });

  it('a flush that fails keeps its counts for the next one (Redis down, then back)', async () => {
    const own = await startRedis();
    const client = new IORedis({ port: own.port, host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    client.on('error', () => {});
    const counter = new UsageCounter(redisUsageWrite(client, s), createLogger('silent'), { intervalMs: 60_000 });
    try {
      await waitFor(() => client.status === 'ready', 'client ready');
      for (let i = 0; i < 5; i++) counter.count('key_downdowndowndown', 'acct-down');
      await own.stop();
      await counter.flush();
      expect(counter.failedFlushes).toBe(1);
      expect(counter.pendingKeys).toBe(1);
      counter.count('key_downdowndowndown', 'acct-down');
      await own.start();
      await waitFor(() => client.status === 'ready', 'client reconnected');
      await counter.flush();
      expect(await own.client().hget(s.keyUse('acct-down', 'key_downdowndowndown'), 'day')).toBe('6');
    } finally {
      await counter.close();
      client.disconnect();
      await destroyRedis(own);
    }
  });
});

