/**
 * The h2 transport's time rules on a fake clock, each bound at its edge (one tick before, at,
 * after): the receive timeout's sweep (never before the timeout, at most one sweep after it),
 * call deadlines (`grpc-timeout`), and the `grpc-timeout` units.
 */
import { describe, expect, it } from 'vitest';
import { Deadlines, ReceiveSweep } from '../../src/transport/grpc/deadlines.ts';
import { parseGrpcTimeout } from '../../src/transport/h2/grpc-timeout.ts';
import { FakeClock } from './fake-clock.ts';

describe('receive timeout sweep', () => {
  const TIMEOUT = 1000; // sweep every 250 ms

  it('an entry added right after a sweep expires after the timeout, within one sweep of it', () => {
    const t = new FakeClock();
    const expired: string[] = [];
    const sweep = new ReceiveSweep<string>(TIMEOUT, (e) => expired.push(e), t);
    t.tick(250); // a sweep just ran
    sweep.add('a'); // added at 250
    t.tick(TIMEOUT - 1);
    expect(expired).toEqual([]);
    t.tick(1); // at the timeout: not before it
    expect(expired).toEqual([]);
    t.tick(249); // one sweep later, less a tick
    expect(expired).toEqual([]);
    t.tick(1); // 250 + 1000 + 250: the sweep after the timeout
    expect(expired).toEqual(['a']);
    sweep.close();
  });

  it('an entry added just before a sweep is never cut before its full timeout', () => {
    const t = new FakeClock();
    const expired: number[] = [];
    const sweep = new ReceiveSweep<string>(TIMEOUT, () => expired.push(t.monotonic()), t);
    t.tick(249);
    sweep.add('b'); // added at 249, one tick before a sweep
    t.tick(TIMEOUT); // at 1249: its timeout has passed by 0 ms
    expect(expired).toEqual([]);
    t.tick(1); // at 1250, the first sweep at or past 249 + 1000
    expect(expired).toEqual([1250]);
    expect(expired[0]! - 249).toBeGreaterThanOrEqual(TIMEOUT);
    sweep.close();
  });

  it('a deleted entry never expires, and a re-added one starts over', () => {
    const t = new FakeClock();
    const expired: string[] = [];
    const sweep = new ReceiveSweep<string>(TIMEOUT, (e) => expired.push(e), t);
    sweep.add('c');
    t.tick(900);
    sweep.add('c'); // the next message of a stream: its own timeout
    t.tick(900);
    expect(expired).toEqual([]);
    sweep.delete('c');
    t.tick(5000);
    expect(expired).toEqual([]);
    sweep.close();
  });

  it('the sweep interval is a quarter of the timeout, at least 25 ms', () => {
    expect(ReceiveSweep.sweepMs(1000)).toBe(250);
    expect(ReceiveSweep.sweepMs(100)).toBe(25);
    expect(ReceiveSweep.sweepMs(60)).toBe(25);
  });
});

describe('call deadlines', () => {
  it('fire at the deadline, not a tick before', () => {
    const t = new FakeClock();
    const dl = new Deadlines(t);
    let fired = 0;
    dl.add(100, () => fired++);
    t.tick(99);
    expect(fired).toBe(0);
    t.tick(1);
    expect(fired).toBe(1);
    t.tick(1000);
    expect(fired).toBe(1);
  });

  it('a finished call never fires; earlier deadlines re-arm the one timer', () => {
    const t = new FakeClock();
    const dl = new Deadlines(t);
    const order: string[] = [];
    const late = dl.add(300, () => order.push('late'));
    dl.add(100, () => order.push('early'));
    dl.add(200, () => order.push('mid'));
    dl.finish(late);
    t.tick(199);
    expect(order).toEqual(['early']);
    t.tick(1);
    expect(order).toEqual(['early', 'mid']);
    t.tick(1000);
    expect(order).toEqual(['early', 'mid']);
    expect(dl.size).toBe(0);
  });
});

describe('grpc-timeout', () => {
  it('reads each unit', () => {
    expect(parseGrpcTimeout('2H')).toBe(7_200_000);
    expect(parseGrpcTimeout('3M')).toBe(180_000);
    expect(parseGrpcTimeout('4S')).toBe(4000);
    expect(parseGrpcTimeout('250m')).toBe(250);
    expect(parseGrpcTimeout('1500u')).toBe(2); // 1.5 ms rounded up: never earlier than asked
    expect(parseGrpcTimeout('1000u')).toBe(1);
    expect(parseGrpcTimeout('3000000n')).toBe(3);
    expect(parseGrpcTimeout('1n')).toBe(1);
    expect(parseGrpcTimeout('0m')).toBe(0);
    expect(parseGrpcTimeout('99999999S')).toBe(99_999_999_000);
  });

  it('refuses what is not digits and one unit', () => {
    for (const bad of ['', 'S', '10', '10s', '10 S', '-1S', '1.5S', '123456789S', '10SS', '10h']) expect(parseGrpcTimeout(bad)).toBeUndefined();
  });
});
