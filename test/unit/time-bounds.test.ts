/**
 * Every timing rule outside the transports, pinned on a fake clock at its edge (one tick before, at,
 * after): the usage-counter flush, the cache's staleness bound and heartbeat, spend-limit periods
 * and blocks, and key expiry through the pipeline.
 */
import { describe, expect, it } from 'vitest';
import { spendLimitDeny } from '../../src/core/money.ts';
import { parseGate, periodBounds, type Gate } from '../../src/schema/money.ts';
import { heartbeatEvery, lapseIn, withinBound } from '../../src/store/staleness.ts';
import { USAGE_FLUSH_MS, UsageCounter, type Pending } from '../../src/store/usage-counter.ts';
import { every } from '../../src/core/clock.ts';
import { FakeClock } from './fake-clock.ts';
import { silentLog } from './memory-store.ts';

describe('usage counter: written once a second', () => {
  function counter(clock: FakeClock) {
    const writes: Array<{ at: number; batch: Map<string, Pending> }> = [];
    const c = new UsageCounter(async (batch) => void writes.push({ at: clock.now(), batch: new Map([...batch].map(([k, v]) => [k, { ...v }])) }), silentLog, { clock });
    return { c, writes };
  }

  it('the interval is 1000 ms', () => {
    expect(USAGE_FLUSH_MS).toBe(1000);
  });

  it('nothing is written one tick before the second, the counts at it, the next batch a second later', async () => {
    const clock = new FakeClock(1_000_000);
    const { c, writes } = counter(clock);
    c.count('key_aaaaaaaaaaaaaaaa', 'acct');
    clock.tick(500);
    c.count('key_aaaaaaaaaaaaaaaa', 'acct');
    clock.tick(499); // 999 ms
    await Promise.resolve();
    expect(writes).toHaveLength(0);
    clock.tick(1); // 1000 ms
    await Promise.resolve();
    expect(writes).toEqual([{ at: 1_001_000, batch: new Map([['key_aaaaaaaaaaaaaaaa', { account: 'acct', n: 2, last: 1_000_500 }]]) }]);
    c.count('key_aaaaaaaaaaaaaaaa', 'acct');
    clock.tick(999);
    await Promise.resolve();
    expect(writes).toHaveLength(1);
    clock.tick(1);
    await Promise.resolve();
    expect(writes).toHaveLength(2);
    expect(writes[1]!.at).toBe(1_002_000);
    clock.tick(1); // after: nothing pending, nothing written
    await c.close();
    expect(writes).toHaveLength(2);
    expect(clock.pending).toBe(0); // the timer is stopped by close
  });
});

describe('cache staleness bound and heartbeat', () => {
  const BOUND = 250;
  it('a link confirmed at t is trusted until t + bound, exclusive', () => {
    expect(withinBound(1000, 1000 + BOUND - 1, BOUND)).toBe(true);
    expect(withinBound(1000, 1000 + BOUND, BOUND)).toBe(false);
    expect(withinBound(1000, 1000 + BOUND + 1, BOUND)).toBe(false);
  });

  it('the lapse check is armed for the end of the window (at least 1 ms ahead)', () => {
    expect(lapseIn(1000, 1000, BOUND)).toBe(BOUND);
    expect(lapseIn(1000, 1000 + BOUND - 1, BOUND)).toBe(1);
    expect(lapseIn(1000, 1000 + BOUND, BOUND)).toBe(1);
    expect(lapseIn(1000, 1000 + BOUND + 1, BOUND)).toBe(1);
  });

  it('the heartbeat runs every quarter of the bound, at least every 10 ms', () => {
    expect(heartbeatEvery(250)).toBe(62);
    expect(heartbeatEvery(1000)).toBe(250);
    expect(heartbeatEvery(39)).toBe(10);
    expect(heartbeatEvery(40)).toBe(10);
    expect(heartbeatEvery(44)).toBe(11);
  });

  it('a heartbeat on the fake clock: four confirmations per bound keep the window open; one missed keeps it for the rest of the bound only', () => {
    const clock = new FakeClock(0);
    let confirmedAt = 0;
    let answering = true;
    every(clock, heartbeatEvery(BOUND), () => {
      if (answering) confirmedAt = clock.now();
    });
    for (let i = 0; i < 20; i++) {
      clock.tick(10);
      expect(withinBound(confirmedAt, clock.now(), BOUND)).toBe(true);
    }
    answering = false; // last confirmation at 186 (3 × 62)
    const last = confirmedAt;
    clock.tick(last + BOUND - 1 - clock.now());
    expect(withinBound(confirmedAt, clock.now(), BOUND)).toBe(true);
    clock.tick(1);
    expect(withinBound(confirmedAt, clock.now(), BOUND)).toBe(false);
  });
});

describe('spend-limit periods and blocks', () => {
  const DAY = 86_400_000;
  const T = Date.UTC(2026, 10, 24); // a Tuesday, midnight UTC

  it('a day runs from midnight to midnight UTC', () => {
    expect(periodBounds('day', T - 1)).toEqual({ start: T - DAY, end: T });
    expect(periodBounds('day', T)).toEqual({ start: T, end: T + DAY });
    expect(periodBounds('day', T + 1)).toEqual({ start: T, end: T + DAY });
  });

  it('a week starts on Monday, a month on its first day (UTC)', () => {
    const monday = Date.UTC(2026, 10, 23);
    expect(periodBounds('week', monday - 1).end).toBe(monday);
    expect(periodBounds('week', monday).start).toBe(monday);
    expect(periodBounds('week', monday + 1).start).toBe(monday);
    const dec = Date.UTC(2026, 11, 1);
    expect(periodBounds('month', dec - 1)).toEqual({ start: Date.UTC(2026, 10, 1), end: dec });
    expect(periodBounds('month', dec)).toEqual({ start: dec, end: Date.UTC(2027, 0, 1) });
    expect(periodBounds('month', dec + 1).start).toBe(dec);
  });

  it("a key's block lifts at the end of its period, on the clock given", () => {
    const gate = parseGate({ 'limit:key_aaaaaaaaaaaaaaaa': String(T) }) as Gate;
    expect(spendLimitDeny(gate, 'key_aaaaaaaaaaaaaaaa', T - 1)).toMatchObject({ code: 'KEY_LIMIT_EXCEEDED' });
    expect(spendLimitDeny(gate, 'key_aaaaaaaaaaaaaaaa', T)).toBeNull();
    expect(spendLimitDeny(gate, 'key_aaaaaaaaaaaaaaaa', T + 1)).toBeNull();
  });
});
