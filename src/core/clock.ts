/**
 * The one clock every time rule reads and the timers it runs on, injected wherever a bound depends on
 * time (an option defaulting to `systemClock`): the transport's call deadlines and receive sweep, the
 * meter's stream lifetime, price retries and drain, the booker's batching, the rate limiter's leases,
 * windows and idle sweep, the webhook worker's passes, the store's staleness bound, heartbeat and
 * lookup deadline, the usage-counter flush, web sessions, expiry and spend-limit blocks. Each bound is
 * pinned on a fake clock at its edge (test/unit/fake-clock.ts).
 *
 * The methods do not use `this` (a rule may keep `clock.now` as a function). Timers behave as Node's:
 * the handle is ref'd until its owner calls `unref()` (a background timer that must not keep the
 * process alive), and clearing an absent handle does nothing.
 */
export interface Clock {
  /** Wall time, epoch milliseconds (`Date.now`): instants stored in records (expiries, period ends, sessions, bookings). */
  now(): number;
  /** Monotonic milliseconds (`performance.now`): intervals that must not move when the wall clock is set. */
  monotonic(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle | null | undefined): void;
  setInterval(fn: () => void, ms: number): TimerHandle;
  clearInterval(handle: TimerHandle | null | undefined): void;
}

/** A timer made through a clock (Node's `Timeout` in production). */
export interface TimerHandle {
  /** The timer no longer keeps the process alive. */
  unref(): TimerHandle;
}

/** The process's clock and Node's timers. */
export const systemClock: Clock = {
  now: Date.now,
  monotonic: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as Parameters<typeof clearTimeout>[0]),
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (h) => clearInterval(h as Parameters<typeof clearInterval>[0]),
};

/** Runs `fn` every `ms` on `clock`, never keeping the process alive, until the returned function is called. */
export function every(clock: Clock, ms: number, fn: () => void): () => void {
  const t = clock.setInterval(fn, ms).unref();
  return () => clock.clearInterval(t);
}

/** Runs `fn` once after `ms` on `clock`, never keeping the process alive, unless the returned function is called first. */
export function after(clock: Clock, ms: number, fn: () => void): () => void {
  const t = clock.setTimeout(fn, ms).unref();
  return () => clock.clearTimeout(t);
}

/** Resolves after `ms` on `clock` (the timer keeps the process alive unless `unref`). */
export function sleep(clock: Clock, ms: number, unref = false): Promise<void> {
  return new Promise((r) => {
    const t = clock.setTimeout(r, ms);
    if (unref) t.unref();
  });
}
