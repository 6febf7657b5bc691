/**
 * The metered answers' bookings: priced when the response ends (the price table then in memory),
 * queued, and written in batches by the usage-record script (`RECORD_USAGE`, the same atomic
 * effect as `POST /v1/usage`: idempotent on keygate's booking id (`x-request-id` only a label in the log), wallet debited, key spend grown, gate
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
import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';
import { MONEY_DEFAULTS } from '../console/wallet.ts';
import { RECORD_USAGE, RECORD_USAGE_EVENTS_AT, RECORD_USAGE_KEYS, usageRecordArgs, usageRecordKeys } from '../schema/money-scripts.ts';
import type { Schema } from '../schema/redis-schema.ts';
import { eventsSchema } from '../schema/events.ts';
import { eventsWritten, wakeAccounts } from '../events/publish.ts';
import type { RedisClient } from '../store/redis.ts';
import type { PriceBasis } from '../prices/basis.ts';
import type { PriceCatalog } from '../prices/catalog.ts';
import { priceBookingUsage, type PriceTable } from './pricing.ts';
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

/** The ARGV of RECORD_USAGE for a metered booking. */
export function bookingArgs(p: PricedBooking, o: { idempotencySeconds: number; logMaxEntries: number }): string[] {
  const b = p.booking;
  return usageRecordArgs({
    keyId: b.key_id,
    amountMicros: p.amountMicros,
    bookingId: b.booking_id,
    idempotencySeconds: o.idempotencySeconds,
    logMaxEntries: o.logMaxEntries,
    model: b.model ?? '',
    inputTokens: String(b.input_tokens),
    outputTokens: String(b.output_tokens),
    account: b.account,
    cachedInputTokens: String(b.cached_input_tokens),
    cacheWriteTokens: String(b.cache_write_tokens),
    reasoningTokens: String(b.reasoning_tokens),
    source: 'meter',
    estimated: b.estimated,
    unpriced: p.unpriced,
    price: p.basis === undefined ? '' : JSON.stringify(p.basis),
    label: b.request_id,
  });
}

type WithRecordUsage = { kgRecordUsage(...args: string[]): Promise<unknown> };

function resultOf(r: unknown): BookResult {
  const tag = Array.isArray(r) ? r[0] : null;
  // FLOOR: the wallet's floor; TOTAL: the key's total spend bound; TOKENS: a token total's bound — refused, never retried
  return tag === 'OK' ? 'booked' : tag === 'DUP' ? 'duplicate' : tag === 'FLOOR' || tag === 'TOTAL' || tag === 'TOKENS' ? 'floor' : 'error';
}

/** The write to Redis: RECORD_USAGE per booking, pipelined (Cluster: each to its account's node at once). */
export function redisBookingWrite(
  redis: RedisClient,
  s: Schema,
  o: { idempotencySeconds: number; logMaxEntries: number } = { idempotencySeconds: MONEY_DEFAULTS.usageIdempotencySeconds, logMaxEntries: MONEY_DEFAULTS.usageLogMaxEntries },
): BookingWrite {
  if (!('kgRecordUsage' in redis)) redis.defineCommand('kgRecordUsage', { numberOfKeys: RECORD_USAGE_KEYS, lua: RECORD_USAGE });
  /** Accounts already in the export's list (bounded). */
  const listed = new Set<string>();
  const args = (p: PricedBooking) => [...usageRecordKeys(s, p.booking.account, p.booking.key_id, p.booking.booking_id), ...bookingArgs(p, o)];
  return async (batch) => {
    const fresh = [...new Set(batch.map((p) => p.booking.account))].filter((a) => !listed.has(a));
    if (fresh.length > 0) {
      // The export's and the events' lists of accounts, written first (as the usage API does): listed never lags an entry.
      await redis.sadd(s.usageAccounts(), ...fresh);
      await redis.sadd(eventsSchema(s.ns).accounts(), ...fresh);
      if (listed.size + fresh.length > 10_000) listed.clear();
      for (const a of fresh) listed.add(a);
    }
    // Accounts whose booking wrote an event (a wallet or limit alert): the webhook worker is woken for them.
    const wake = (replies: unknown[]) => wakeAccounts(redis, s.ns, [...new Set(batch.filter((_, i) => eventsWritten(replies[i], RECORD_USAGE_EVENTS_AT) > 0).map((p) => p.booking.account))]);
    if (redis instanceof Cluster) {
      const c = redis as Cluster & WithRecordUsage;
      const settled = await Promise.allSettled(batch.map((p) => c.kgRecordUsage(...args(p))));
      await wake(settled.map((r) => (r.status === 'fulfilled' ? r.value : null)));
      return settled.map((r) => (r.status === 'fulfilled' ? resultOf(r.value) : 'error'));
    }
    const pipe = (redis as Redis).pipeline() as ReturnType<Redis['pipeline']> & WithRecordUsage;
    for (const p of batch) pipe.kgRecordUsage(...args(p));
    const results = await pipe.exec();
    if (results === null) throw new Error('pipeline discarded');
    await wake(results.map(([err, v]) => (err !== null ? null : v)));
    return results.map(([err, v]) => (err !== null ? 'error' : resultOf(v)));
  };
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
