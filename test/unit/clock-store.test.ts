/**
 * The store lookup deadline on a fake clock (`CacheOptions.clock`): a lookup the store does not
 * answer fails as unavailable at `lookupTimeoutMs`, not a tick before, queueing included; one
 * answered in time leaves no timer. The store under the cache is a plain `RecordSource` here
 * (test/store-deadline.test.ts holds the same bound on a real Redis).
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { KEY_RECORD } from '../../src/schema/records.ts';
import { schema } from '../../src/schema/redis-schema.ts';
import { CachedRecordSource } from '../../src/store/cache.ts';
import { StoreUnavailable, type RecordSource } from '../../src/store/record-source.ts';
import { FakeClock } from './fake-clock.ts';

/** A store whose lookups are answered only when the test says (`answer`). */
function heldStore(): { inner: RecordSource; answer: () => void } {
  const waiting: Array<() => void> = [];
  const inner: RecordSource = {
    lookup: <T>() => new Promise<T>((resolve) => waiting.push(() => resolve({ kind: 'absent' } as T))),
    ready: () => true,
    close: async () => {},
  };
  return { inner, answer: () => waiting.shift()?.() };
}

function cacheOn(clock: FakeClock, inner: RecordSource) {
  return new CachedRecordSource(inner, null, schema('kg'), { maxEntries: 0, serveCachedDuringOutage: false, lookupTimeoutMs: 500, maxInflight: 1, maxQueued: 4, clock }, pino({ level: 'silent' }));
}

/** The promise's outcome so far: 'pending', the value, or the error. */
function watch(p: unknown): { state: () => unknown } {
  let state: unknown = 'pending';
  void (p as Promise<unknown>).then(
    (v) => (state = v),
    (e: unknown) => (state = e),
  );
  return { state: () => state };
}

describe('store lookup deadline on the clock', () => {
  it('a lookup the store does not answer fails at the deadline, not a tick before', async () => {
    const clock = new FakeClock(0);
    const cache = cacheOn(clock, heldStore().inner);
    const w = watch(cache.lookup(KEY_RECORD, 'digest-a'));
    await clock.tickAsync(499);
    expect(w.state()).toBe('pending');
    await clock.tickAsync(1);
    expect(w.state()).toBeInstanceOf(StoreUnavailable);
    expect((w.state() as Error).message).toBe('store lookup timed out');
    expect(cache.stats().timeouts).toBe(1);
  });

  it('time spent queued behind the in-flight cap counts toward the deadline', async () => {
    const clock = new FakeClock(0);
    const store = heldStore();
    const cache = cacheOn(clock, store.inner);
    const first = watch(cache.lookup(KEY_RECORD, 'digest-a'));
    await clock.tickAsync(300);
    const queued = watch(cache.lookup(KEY_RECORD, 'digest-b')); // waits for the one slot
    await clock.tickAsync(199);
    store.answer(); // the first is answered at 499: the slot frees, the second starts
    await clock.tickAsync(0);
    expect(first.state()).toEqual({ kind: 'absent' });
    await clock.tickAsync(300); // 799: one tick before the second's deadline (300 + 500)
    expect(queued.state()).toBe('pending');
    await clock.tickAsync(1); // 800, though it started only at 499
    expect(queued.state()).toBeInstanceOf(StoreUnavailable);
    expect(cache.stats().timeouts).toBe(1);
  });

  it('a lookup answered in time leaves no timer behind', async () => {
    const clock = new FakeClock(0);
    const store = heldStore();
    const cache = cacheOn(clock, store.inner);
    const w = watch(cache.lookup(KEY_RECORD, 'digest-a'));
    expect(clock.pending).toBe(1);
    await clock.tickAsync(499);
    store.answer();
    await clock.tickAsync(0);
    expect(w.state()).toEqual({ kind: 'absent' });
    expect(clock.pending).toBe(0);
  });
});
