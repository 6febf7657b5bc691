/**
 * Deadlines of the calls in flight (`grpc-timeout`), on one timer. A timer per call costs a timer
 * list insert and removal and, one request at a time, arming and disarming the event loop's timer
 * for every request (measured: about 5% of a cached decision on one stream). Here a call's deadline
 * is an entry in a queue ordered by time (Envoy sends the same timeout on every Check, so entries
 * are appended in order); a finished call only marks its entry, and one timer, armed for the
 * earliest deadline, fires the calls that are due and skips the finished ones.
 *
 * Bounded: finished entries are dropped from the head when the timer fires and the queue is
 * compacted once more than half of it (and over 1024 entries) is finished.
 */
export interface Deadline {
  readonly at: number;
  done: boolean;
  readonly fire: () => void;
}

import { systemClock, type Clock, type TimerHandle } from '../../core/clock.ts';

const COMPACT_OVER = 1024;

export class Deadlines {
  readonly #clock: Clock;
  #queue: Deadline[] = [];
  #head = 0;
  #finished = 0;
  #timer: TimerHandle | undefined;
  #armedAt = Infinity;

  constructor(clock: Clock = systemClock) {
    this.#clock = clock;
  }

  /** Calls `fire` in `ms` unless `finish` is called first. */
  add(ms: number, fire: () => void): Deadline {
    const d: Deadline = { at: this.#clock.monotonic() + ms, done: false, fire };
    const q = this.#queue;
    let i = q.length;
    while (i > this.#head && q[i - 1]!.at > d.at) i--;
    if (i === q.length) q.push(d);
    else q.splice(i, 0, d);
    if (d.at < this.#armedAt) this.#arm(d.at);
    return d;
  }

  /** The call is answered: its deadline will not fire. */
  finish(d: Deadline): void {
    if (d.done) return;
    d.done = true;
    if (++this.#finished > COMPACT_OVER && this.#finished * 2 > this.#queue.length - this.#head) this.#compact();
  }

  /** Entries held (pending and finished not yet dropped): for tests of the bound. */
  get size(): number {
    return this.#queue.length - this.#head;
  }

  #arm(at: number): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#armedAt = at;
    this.#timer = this.#clock.setTimeout(() => this.#due(), Math.max(0, at - this.#clock.monotonic())).unref();
  }

  #due(): void {
    this.#timer = undefined;
    this.#armedAt = Infinity;
    const now = this.#clock.monotonic();
    const q = this.#queue;
    while (this.#head < q.length) {
      const d = q[this.#head]!;
      if (!d.done && d.at > now) break;
      this.#head++;
      if (d.done) this.#finished--;
      else {
        d.done = true;
        try {
          d.fire();
        } catch {
          // a deadline's answer must not stop the others
        }
      }
    }
    if (this.#head === q.length) {
      this.#queue = [];
      this.#head = 0;
    } else {
      if (this.#head > COMPACT_OVER && this.#head * 2 > q.length) this.#compact();
      this.#arm(this.#queue[this.#head]!.at);
    }
  }

  #compact(): void {
    this.#queue = this.#queue.slice(this.#head).filter((d) => !d.done);
    this.#head = 0;
    this.#finished = 0;
  }
}

/**
 * The receive timeout of messages being received, on one coarse sweep timer (a quarter of the
 * timeout apart) instead of a timer per stream. An entry added during tick `start` has had at
 * least `(now - start - 1)` whole sweeps, so it expires only past `limit + 1` ticks: never before
 * the timeout, at most one sweep after it.
 */
export class ReceiveSweep<T> {
  readonly #entries = new Map<T, number>();
  readonly #clock: Clock;
  readonly #handle: TimerHandle;
  readonly #limit: number;
  readonly #expire: (entry: T) => void;
  #tick = 0;

  constructor(timeoutMs: number, expire: (entry: T) => void, clock: Clock = systemClock) {
    this.#clock = clock;
    this.#expire = expire;
    const sweepMs = ReceiveSweep.sweepMs(timeoutMs);
    this.#limit = Math.ceil(timeoutMs / sweepMs);
    this.#handle = clock.setInterval(() => this.#sweep(), sweepMs).unref();
  }

  /** The sweep interval for a receive timeout. */
  static sweepMs(timeoutMs: number): number {
    return Math.max(25, Math.floor(timeoutMs / 4));
  }

  /** Starts (or restarts) `entry`'s receive timeout now. */
  add(entry: T): void {
    this.#entries.set(entry, this.#tick);
  }

  delete(entry: T): void {
    this.#entries.delete(entry);
  }

  has(entry: T): boolean {
    return this.#entries.has(entry);
  }

  close(): void {
    this.#clock.clearInterval(this.#handle);
  }

  #sweep(): void {
    const now = ++this.#tick;
    for (const [entry, start] of this.#entries) {
      if (now - start <= this.#limit) continue;
      this.#entries.delete(entry);
      try {
        this.#expire(entry);
      } catch {
        // one entry's answer must not stop the others
      }
    }
  }
}
