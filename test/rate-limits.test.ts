/**
 * The shared request-rate limiter and the token-rate booking against real Redis: several limiters
 * (separate connections, as separate sidecars; two child processes in one case) hammering one key,
 * the bound (exact below 100; never above the limit, nothing refused below 95%), window roll-over,
 * Redis stopped mid-window (the local share, then fail closed), key and account rates together,
 * token blocks in the gate, and one case each on Cluster and Sentinel.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { leasePool, windowOf } from '../src/core/rate.ts';
import { systemClock } from '../src/core/clock.ts';
import { BOOK_TOKENS, SET_TOKEN_RATE } from '../src/schema/rate-scripts.ts';
import { parseRateText, parseTokenBlocks, rateKeys, type Rate } from '../src/schema/rates.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { RateLimiter, type RateRequest, type TakeResult } from '../src/store/rate-limiter.ts';
import { TokenRateViews } from '../src/store/token-rate-views.ts';
import { connectRedis, type RedisClient } from '../src/store/redis.ts';
import { startCluster } from './helpers/redis-cluster.ts';
import { startSentinel } from './helpers/redis-sentinel.ts';
import { awayFromWindowEnd } from './helpers/rate-window.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { count, hammer, tally, type Tally } from './helpers/rate-hammer.ts';

const s = schema('kg');
const rk = rateKeys(s);
const rate = (text: string, kind: 'requests' | 'tokens' = 'requests'): Rate => {
  const r = parseRateText(text, kind);
  if ('error' in r) throw new Error(r.error);
  return r;
};
let seq = 0;
/** A fresh account and key (so no test sees another's window). */
function keyReq(keyRate: string | null, accountRate: string | null = null, account = `acct-${process.pid}-${++seq}`, keyId = `key_${String(++seq).padStart(16, '0')}`): RateRequest {
  return {
    keyWindow: rk.requests(account, keyId),
    keyRate: keyRate === null ? null : rate(keyRate),
    accountWindow: rk.requests(account),
    accountRate: accountRate === null ? null : rate(accountRate),
  };
}

function sum(ts: Tally[]): Tally {
  const t = tally();
  for (const x of ts) {
    t.allowed += x.allowed;
    t.refused += x.refused;
    t.unavailable += x.unavailable;
  }
  return t;
}

async function windowState(c: RedisClient, rkey: string): Promise<{ counted: number; held: number }> {
  const [, cc, h] = await c.hmget(rkey, 'w', 'c', 'h');
  return { counted: Number(cc ?? 0), held: Number(h ?? 0) };
}

const clients: RedisClient[] = [];
const limiters: RateLimiter[] = [];
/** A limiter on its own connection (as one sidecar), once the connection is ready. */
async function limiterOn(url: string, opts: ConstructorParameters<typeof RateLimiter>[1] = {}, timeoutMs = 2000): Promise<RateLimiter> {
  const c = connectRedis(url, { commandTimeoutMs: timeoutMs, connectionName: 'rate-test' });
  c.on('error', () => {});
  clients.push(c);
  if (c.status !== 'ready') await new Promise((resolve) => c.once('ready', resolve));
  const l = new RateLimiter(c, opts);
  limiters.push(l);
  return l;
}

afterAll(async () => {
  await Promise.allSettled(limiters.map((l) => l.close()));
  for (const c of clients) c.disconnect();
});

describe('standalone Redis', () => {
  let redis: RedisServer;
  let probe: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    probe = redis.client();
  });
  afterAll(async () => {
    await destroyRedis(redis);
  });

  for (const sidecars of [2, 4]) {
    for (const limit of [5, 50, 100, 1000]) {
      it(`${sidecars} sidecars hammering one key limited to ${limit}/d`, async () => {
        await awayFromWindowEnd('day');
        const req = keyReq(`${limit}/d`);
        const ls = await Promise.all(Array.from({ length: sidecars }, () => limiterOn(redis.url)));
        const attempts = Math.ceil((limit * 2 + 40) / sidecars);
        const tallies = await Promise.all(ls.map((l) => hammer(l, req, attempts, 16)));
        const t = sum(tallies);
        const w = await windowState(probe, req.keyWindow!);
        expect(t.unavailable).toBe(0);
        expect(t.allowed + t.refused).toBe(attempts * sidecars);
        expect(w.counted).toBeLessThanOrEqual(limit);
        expect(w.held).toBeLessThanOrEqual(leasePool(limit));
        // What was counted is what was allowed plus leases not yet used.
        expect(t.allowed).toBeLessThanOrEqual(w.counted);
        expect(t.allowed).toBeGreaterThanOrEqual(w.counted - w.held);
        if (limit < 100) expect(t.allowed).toBe(limit);
        else {
          expect(t.allowed).toBeLessThanOrEqual(limit);
          expect(t.allowed).toBeGreaterThanOrEqual(Math.ceil(limit * 0.95));
        }
        // Demand beyond the limit was refused by every sidecar in the key's name.
        for (const x of tallies) expect(x.refusedBy.account ?? 0).toBe(0);
        // Leases given back: the others' unused units are free again, and a late request gets them.
        await Promise.all(ls.map((l) => l.close()));
        const after = await windowState(probe, req.keyWindow!);
        expect(after.held).toBe(0);
        expect(after.counted).toBe(t.allowed);
      });
    }
  }

  it('requests taken one at a time round-robin are refused exactly from limit − held on (and at the limit below 100)', async () => {
    await awayFromWindowEnd('day');
    for (const limit of [60, 200, 1000]) {
      const req = keyReq(`${limit}/d`);
      const ls = await Promise.all(Array.from({ length: 4 }, () => limiterOn(redis.url, { idleReleaseMs: 60_000 })));
      let allowed = 0;
      let firstRefusalAt = -1;
      for (let i = 0; i < limit + 50; i++) {
        const r = await ls[i % 4]!.take(req);
        if (r.kind === 'allow') {
          allowed++;
          expect(firstRefusalAt, 'nothing is allowed in a window after the first refusal of an exact limit').toBe(limit < 100 ? -1 : firstRefusalAt);
        } else {
          expect(r.kind).toBe('refuse');
          if (firstRefusalAt < 0) firstRefusalAt = allowed;
        }
      }
      if (limit < 100) expect(firstRefusalAt).toBe(limit);
      else expect(firstRefusalAt).toBeGreaterThanOrEqual(limit - leasePool(limit));
      expect(allowed).toBeLessThanOrEqual(limit);
      await Promise.all(ls.map((l) => l.close()));
    }
  });

  it('two sidecars in separate processes hold 100/d and 1000/d within the bound', async () => {
    await awayFromWindowEnd('day');
    const child = fileURLToPath(new URL('./helpers/rate-child.ts', import.meta.url));
    for (const limit of [100, 1000]) {
      const req = keyReq(`${limit}/d`);
      const procs = [0, 1].map(() => {
        const p = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', child, redis.url, JSON.stringify({ req, attempts: limit + 100, concurrency: 16 })], {
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let out = '';
        let err = '';
        p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
        p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
        const ready = new Promise<void>((resolve, reject) => {
          const check = () => (out.includes('ready\n') ? resolve() : undefined);
          p.stdout!.on('data', check);
          p.once('exit', (code) => reject(new Error(`child exited ${code}: ${err}`)));
        });
        const done = new Promise<Tally>((resolve, reject) =>
          p.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out.split('\n').filter(Boolean).pop()!)) : reject(new Error(`child exited ${code}: ${err}`)))),
        );
        ready.catch(() => {});
        done.catch(() => {});
        return { p, ready, done };
      });
      try {
        await Promise.all(procs.map((x) => x.ready));
        for (const x of procs) x.p.stdin!.write('go\n');
        const t = sum(await Promise.all(procs.map((x) => x.done)));
        expect(t.unavailable).toBe(0);
        expect(t.allowed).toBeLessThanOrEqual(limit);
        expect(t.allowed).toBeGreaterThanOrEqual(Math.ceil(limit * 0.95));
        // Both closed: nothing is held, everything counted was allowed.
        expect(await windowState(probe, req.keyWindow!)).toEqual({ counted: t.allowed, held: 0 });
      } finally {
        for (const x of procs) if (x.p.exitCode === null) x.p.kill('SIGKILL');
      }
    }
  }, 120_000);

  it('a window rolls over at the next UTC second: refused until then, admitted from then on', async () => {
    const l = await limiterOn(redis.url);
    const req = keyReq('5/s');
    // Start early in a second so that the first burst stays in one window.
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
    const results: TakeResult[] = [];
    for (let i = 0; i < 8; i++) results.push(await l.take(req));
    expect(results.map((r) => r.kind)).toEqual(['allow', 'allow', 'allow', 'allow', 'allow', 'refuse', 'refuse', 'refuse']);
    const refusal = results[5] as Extract<TakeResult, { kind: 'refuse' }>;
    expect(refusal.scope).toBe('key');
    const now = Date.now();
    expect(refusal.retryAt).toBeGreaterThan(now);
    expect(refusal.retryAt - now).toBeLessThanOrEqual(1000);
    // The window's end by this machine's clock (Redis runs on it too), within the round trip.
    expect(Math.abs(refusal.retryAt - windowOf('second', now).end)).toBeLessThan(50);
    await new Promise((r) => setTimeout(r, refusal.retryAt - Date.now() + 1));
    const next = tally();
    for (let i = 0; i < 7; i++) count(next, await l.take(req));
    expect(next.allowed).toBe(5);
    expect(next.refused).toBe(2);
    // A leased limit rolls over too: at most 200 in each second the burst touched, and at least 95%
    // of it when the burst stayed in one second.
    const big = keyReq('200/s');
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
    const startedAt = Date.now();
    const first = await hammer(l, big, 260, 8);
    const seconds = Math.floor(Date.now() / 1000) - Math.floor(startedAt / 1000) + 1;
    expect(first.allowed).toBeLessThanOrEqual(200 * seconds);
    if (seconds === 1) expect(first.allowed).toBeGreaterThanOrEqual(190);
  });

  it('a sidecar whose clock is off counts in the server\'s windows and waits for the server\'s window end', async () => {
    for (const skewMs of [3_700, -2_300]) {
      const l = await limiterOn(redis.url, { clock: { ...systemClock, now: () => Date.now() + skewMs } });
      const other = await limiterOn(redis.url);
      const req = keyReq('5/s');
      await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
      const t = tally();
      for (let i = 0; i < 3; i++) count(t, await l.take(req));
      for (let i = 0; i < 3; i++) count(t, await other.take(req));
      // One window for both, whatever the skewed sidecar's clock says.
      expect(t.allowed).toBe(5);
      const r = (await l.take(req)) as Extract<TakeResult, { kind: 'refuse' }>;
      expect(r.kind).toBe('refuse');
      // retryAt is on the skewed sidecar's own clock: the server's next second, shifted by the skew.
      const serverEnd = windowOf('second', Date.now()).end;
      expect(Math.abs(r.retryAt - skewMs - serverEnd)).toBeLessThan(50);
    }
  });

  it('key and account rates: the tighter refuses, in its own name; a refused request counts against nothing', async () => {
    await awayFromWindowEnd('day');
    const account = `acct-both-${process.pid}`;
    const k1 = keyReq('5/d', '8/d', account, 'key_aaaaaaaaaaaaaaaa');
    const k2 = keyReq('5/d', '8/d', account, 'key_bbbbbbbbbbbbbbbb');
    const [a, b] = [await limiterOn(redis.url), await limiterOn(redis.url)];
    const t1 = await hammer(a, k1, 15, 4);
    expect(t1.allowed).toBe(5);
    expect(t1.refusedBy).toEqual({ key: 10 });
    const t2 = await hammer(b, k2, 10, 4);
    expect(t2.allowed).toBe(3);
    expect(t2.refusedBy).toEqual({ account: 7 });
    expect((await windowState(probe, k1.accountWindow!)).counted).toBe(8);
    expect((await windowState(probe, k1.keyWindow!)).counted).toBe(5);
    expect((await windowState(probe, k2.keyWindow!)).counted).toBe(3);
    // Leased account limit shared by two keys on two sidecars.
    const k3 = keyReq(null, '400/d', `acct-both2-${process.pid}`, 'key_cccccccccccccccc');
    const k4 = keyReq(null, '400/d', `acct-both2-${process.pid}`, 'key_dddddddddddddddd');
    const both = sum(await Promise.all([hammer(a, k3, 300, 16), hammer(b, k4, 300, 16)]));
    expect(both.allowed).toBeLessThanOrEqual(400);
    expect(both.allowed).toBeGreaterThanOrEqual(380);
    // Two keys of one account on ONE sidecar at once: their batches race for the account's lease.
    const one = await limiterOn(redis.url);
    const acct3 = `acct-both3-${process.pid}`;
    const k5 = keyReq('150/d', '300/d', acct3, 'key_eeeeeeeeeeeeeeee');
    const k6 = keyReq('1000/d', '300/d', acct3, 'key_ffffffffffffffff');
    const [t5, t6] = await Promise.all([hammer(one, k5, 250, 16), hammer(one, k6, 250, 16)]);
    expect(t5.allowed).toBeLessThanOrEqual(150);
    expect(t5.allowed + t6.allowed).toBeLessThanOrEqual(300);
    expect(t5.allowed + t6.allowed).toBeGreaterThanOrEqual(285);
    await one.close();
    const acctAfter = await windowState(probe, k5.accountWindow!);
    expect(acctAfter).toEqual({ counted: t5.allowed + t6.allowed, held: 0 });
    expect((await windowState(probe, k5.keyWindow!)).counted).toBe(t5.allowed);
  });

  it('peek names a used-up request rate without counting; the window states stay bounded under a flood of keys', async () => {
    await awayFromWindowEnd('day');
    const l = await limiterOn(redis.url, { maxScopes: 50 });
    const req = keyReq('3/d', '100/d');
    expect(l.peek(req)).toBeNull();
    expect((await hammer(l, req, 5, 1)).allowed).toBe(3);
    expect(l.peek(req)).toMatchObject({ kind: 'refuse', scope: 'key' });
    // Neither the refused requests nor peeking counted: the account's window holds the three allowed
    // requests and this sidecar's unused lease (the key's exact rate has none).
    expect((await windowState(probe, req.accountWindow!)).counted - l.heldUnits()).toBe(3);
    expect(l.peek(req)).toMatchObject({ kind: 'refuse', scope: 'key' });
    expect((await windowState(probe, req.accountWindow!)).counted - l.heldUnits()).toBe(3);
    for (let i = 0; i < 300; i++) await l.take(keyReq('10/d'));
    expect(l.scopeCount).toBeLessThanOrEqual(50);
  });

  it('a key with a leased rate costs far less than a Redis call per request', async () => {
    await awayFromWindowEnd('day');
    const l = await limiterOn(redis.url);
    const req = keyReq('1000000/d');
    const t = await hammer(l, req, 20_000, 16);
    expect(t.allowed).toBe(20_000);
    expect(l.stats.calls).toBeLessThan(20);
    expect(l.stats.local).toBeGreaterThan(19_900);
    // No rates: nothing is asked at all.
    const before = l.stats.calls;
    const none = keyReq(null, null);
    for (let i = 0; i < 100; i++) expect(l.take(none)).toMatchObject({ kind: 'allow' });
    expect(l.stats.calls).toBe(before);
  });

  it('paused (a Sentinel failover under way): no Redis command; the held lease still pays, everything else is unavailable at once', async () => {
    await awayFromWindowEnd('day');
    const l = await limiterOn(redis.url, { idleReleaseMs: 50 });
    const leased = keyReq('1000/d');
    const exact = keyReq('50/d');
    expect(await l.take(leased)).toMatchObject({ kind: 'allow' }); // takes a lease
    expect(await l.take(exact)).toMatchObject({ kind: 'allow' });
    const held = l.heldUnits();
    expect(held).toBeGreaterThan(0);
    const { counted } = await windowState(probe, leased.keyWindow!);
    l.pause('sentinel failover under way');
    const calls = l.stats.calls;
    const results = [];
    for (let i = 0; i < held + 5; i++) results.push(await l.take(leased));
    expect(results.filter((r) => r.kind === 'allow').length).toBe(held);
    expect(results.filter((r) => r.kind === 'unavailable').length).toBe(5);
    expect(l.take(exact)).toEqual({ kind: 'unavailable' }); // synchronous: nothing waits for Redis
    await new Promise((r) => setTimeout(r, 200)); // idle sweeps: nothing given back while paused
    expect(l.stats.calls).toBe(calls);
    expect((await windowState(probe, leased.keyWindow!)).counted).toBe(counted);
    l.resume();
    expect(await l.take(exact)).toMatchObject({ kind: 'allow' });
    expect(await l.take(leased)).toMatchObject({ kind: 'allow' });
    expect(l.stats.calls).toBeGreaterThan(calls);
  });

  it('token rates: bookings below the rate never write the gate; reaching it blocks until the window ends; raising it lifts the block', async () => {
    const account = `acct-tok-${process.pid}`;
    const keyId = 'key_eeeeeeeeeeeeeeee';
    const gate = s.gate(account);
    const keyTok = rk.tokens(account, keyId);
    const acctTok = rk.tokens(account);
    await probe.eval(SET_TOKEN_RATE, 2, keyTok, gate, `tokrate:${keyId}`, '1000', 'hour');
    await probe.eval(SET_TOKEN_RATE, 2, acctTok, gate, 'tokrate', '5000', 'hour');
    await probe.hset(gate, 'wallet', 'open');
    const book = (n: number) => probe.eval(BOOK_TOKENS, 3, keyTok, acctTok, gate, keyId, String(n)) as Promise<[string, string]>;
    const hour = windowOf('hour', Date.now());
    if (hour.end - Date.now() < 5000) await new Promise((r) => setTimeout(r, hour.end - Date.now() + 50));
    const w = windowOf('hour', Date.now());
    expect(await book(400)).toEqual(['400', '400']);
    expect(await book(599)).toEqual(['999', '999']);
    expect(await probe.hgetall(gate)).toEqual({ wallet: 'open' });
    expect(await book(1)).toEqual(['1000', '1000']);
    const blocks = parseTokenBlocks(await probe.hgetall(gate));
    if (typeof blocks === 'string') throw new Error(blocks);
    expect(blocks.keys?.get(keyId)).toBe(w.end);
    expect(blocks.account).toBeNull();
    // The account's rate is reached by the same key's bookings.
    expect(await book(4000)).toEqual(['5000', '5000']);
    expect(await probe.hget(gate, 'tokrate')).toBe(String(w.end));
    // Raising the key's rate lifts its block at once; removing the account's lifts that one.
    expect(await probe.eval(SET_TOKEN_RATE, 2, keyTok, gate, `tokrate:${keyId}`, '100000', 'hour')).toBe('5000');
    expect(await probe.hget(gate, `tokrate:${keyId}`)).toBeNull();
    expect(await probe.eval(SET_TOKEN_RATE, 2, acctTok, gate, 'tokrate', '', '')).toBe('');
    expect(await probe.hgetall(gate)).toEqual({ wallet: 'open' });
    // Changing the unit starts a fresh window count.
    expect(await probe.eval(SET_TOKEN_RATE, 2, keyTok, gate, `tokrate:${keyId}`, '100', 'minute')).toBe('0');
  });

  it('token views for the headers: read in the background at most once per interval, never on the decision', async () => {
    const account = `acct-tokview-${process.pid}`;
    const keyId = 'key_0000000000000042';
    const keyTok = rk.tokens(account, keyId);
    const gate = s.gate(account);
    const r = rate('1000/h', 'tokens');
    await probe.eval(SET_TOKEN_RATE, 2, keyTok, gate, `tokrate:${keyId}`, '1000', 'hour');
    const hour = windowOf('hour', Date.now());
    if (hour.end - Date.now() < 5000) await new Promise((res) => setTimeout(res, hour.end - Date.now() + 50));
    await probe.eval(BOOK_TOKENS, 3, keyTok, rk.tokens(account), gate, keyId, '250');
    const c = connectRedis(redis.url, { commandTimeoutMs: 2000 });
    c.on('error', () => {});
    clients.push(c);
    await new Promise((res) => c.once('ready', res));
    const views = new TokenRateViews(c, { refreshMs: 200 });
    // before the first read answers: the limit, the whole of it remaining (the headers from the first request)
    expect(views.view(keyTok, r)).toEqual({ limit: 1000, remaining: 1000, resetAt: windowOf('hour', Date.now()).end });
    for (let i = 0; i < 100; i++) views.view(keyTok, r);
    expect(views.reads).toBe(1);
    await new Promise((res) => setTimeout(res, 50));
    const v = views.view(keyTok, r)!;
    expect(v).toEqual({ limit: 1000, remaining: 750, resetAt: windowOf('hour', Date.now()).end });
    await probe.eval(BOOK_TOKENS, 3, keyTok, rk.tokens(account), gate, keyId, '800');
    expect(views.view(keyTok, r)!.remaining).toBe(750); // as of the last read
    await new Promise((res) => setTimeout(res, 250));
    views.view(keyTok, r);
    await new Promise((res) => setTimeout(res, 50));
    expect(views.view(keyTok, r)!.remaining).toBe(0);
    expect(views.reads).toBe(2);
  });

  it('Redis stopped mid-window: each sidecar allows at most its lease, then fails closed; the window never goes over', async () => {
    await awayFromWindowEnd('day');
    const own = await startRedis();
    const ownProbe = own.client();
    try {
      const limit = 2000;
      const req = keyReq(`${limit}/d`);
      const exact = keyReq('50/d');
      const ls = [await limiterOn(own.url, { idleReleaseMs: 60_000 }, 300), await limiterOn(own.url, { idleReleaseMs: 60_000 }, 300)];
      const before = sum(await Promise.all(ls.map((l) => hammer(l, req, 400, 8))));
      expect(before.allowed).toBe(800);
      await Promise.all(ls.map((l) => hammer(l, exact, 10, 2)));
      // Each sidecar holds part of a lease (one more request after a lease ran out exactly).
      for (const l of ls) {
        while (l.heldUnits() === 0) {
          expect((await l.take(req)).kind).toBe('allow');
          before.allowed++;
        }
      }
      const share = ls.map((l) => l.heldUnits());
      const w = await windowState(ownProbe, req.keyWindow!);
      expect(w.held).toBeLessThanOrEqual(leasePool(limit));
      expect(share[0]! + share[1]!).toBeLessThanOrEqual(w.held);
      await own.stop();
      const during = await Promise.all(ls.map((l) => hammer(l, req, 400, 8)));
      const d = sum(during);
      // The local share: exactly what each sidecar's lease still held when Redis went away.
      expect(during.map((t) => t.allowed)).toEqual(share);
      expect(before.allowed + d.allowed).toBeLessThanOrEqual(w.counted);
      expect(w.counted).toBeLessThanOrEqual(limit);
      expect(d.unavailable).toBe(800 - d.allowed);
      expect(d.refused).toBe(0);
      // An exact limit has no local share: fail closed at once.
      const e = await hammer(ls[0]!, exact, 5, 1);
      expect(e).toMatchObject({ allowed: 0, unavailable: 5 });
      // Redis back: counting resumes from what it kept (a fresh server here: a new window record).
      await own.start();
      await new Promise((r) => setTimeout(r, 500));
      let back: TakeResult = { kind: 'unavailable' };
      for (let i = 0; i < 50 && back.kind === 'unavailable'; i++) {
        back = await ls[0]!.take(exact);
        if (back.kind === 'unavailable') await new Promise((r) => setTimeout(r, 100));
      }
      expect(back.kind).toBe('allow');
    } finally {
      ownProbe.disconnect();
      await destroyRedis(own);
    }
  });
});

describe('Redis Cluster', () => {
  it('two sidecars hold 100/d and an exact 20/d; key and account windows share one slot', async () => {
    await awayFromWindowEnd('day');
    const cluster = await startCluster();
    try {
      for (const [limit, acctLimit] of [
        [100, 1000],
        [20, 30],
      ] as const) {
        const req = keyReq(`${limit}/d`, `${acctLimit}/d`);
        const ls = [await limiterOn(cluster.url), await limiterOn(cluster.url)];
        const t = sum(await Promise.all(ls.map((l) => hammer(l, req, limit + 40, 8))));
        expect(t.unavailable).toBe(0);
        if (limit < 100) expect(t.allowed).toBe(limit);
        else {
          expect(t.allowed).toBeLessThanOrEqual(limit);
          expect(t.allowed).toBeGreaterThanOrEqual(95);
        }
        await Promise.all(ls.map((l) => l.close()));
        const c = cluster.client();
        expect(await windowState(c, req.keyWindow!)).toEqual({ counted: t.allowed, held: 0 });
        expect((await windowState(c, req.accountWindow!)).counted).toBe(t.allowed);
        expect(await cluster.nodeOf(req.keyWindow!)).toBe(await cluster.nodeOf(req.accountWindow!));
      }
    } finally {
      await cluster.destroy();
    }
  }, 90_000);
});

describe('Redis Sentinel', () => {
  it('two sidecars through the sentinel hold an exact 50/d and 200/d within the bound', async () => {
    await awayFromWindowEnd('day');
    const d = await startSentinel();
    try {
      for (const limit of [50, 200]) {
        const req = keyReq(`${limit}/d`);
        const ls = [await limiterOn(d.url), await limiterOn(d.url)];
        const t = sum(await Promise.all(ls.map((l) => hammer(l, req, limit + 30, 8))));
        expect(t.unavailable).toBe(0);
        if (limit < 100) expect(t.allowed).toBe(limit);
        else {
          expect(t.allowed).toBeLessThanOrEqual(limit);
          expect(t.allowed).toBeGreaterThanOrEqual(limit * 0.95);
        }
        await Promise.all(ls.map((l) => l.close()));
        const probe = d.master.client();
        expect(await windowState(probe, req.keyWindow!)).toEqual({ counted: t.allowed, held: 0 });
      }
    } finally {
      await d.destroy();
    }
  }, 90_000);
});
