/**
 * Reused buffers for request messages that arrive in several DATA frames. Joining the frames into
 * a fresh buffer per request (`Buffer.concat`) allocates the body's size outside the JS heap on
 * every request; at 64 KiB bodies that external churn makes V8 run a full mark-compact every few
 * tens of milliseconds (measured: about a third of the CPU). A call borrows a buffer of the next
 * power-of-two size for the length of its decision and gives it back when the decision is made.
 *
 * Bounded: only sizes from `MIN` to `MAX` are pooled (others are allocated as before), and at most
 * `budget` bytes are kept free in all. A borrowed buffer is never lent twice before it is returned.
 */
const MIN = 16 * 1024;
const MAX = 4 * 1024 * 1024;

export class MessagePool {
  readonly #free = new Map<number, Buffer[]>();
  readonly #budget: number;
  #kept = 0;

  constructor(budget = 16 * 1024 * 1024) {
    this.#budget = budget;
  }

  /** The chunks joined into one buffer (`total` bytes); pooled when its size class is pooled. */
  join(chunks: readonly Buffer[], total: number): { buf: Buffer; lease: Buffer | undefined } {
    if (total < MIN || total > MAX) return { buf: Buffer.concat(chunks as Buffer[], total), lease: undefined };
    const size = 2 ** Math.ceil(Math.log2(total));
    let lease = this.#free.get(size)?.pop();
    if (lease !== undefined) this.#kept -= size;
    else lease = Buffer.allocUnsafeSlow(size);
    let o = 0;
    for (const c of chunks) {
      c.copy(lease, o);
      o += c.length;
    }
    return { buf: lease.subarray(0, total), lease };
  }

  /** Gives a borrowed buffer back (kept while under the budget). */
  release(lease: Buffer | undefined): void {
    if (lease === undefined || this.#kept + lease.length > this.#budget) return;
    let list = this.#free.get(lease.length);
    if (list === undefined) this.#free.set(lease.length, (list = []));
    list.push(lease);
    this.#kept += lease.length;
  }
}
