/** A fake clock and timers for the unit tier (`Timers` of src/transport/grpc/timers.ts): time moves only by `advance`. */
import type { Timers } from '../../src/transport/grpc/timers.ts';

interface Entry {
  at: number;
  fn: () => void;
  every: number | undefined;
}

export class FakeTimers implements Timers {
  #now = 0;
  #next = 1;
  readonly #entries = new Map<number, Entry>();

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#entries.set(id, { at: this.#now + Math.max(0, ms), fn, every: undefined });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#entries.delete(handle as number);
  }

  setInterval(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#entries.set(id, { at: this.#now + ms, fn, every: ms });
    return id;
  }

  clearInterval(handle: unknown): void {
    this.#entries.delete(handle as number);
  }

  /** Moves time forward by `ms`, running every timer due on the way, in time order. */
  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      let due: [number, Entry] | undefined;
      for (const e of this.#entries) if (e[1].at <= until && (due === undefined || e[1].at < due[1].at)) due = e;
      if (due === undefined) break;
      const [id, e] = due;
      this.#now = e.at;
      if (e.every === undefined) this.#entries.delete(id);
      else e.at += e.every;
      e.fn();
    }
    this.#now = until;
  }
}
