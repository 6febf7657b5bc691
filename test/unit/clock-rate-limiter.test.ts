/**
 * The rate limiter's local part on a fake clock, each bound at its edge: a lease is used only until
 * its deadline (the server's window end, on this clock), a window known to be used up is refused
 * here until it has ended, and a lease unused for `idleReleaseMs` is given back at the next sweep.
 * The TAKE script's call is a plain function keeping one window per record the way the script does
 * (test/rate-limits.test.ts runs the real script on a real Redis).
 */
import { describe, expect, it } from 'vitest';
import { leasePool } from '../../src/core/rate.ts';
import type { Rate } from '../../src/core/rate-text.ts';
import { RateLimiter, type RateRequest, type TakeCall, type TakeResult } from '../../src/store/rate-limiter.ts';
import type { RedisClient } from '../../src/store/redis.ts';
import { FakeClock } from './fake-clock.ts';

interface Call {
  at: number;
  need: number;
  /** Units given back (a released lease's size). */
  released: number;
  leased: number;
}

/** The TAKE script's arithmetic on windows kept here; the server's clock is `clock` + `skewMs`. */
function takeOn(clock: FakeClock, skewMs = 0): { take: TakeCall; calls: Call[] } {
  const windows = new Map<string, { w: number; c: number }>();
  const calls: Call[] = [];
  const take: TakeCall = async (numkeys, ...rest) => {
    const keys = rest.slice(0, numkeys);
    const argv = rest.slice(numkeys).map(Number);
    const now = clock.now() + skewMs;
    const need = argv[0]!;
    let k = need;
    const st = keys.map((key, i) => {
      const [limit, len, pool, covered, rel, relw, unused, want] = argv.slice(1 + i * 8, 9 + i * 8) as number[];
      const w = Math.floor(now / len!) * len!;
      let cur = windows.get(key);
      if (cur === undefined || cur.w !== w) windows.set(key, (cur = { w, c: 0 }));
      if (rel! > 0 && relw === w) cur.c = Math.max(0, cur.c - Math.min(unused!, rel!));
      k = Math.min(k, covered! + Math.max(0, limit! - cur.c));
      return { cur, limit: limit!, len: len!, pool: pool!, covered: covered!, rel: rel!, want: want! };
    });
    const out = [String(now), String(k)];
    let leased = 0;
    for (const s of st) {
      s.cur.c += Math.max(0, k - s.covered);
      const extra = k === need && s.pool > 0 && s.want > 0 ? Math.max(0, Math.min(s.want, s.limit - s.cur.c)) : 0;
      s.cur.c += extra;
      leased += extra;
      out.push(String(s.cur.w), String(s.cur.w + s.len), String(s.cur.c), '0', String(extra));
    }
    calls.push({ at: clock.now(), need, released: st.reduce((a, s) => a + s.rel, 0), leased });
    return out;
  };
  return { take, calls };
}

/** The connection's state the idle sweep reads (no command is sent through it: TAKE is `take`). */
const ready = { status: 'ready' } as unknown as RedisClient;

const keyReq = (count: number, per: Rate['per']): RateRequest => ({ keyWindow: 'rate:key_a', keyRate: { count, per }, accountWindow: null, accountRate: null });

describe('rate limiter leases and windows on the clock', () => {
  const MINUTE = 60_000;
  const T0 = 1_000 * MINUTE + 10_000; // 10 s into a minute window (server clock = this clock)

  it('a lease decides locally until the window ends, not a tick after', async () => {
    const clock = new FakeClock(T0);
    const { take, calls } = takeOn(clock);
    const l = new RateLimiter(ready, { clock, take, idleReleaseMs: 10 * MINUTE });
    const req = keyReq(1000, 'minute');
    const first = l.take(req);
    expect(first).toBeInstanceOf(Promise); // no lease yet: asks
    expect(await first).toMatchObject({ kind: 'allow' });
    expect(calls).toEqual([{ at: T0, need: 1, released: 0, leased: leasePool(1000) }]);
    clock.tick(MINUTE - 10_000 - 1); // one tick before the window's end
    const inside = l.take(req);
    expect(inside).toMatchObject({ kind: 'allow' }); // decided here, synchronously
    expect(calls).toHaveLength(1);
    clock.tick(1); // the window's end: the lease is over
    const after = l.take(req);
    expect(after).toBeInstanceOf(Promise);
    expect(await after).toMatchObject({ kind: 'allow' });
    expect(calls).toHaveLength(2);
    expect(calls[1]!.at).toBe(T0 + MINUTE - 10_000);
    await l.close();
  });

  it('a window the server reported used up is refused here until it ends, then asked again', async () => {
    const SECOND = 1000;
    const t0 = 5_000_000 + 200; // 200 ms into a second
    const clock = new FakeClock(t0);
    const { take, calls } = takeOn(clock);
    const l = new RateLimiter(ready, { clock, take, idleReleaseMs: 10 * MINUTE });
    const req = keyReq(5, 'second'); // below 100: exact, every request asks
    for (let i = 0; i < 5; i++) expect(await l.take(req)).toMatchObject({ kind: 'allow' });
    expect(calls).toHaveLength(5); // the fifth answer says the window is full
    expect(l.take(req)).toEqual({ kind: 'refuse', scope: 'key', retryAt: 5_001_000 }); // refused here, synchronously
    expect(calls).toHaveLength(5);
    clock.tick(SECOND - 200 - 1); // one tick before the window ends
    const refused = l.take(req) as TakeResult;
    expect(refused).toEqual({ kind: 'refuse', scope: 'key', retryAt: 5_001_000 });
    expect(calls).toHaveLength(5);
    clock.tick(1); // the window has ended: asked again, in the next window
    expect(await l.take(req)).toMatchObject({ kind: 'allow' });
    expect(calls).toHaveLength(6);
    await l.close();
  });

  it("windows follow the server's clock: a skewed sidecar's lease ends at the server's window end", async () => {
    const clock = new FakeClock(T0);
    const { take, calls } = takeOn(clock, 3_700); // the server is 3.7 s ahead
    const l = new RateLimiter(ready, { clock, take, idleReleaseMs: 10 * MINUTE });
    const req = keyReq(1000, 'minute');
    await l.take(req);
    const end = T0 + MINUTE - 10_000 - 3_700; // the window's end, on this clock
    clock.tick(end - 1 - clock.now());
    expect(l.take(req)).toMatchObject({ kind: 'allow' });
    expect(calls).toHaveLength(1);
    clock.tick(1);
    expect(l.take(req)).toBeInstanceOf(Promise);
    await l.close();
  });

  it('a lease unused for idleReleaseMs is given back at the next sweep, not before', async () => {
    const clock = new FakeClock(T0);
    const { take, calls } = takeOn(clock);
    const l = new RateLimiter(ready, { clock, take, idleReleaseMs: 250 }); // swept every 250 ms
    const req = keyReq(1000, 'minute');
    await l.take(req); // at T0: the sweeps run at T0 + 250, + 500, …
    await clock.tickAsync(100);
    expect(l.take(req)).toMatchObject({ kind: 'allow' }); // used at T0 + 100
    await clock.tickAsync(150); // sweep at T0 + 250: unused for 150 ms only
    await clock.tickAsync(249);
    expect(calls).toHaveLength(1);
    expect(l.heldUnits()).toBe(leasePool(1000) - 1);
    await clock.tickAsync(1); // sweep at T0 + 500: unused for 400 ms ≥ 250: given back
    expect(calls).toHaveLength(2);
    expect(calls[1]).toEqual({ at: T0 + 500, need: 0, released: leasePool(1000), leased: 0 }); // the whole lease; its unused units return
    expect(l.heldUnits()).toBe(0);
    await l.close();
    expect(clock.pending).toBe(0); // close stops the sweep
  });
});
