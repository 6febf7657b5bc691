/**
 * A fake `Clock` for the unit tier: time moves only by `tick(ms)` (or `tickAsync(ms)` for rules that
 * await between timers), which runs every timer that falls due on the way, in order, each at its own
 * instant. Wall time starts at `start`, monotonic time at 0; both move together.
 */
import type { Clock, TimerHandle } from '../../src/core/clock.ts';

class Timer implements TimerHandle {
  stopped = false;
  at: number;
  readonly every: number | null;
  readonly fn: () => void;
  constructor(at: number, every: number | null, fn: () => void) {
    this.at = at;
    this.every = every;
    this.fn = fn;
  }
  unref(): this {
    return this;
  }
}

export class FakeClock implements Clock {
  #elapsed = 0;
  readonly #start: number;
  readonly #timers: Timer[] = [];

  constructor(start = 0) {
    this.#start = start;
  }

  now = (): number => this.#start + this.#elapsed;

  monotonic = (): number => this.#elapsed;

  setTimeout = (fn: () => void, ms: number): TimerHandle => this.#add(ms, null, fn);

  setInterval = (fn: () => void, ms: number): TimerHandle => this.#add(ms, ms, fn);

  clearTimeout = (h: TimerHandle | null | undefined): void => {
    if (h instanceof Timer) h.stopped = true;
  };

  clearInterval = this.clearTimeout;

  /** Timers not stopped (and not yet run, for one-shot timers). */
  get pending(): number {
    return this.#timers.filter((t) => !t.stopped).length;
  }

  /** Moves time forward by `ms`, running what falls due. */
  tick(ms: number): void {
    const end = this.#elapsed + ms;
    for (let due = this.#next(end); due !== undefined; due = this.#next(end)) this.#run(due);
    this.#elapsed = end;
  }

  /**
   * As `tick`, letting promise chains settle before and after each timer (a rule that awaits between
   * its timers: a flush, a retry loop), so each runs at its own instant.
   */
  async tickAsync(ms: number): Promise<void> {
    const end = this.#elapsed + ms;
    await settle();
    for (let due = this.#next(end); due !== undefined; due = this.#next(end)) {
      this.#run(due);
      await settle();
    }
    this.#elapsed = end;
    await settle();
  }

  #next(end: number): Timer | undefined {
    let due: Timer | undefined;
    for (const t of this.#timers) if (!t.stopped && t.at <= end && (due === undefined || t.at < due.at)) due = t;
    return due;
  }

  #run(t: Timer): void {
    this.#elapsed = t.at;
    if (t.every === null) t.stopped = true;
    else t.at += t.every;
    t.fn();
  }

  #add(ms: number, every: number | null, fn: () => void): Timer {
    for (let i = this.#timers.length - 1; i >= 0; i--) if (this.#timers[i]!.stopped) this.#timers.splice(i, 1);
    const t = new Timer(this.#elapsed + Math.max(0, ms), every === null ? null : Math.max(1, every), fn);
    this.#timers.push(t);
    return t;
  }
}

/** Lets pending promise callbacks run (a macrotask turn; no I/O is waited for). */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise<void>((r) => setImmediate(r));
}
