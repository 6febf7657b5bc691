/**
 * The clock a time rule reads and the timers it runs on, injected wherever a rule depends on time
 * (the cache's staleness bound and heartbeat, the usage-counter flush, web session expiry, expiry
 * and spend-limit blocks), so each bound is tested on a fake clock at its edge (test/unit/fake-clock.ts).
 * Timers made through a clock never keep the process alive.
 */
export interface Clock {
  /** Milliseconds: epoch time (`systemClock`) or a monotonic reading (`monotonicClock`). */
  now(): number;
  /** Runs `fn` every `ms` until the returned function is called. */
  every(ms: number, fn: () => void): () => void;
  /** Runs `fn` once after `ms` unless the returned function is called first. */
  after(ms: number, fn: () => void): () => void;
}

function every(ms: number, fn: () => void): () => void {
  const t = setInterval(fn, ms);
  t.unref();
  return () => clearInterval(t);
}

function after(ms: number, fn: () => void): () => void {
  const t = setTimeout(fn, ms);
  t.unref();
  return () => clearTimeout(t);
}

/** Epoch milliseconds (`Date.now`): for instants stored in records (expiries, period ends, sessions). */
export const systemClock: Clock = { now: Date.now, every, after };

/** `performance.now()`: for intervals that must not move when the wall clock is set. */
export const monotonicClock: Clock = { now: () => performance.now(), every, after };
