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

const COMPACT_OVER = 1024;

export class Deadlines {
  readonly #now: () => number;
  #queue: Deadline[] = [];
  #head = 0;
  #finished = 0;
  #timer: NodeJS.Timeout | undefined;
  #armedAt = Infinity;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /** Calls `fire` in `ms` unless `finish` is called first. */
  add(ms: number, fire: () => void): Deadline {
    const d: Deadline = { at: this.#now() + ms, done: false, fire };
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
    if (this.#timer) clearTimeout(this.#timer);
    this.#armedAt = at;
    this.#timer = setTimeout(() => this.#due(), Math.max(0, at - this.#now()));
    this.#timer.unref();
  }

  #due(): void {
    this.#timer = undefined;
    this.#armedAt = Infinity;
    const now = this.#now();
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
