/**
 * A fake `Clock` for the unit tier: time moves only by `tick(ms)`, which runs every timer that falls
 * due on the way, in order, each at its own instant.
 */
import type { Clock } from '../../src/core/clock.ts';

interface Timer {
  at: number;
  readonly every: number | null;
  readonly fn: () => void;
  stopped: boolean;
}

export class FakeClock implements Clock {
  #now: number;
  readonly #timers: Timer[] = [];

  constructor(start = 0) {
    this.#now = start;
  }

  now = (): number => this.#now;

  every = (ms: number, fn: () => void): (() => void) => this.#add(ms, ms, fn);

  after = (ms: number, fn: () => void): (() => void) => this.#add(ms, null, fn);

  /** Timers not stopped (and not yet run, for one-shot timers). */
  get pending(): number {
    return this.#timers.filter((t) => !t.stopped).length;
  }

  /** Moves time forward by `ms`, running what falls due. */
  tick(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => !t.stopped && t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      this.#now = due.at;
      if (due.every === null) due.stopped = true;
      else due.at += due.every;
      due.fn();
    }
    this.#now = end;
  }

  #add(ms: number, every: number | null, fn: () => void): () => void {
    const t: Timer = { at: this.#now + Math.max(0, ms), every: every === null ? null : Math.max(1, every), fn, stopped: false };
    this.#timers.push(t);
    return () => {
      t.stopped = true;
    };
  }
}
