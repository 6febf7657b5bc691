/**
 * The webhook worker's schedule on a fake clock: when a failed event is tried again (the retry
 * schedule, then the dead letter), when a failing endpoint is disabled, when passes run (one at
 * start, then `pollMs` after each pass ends) and how long `stop` waits for work in flight. The pass
 * is a plain function here (a subclass's `pass`); test/events-*.test.ts run it on a real Redis.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_SCHEDULE, type WebhookConfig } from '../../src/events/config.ts';
import type { WebhookStore } from '../../src/events/webhooks.ts';
import { DeliveryWorker, failedOutAt, nextAttemptAt } from '../../src/events/worker.ts';
import type { RedisClient } from '../../src/store/redis.ts';
import { FakeClock } from './fake-clock.ts';

describe('retry schedule', () => {
  const now = 1_800_000_000_000;

  it("the n-th failed attempt is tried again after the schedule's n-th delay", () => {
    expect(nextAttemptAt([10, 30, 60], 1, now)).toBe(now + 10_000);
    expect(nextAttemptAt([10, 30, 60], 2, now)).toBe(now + 30_000);
    expect(nextAttemptAt([10, 30, 60], 3, now)).toBe(now + 60_000);
    expect(nextAttemptAt([0.2], 1, now)).toBe(now + 200);
  });

  it('past the schedule the event is dead-lettered (no next attempt)', () => {
    expect(nextAttemptAt([10, 30, 60], 4, now)).toBeNull();
    expect(nextAttemptAt(DEFAULT_RETRY_SCHEDULE, DEFAULT_RETRY_SCHEDULE.length, now)).toBe(now + 86_400_000);
    expect(nextAttemptAt(DEFAULT_RETRY_SCHEDULE, DEFAULT_RETRY_SCHEDULE.length + 1, now)).toBeNull();
  });

  it('an endpoint failing without a success is disabled at disableAfterMs, not a tick before', () => {
    const DAY5 = 5 * 86_400_000;
    expect(failedOutAt(null, now, DAY5)).toBe(false);
    expect(failedOutAt(now - DAY5 + 1, now, DAY5)).toBe(false);
    expect(failedOutAt(now - DAY5, now, DAY5)).toBe(true);
  });
});

const config: WebhookConfig = { retryScheduleSeconds: [10], allowPrivate: false, disableAfterMs: 86_400_000, timeoutMs: 1000, concurrency: 1 };

/** A worker whose pass is `pass` (the Redis work replaced; nothing is sent through `redis`). */
function workerOn(clock: FakeClock, pass: () => Promise<void>, pollMs = 1000) {
  class Worker extends DeliveryWorker {
    override pass(): Promise<void> {
      return pass();
    }
    override async fillExpiries(): Promise<number> {
      return 0;
    }
  }
  return new Worker({ redis: {} as RedisClient, namespace: 'kg', webhooks: {} as WebhookStore, config, log: pino({ level: 'silent' }), pollMs, clock });
}

describe('worker passes on the clock', () => {
  it('one pass at start, then pollMs after each pass ends', async () => {
    const clock = new FakeClock(0);
    const passes: Array<{ start: number; end: number }> = [];
    const w = workerOn(clock, async () => {
      const start = clock.now();
      await new Promise<void>((r) => clock.setTimeout(r, 300)); // a pass taking 300 ms
      passes.push({ start, end: clock.now() });
    });
    w.start();
    await clock.tickAsync(0);
    await clock.tickAsync(300);
    expect(passes).toEqual([{ start: 0, end: 300 }]);
    await clock.tickAsync(999);
    expect(passes).toHaveLength(1); // the next pass starts 1000 ms after the last ended
    await clock.tickAsync(1 + 300);
    expect(passes).toEqual([{ start: 0, end: 300 }, { start: 1300, end: 1600 }]);
    await w.stop();
    await clock.tickAsync(10_000);
    expect(passes).toHaveLength(2); // no pass after stop
    expect(clock.pending).toBe(0);
  });

  it('a failed pass is followed by the next one on schedule', async () => {
    const clock = new FakeClock(0);
    const starts: number[] = [];
    const w = workerOn(clock, async () => {
      starts.push(clock.now());
      throw new Error('redis down');
    });
    w.start();
    await clock.tickAsync(2000);
    expect(starts).toEqual([0, 1000, 2000]);
    await w.stop();
  });

  it('stop waits for a pass in flight at most its timeout', async () => {
    const clock = new FakeClock(0);
    const w = workerOn(clock, () => new Promise<void>(() => {})); // a pass that never ends
    w.start();
    await clock.tickAsync(0);
    let stopped = false;
    void w.stop(5000).then(() => (stopped = true));
    await clock.tickAsync(4999);
    expect(stopped).toBe(false);
    await clock.tickAsync(1);
    expect(stopped).toBe(true);
  });
});
