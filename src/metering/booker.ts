/**
 * The metered answers' bookings: priced when the response ends (the price table then in memory),
 * queued, and written in batches by the ledger's booking write (src/ledger/book.ts: the usage-record
 * script `RECORD_USAGE`, the same write as `POST /v1/usage`: idempotent on keygate's booking id (`x-request-id` only a label in the log), wallet debited, key spend grown, gate
 * written on a crossing, token counters and token rates, a usage-log entry with source `meter`).
 *
 * A batch is flushed at most `intervalMs` after its first booking was queued (default 250 ms; a
 * booking is in Redis well within 1 s of its response's end unless Redis is slow or down), or at
 * once when `maxBatch` bookings are queued. One flush is one pipeline (standalone, Sentinel) or
 * one call per booking sent to its node at once (Cluster). A failed flush keeps its bookings for
 * the next one (the script is idempotent, so a booking written before the failure is not written
 * twice); at most `maxPending` bookings wait (beyond that a booking is dropped and counted).
 * `close()` flushes what is left, retrying until its deadline.
 */
import type { Logger } from 'pino';
import { UsageBook, type BookOptions, type BookReply, type Usage } from '../ledger/book.ts';
import type { Schema } from '../schema/redis-schema.ts';
import type { RedisClient } from '../store/redis.ts';
import type { PriceBasis } from '../prices/basis.ts';
import type { PriceCatalog } from '../prices/catalog.ts';
import { priceBookingUsage } from './pricing.ts';
import type { PriceTable } from '../schema/prices.ts';
import type { Booking } from './session.ts';
import type { EndpointKind } from './usage.ts';
import { sleep, systemClock, type Clock, type TimerHandle } from '../core/clock.ts';

/** A booking with its price, ready to write. */
export interface PricedBooking {
  readonly booking: Booking;
  readonly amountMicros: number;
  readonly unpriced: boolean;
  /** Why this price (the usage-log entry's `price`); absent only for bookings made before it existed. */
  readonly basis?: PriceBasis;
  /** When the response ended (epoch ms): the booking lag is measured from it. */
  readonly endedAt: number;
  /** What a report of the booking adds (span, GenAI metrics): set by the meter. */
  readonly context?: BookingContext;
}

/** The facts about a booked response beyond the booking itself. */
export interface BookingContext {
  readonly operation: EndpointKind;
  readonly requestModel: string | null;
  readonly traceparent?: string;
  readonly tracestate?: string;
  /** When its stream opened (epoch ms). */
  readonly startedAtMs: number;
}

export type BookResult = 'booked' | 'duplicate' | 'floor' | 'error';

/** Writes one batch; answers one result per booking in order, or rejects when nothing is known (connection lost). */
export type BookingWrite = (batch: readonly PricedBooking[]) => Promise<BookResult[]>;

/**
 * Prices a booking with the table and the catalog (null: off), in the order of src/prices/resolve.ts
 * (the response's model, then the requested one); no match → 0, unpriced. The basis says why.
 */
export function priceBooking(b: Booking, table: PriceTable, endedAt: number, catalog: PriceCatalog | null = null, requested: string | null = null, accountMultiplier?: bigint): PricedBooking & { clamped: boolean } {
  const p = priceBookingUsage({ table, catalog }, b.family, b.model, requested, b, endedAt, accountMultiplier);
  return { booking: b, amountMicros: p.amount, unpriced: p.unpriced, endedAt, clamped: p.clamped, basis: p.basis };
}

/** A metered booking as the ledger books it (source `meter`). */
export function usageOf(p: PricedBooking): Usage {
  const b = p.booking;
  return {
    account: b.account,
    keyId: b.key_id,
    bookingId: b.booking_id,
    amountMicros: p.amountMicros,
    model: b.model,
    inputTokens: b.input_tokens,
    outputTokens: b.output_tokens,
    cachedInputTokens: b.cached_input_tokens,
    cacheWriteTokens: b.cache_write_tokens,
    reasoningTokens: b.reasoning_tokens,
    source: 'meter',
    estimated: b.estimated,
    unpriced: p.unpriced,
    price: p.basis,
    label: b.request_id,
  };
}

/** A booking's reply as the booker counts it (null: its write failed). */
function resultOf(r: BookReply | null): BookResult {
  if (r === null) return 'error';
  // floor: the wallet's floor; total: the key's total spend bound; tokens: a token total's bound — refused, never retried
  return r.outcome === 'booked' ? 'booked' : r.outcome === 'duplicate' ? 'duplicate' : r.outcome === 'floor' || r.outcome === 'total' || r.outcome === 'tokens' ? 'floor' : 'error';
}

/** The write to Redis: the ledger's booking write, one batch in one pipeline (Cluster: each booking to its account's node at once). */
export function redisBookingWrite(redis: RedisClient, s: Schema, o?: BookOptions): BookingWrite {
  const book = new UsageBook(redis, s, o);
  return async (batch) => (await book.bookAll(batch.map(usageOf))).map(resultOf);
}

export interface BookerOptions {
  /** Longest wait from the first queued booking to its flush (default 250 ms). */
  readonly intervalMs?: number;
  /** A flush starts at once when this many bookings wait (default 500). */
  readonly maxBatch?: number;
  /** Bookings held at most (default 100,000); beyond: dropped, counted. */
  readonly maxPending?: number;
  /** The batch delay and the close's retries run on it (default `systemClock`). */
  readonly clock?: Clock;
  /** Runs after the last flush of `close` (e.g. to let go of the booker's own Redis connection). */
  readonly onClosed?: () => void;
}

/** What the booker reports (metrics read it). */
export interface BookerEvents {
  booked(p: PricedBooking, lagSeconds: number): void;
  /** A booking not written: `duplicate` (already booked: not an error), `floor`, `dropped` (queue full), `lost` (close deadline passed). */
  unbooked(p: PricedBooking, reason: 'duplicate' | 'floor' | 'dropped' | 'lost'): void;
  flushFailed(err: unknown): void;
}

export class Booker {
  readonly #write: BookingWrite;
  readonly #log: Logger;
  readonly #events: BookerEvents;
  readonly #interval: number;
  readonly #maxBatch: number;
  readonly #maxPending: number;
  readonly #clock: Clock;
  readonly #now: () => number;
  readonly #onClosed: (() => void) | undefined;
  #pending: PricedBooking[] = [];
  #timer: TimerHandle | null = null;
  #flushing: Promise<void> | null = null;
  #closed = false;

  constructor(write: BookingWrite, log: Logger, events: BookerEvents, opts: BookerOptions = {}) {
    this.#write = write;
    this.#log = log;
    this.#events = events;
    this.#interval = opts.intervalMs ?? 250;
    this.#maxBatch = opts.maxBatch ?? 500;
    this.#maxPending = opts.maxPending ?? 100_000;
    this.#clock = opts.clock ?? systemClock;
    this.#now = this.#clock.now;
    this.#onClosed = opts.onClosed;
  }

  get pending(): number {
    return this.#pending.length;
  }

  /** Queues a priced booking (after close: written by the close's last flush if still running, else lost). */
  add(p: PricedBooking): void {
    if (this.#pending.length >= this.#maxPending) {
      this.#events.unbooked(p, 'dropped');
      return;
    }
    this.#pending.push(p);
    if (this.#pending.length >= this.#maxBatch) void this.flush();
    else this.#timer ??= this.#clock.setTimeout(() => void this.flush(), this.#interval);
  }

  /** Writes what is queued now (one batch of at most `maxBatch`… repeated until the queue is empty or a write fails). */
  flush(): Promise<void> {
    if (this.#timer !== null) {
      this.#clock.clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#flushing !== null) return this.#flushing.then(() => (this.#pending.length > 0 ? this.flush() : undefined));
    this.#flushing = this.#run().finally(() => {
      this.#flushing = null;
      if (this.#pending.length > 0 && !this.#closed) this.#timer ??= this.#clock.setTimeout(() => void this.flush(), this.#interval);
    });
    return this.#flushing;
  }

  async #run(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending.splice(0, this.#maxBatch);
      let results: BookResult[];
      try {
        results = await this.#write(batch);
      } catch (err) {
        this.#events.flushFailed(err);
        this.#log.warn({ err: { message: (err as Error)?.message }, bookings: batch.length }, 'metering: booking flush failed; kept for the next flush');
        this.#pending.unshift(...batch);
        return;
      }
      const retry: PricedBooking[] = [];
      const now = this.#now();
      results.forEach((r, i) => {
        const p = batch[i]!;
        if (r === 'booked') this.#events.booked(p, Math.max(0, now - p.endedAt) / 1000);
        else if (r === 'duplicate' || r === 'floor') this.#events.unbooked(p, r);
        else retry.push(p);
      });
      if (retry.length > 0) {
        this.#events.flushFailed(new Error(`${retry.length} bookings failed`));
        this.#pending.unshift(...retry);
        return;
      }
    }
  }

  /** Flushes everything, retrying every 100 ms until `deadline` (epoch ms); what is left then is lost (counted, logged). */
  async close(deadline: number): Promise<void> {
    this.#closed = true;
    while (true) {
      await this.flush();
      if (this.#pending.length === 0 || this.#now() >= deadline) break;
      await sleep(this.#clock, Math.min(100, Math.max(1, deadline - this.#now())));
    }
    if (this.#timer !== null) this.#clock.clearTimeout(this.#timer);
    const lost = this.#pending.splice(0);
    for (const p of lost) this.#events.unbooked(p, 'lost');
    if (lost.length > 0) this.#log.error({ bookings: lost.length }, 'metering: bookings not written before the shutdown deadline');
    this.#onClosed?.();
  }
}
