/**
 * The metering runtime of a sidecar: opens one `MeterSession` per ext_proc stream (within the
 * stream bound), ends it (client half-close, the session's `close`, cancel, the lifetime bound,
 * shutdown), prices its booking with the price table of that moment and hands it to the booker.
 * Transport-free: the gRPC method (`src/transport/envoy/services/ext-proc.ts`) decodes each message and
 * feeds it typed (`./messages.ts`).
 *
 * A failure here never fails a request: an exception while metering ends that stream's metering
 * (counted as `internal`, logged without key material) and the stream is closed with OK, which
 * Envoy takes as "continue without processing".
 *
 * Bounds: `maxStreams` open at once (more: refused at once, counted `overload`); each stream lives
 * at most `maxStreamMs` (then ended and booked from what was seen); per stream, the session's fixed
 * readers plus a decoder's window when the response is encoded (docs/metering.md, "Bounds").
 */
import { ProblemLog } from './problem-log.ts';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { PriceTable } from '../schema/prices.ts';
import type { PriceCatalog } from '../prices/catalog.ts';
import { priceBooking, type Booker } from './booker.ts';
import { MeterSession, type MeterOptions, type MeterOutcome, type MeterStep } from './session.ts';
import type { ProcessingRequest } from './messages.ts';
import type { MeteringMetrics } from './metrics.ts';
import { sleep, systemClock, type Clock, type TimerHandle } from '../core/clock.ts';

export interface MeterLimits {
  /** Streams metered at once (default 10,000). */
  readonly maxStreams: number;
  /** The longest a stream is metered (default 15 minutes). */
  readonly maxStreamMs: number;
}

export const DEFAULT_METER_LIMITS: MeterLimits = { maxStreams: 10_000, maxStreamMs: 15 * 60_000 };

export interface MeterDeps {
  readonly booker: Booker;
  /** The price table now (the cached record; a promise when it must be read). */
  readonly prices: () => PriceTable | Promise<PriceTable>;
  /** The price catalog under the table (null or absent: off, `KEYGATE_PRICE_CATALOG=false`). */
  readonly catalog?: PriceCatalog | null;
  /** The account's price multiplier (10^-6 units; absent: 1), applied after everything else. */
  readonly accountMultiplier?: (account: string) => bigint | Promise<bigint>;
  readonly metrics: MeteringMetrics;
  readonly log: Logger;
  readonly options: Omit<MeterOptions, 'newRequestId'>;
  readonly limits?: MeterLimits;
  /** The stream lifetime, price-read retries and the close deadline run on it (default `systemClock`). */
  readonly clock?: Clock;
  /**
   * Records a provider object a metered request created as owned by its account (the owned record
   * of `src/schema/owned.ts`): an OpenAI background or stored response. Absent: not recorded.
   */
  readonly recordOwned?: (o: { provider: 'openai'; id: string; account: string; keyId: string }) => Promise<void>;
}

const CLOSED: MeterStep = Object.freeze({ reply: null, close: true });

/** One metered stream, as the gRPC method drives it. */
export interface MeterStream {
  /** One decoded ProcessingRequest → the answer to send (or none) and whether to end with OK. */
  message(req: ProcessingRequest): MeterStep;
  /** A message that could not be decoded: ends the metering of the stream (end with OK). */
  undecodable(): MeterStep;
  /** Whether the next message's ext_authz metadata is read (false: the decoder may skip it). */
  readonly wantsMetadata: boolean;
  /** The stream is over (half-close, cancel, close): book what was seen. Idempotent. */
  end(): void;
  /** Called once when the lifetime bound passes (the method then ends the call with OK). */
  onExpire: (() => void) | null;
}

export class Meter {
  readonly #d: MeterDeps;
  readonly #limits: MeterLimits;
  readonly #clock: Clock;
  readonly #now: () => number;
  /** Every session's options (one object: a session only reads them). */
  readonly #sessionOptions: MeterOptions;
  readonly #open = new Set<Stream>();
  /** Outcomes being priced and queued (awaited by close). */
  readonly #ending = new Set<Promise<void>>();
  /** At most 10 problem lines a second; the rest counted (metrics count every one). */
  readonly #problems: ProblemLog;
  #closed = false;
  /** Set by close: price reads stop being retried after it. */
  #closeDeadline: number | null = null;
  /** Responses whose price table is being read again (bounded by `maxStreams`). */
  #awaitingPrices = 0;

  constructor(d: MeterDeps) {
    this.#d = d;
    this.#limits = d.limits ?? DEFAULT_METER_LIMITS;
    this.#clock = d.clock ?? systemClock;
    this.#now = this.#clock.now;
    this.#sessionOptions = { ...d.options, newRequestId: () => `m:${randomUUID()}` };
    this.#problems = new ProblemLog({ clock: this.#clock });
  }

  get openStreams(): number {
    return this.#open.size;
  }

  /** A new stream, or null when the stream bound is reached or the meter is closing (counted). */
  open(): MeterStream | null {
    if (this.#closed || this.#open.size >= this.#limits.maxStreams) {
      this.#d.metrics.unbooked.inc({ reason: this.#closed ? 'shutdown' : 'overload' });
      this.#d.metrics.streams.inc({ outcome: 'overload' });
      return null;
    }
    const s = new Stream(this, new MeterSession(this.#sessionOptions), this.#now());
    this.#open.add(s);
    s.timer = this.#clock.setTimeout(() => {
      s.end();
      s.onExpire?.();
    }, this.#limits.maxStreamMs);
    s.timer.unref();
    return s;
  }

  /** @internal A stream ended: its outcome is priced and queued. */
  settle(s: Stream, outcome: Promise<MeterOutcome> | null): void {
    this.#open.delete(s);
    if (s.timer !== null) this.#clock.clearTimeout(s.timer);
    if (outcome === null) return; // counted by `internal`
    const p = outcome.then((o) => this.#book(o, s.openedAt)).catch((err: unknown) => this.internal(err));
    this.#ending.add(p);
    void p.finally(() => this.#ending.delete(p));
  }

  /** @internal A metering bug: counted, logged without key material. */
  internal(err: unknown): void {
    this.#d.metrics.failures.inc({ kind: 'internal' });
    this.#d.metrics.unbooked.inc({ reason: 'internal' });
    this.#d.log.error({ err: { message: (err as Error)?.message, stack: (err as Error)?.stack } }, 'metering: internal error; the stream is not metered');
  }

  async #book(o: MeterOutcome, openedAt: number): Promise<void> {
    const m = this.#d.metrics;
    const n = o.notes;
    if (n.failure !== null) m.failures.inc({ kind: n.failure });
    if (n.anomalies.badCounts > 0) m.anomalies.inc({ kind: 'bad-counts' }, n.anomalies.badCounts);
    if (n.anomalies.badModel > 0) m.anomalies.inc({ kind: 'bad-model' }, n.anomalies.badModel);
    if (n.anomalies.clamped > 0) m.anomalies.inc({ kind: 'clamped' }, n.anomalies.clamped);
    if (n.modelDiffers) m.anomalies.inc({ kind: 'model-differs' });
    if (n.identityMismatch) m.anomalies.inc({ kind: 'identity-mismatch' });
    if (n.oversizedEvents > 0) m.anomalies.inc({ kind: 'oversized-events' }, n.oversizedEvents);
    if (n.cut) m.anomalies.inc({ kind: 'cut' });
    if (n.bookingId === 'minted' && o.kind === 'booking') m.anomalies.inc({ kind: 'missing-booking-id' });
    const owned = n.ownedResponse;
    if (owned !== null && this.#d.recordOwned !== undefined) {
      // never fails the booking: a failed write is counted and logged (the record is what opens the response to its account later)
      this.#d.recordOwned({ provider: 'openai', ...owned }).catch((err: unknown) => {
        m.failures.inc({ kind: 'owned' });
        this.#d.log.error({ keyId: owned.keyId, responseId: owned.id, err: { message: (err as Error)?.message } }, 'metering: the owned-response record was not written');
      });
    }
    if (o.kind === 'none') {
      m.streams.inc({ outcome: o.reason });
      if (o.reason === 'no-identity' || o.reason === 'no-response-headers' || o.reason === 'no-usage-reader') m.unbooked.inc({ reason: o.reason });
      return;
    }
    m.streams.inc({ outcome: 'booking' });
    const endedAt = this.#now();
    let table: PriceTable;
    try {
      table = await this.#d.prices();
    } catch (err) {
      const later = await this.#pricesLater(err);
      if (later instanceof Error) {
        m.unbooked.inc({ reason: 'prices-unavailable' });
        this.#d.log.error({ requestId: o.booking.request_id, keyId: o.booking.key_id, err: { message: later.message } }, 'metering: no price table (store unavailable); the response is not booked');
        return;
      }
      table = later;
    }
    let multiplier: bigint | undefined;
    try {
      const v = this.#d.accountMultiplier?.(o.booking.account);
      multiplier = v === undefined || typeof v === 'bigint' ? v : await v; // the cached record: no extra turn of the microtask queue
    } catch (err) {
      // The account record could not be read (the store is down): the standard rate, logged; the basis says 1.
      this.#d.log.warn({ requestId: o.booking.request_id, err: { message: asError(err).message } }, 'metering: the account price multiplier could not be read; priced at 1');
    }
    const priced = priceBooking(o.booking, table, endedAt, this.#d.catalog ?? null, n.requestedModel, multiplier);
    const t = n.trace;
    const p = n.endpointKind === null ? priced : { ...priced, context: { operation: n.endpointKind, requestModel: n.requestedModel, traceparent: t?.parent, tracestate: t?.state, startedAtMs: openedAt } };
    if (p.unpriced) m.unpriced.inc();
    if (p.clamped) m.anomalies.inc({ kind: 'cost-clamped' });
    if (o.booking.estimated) m.anomalies.inc({ kind: 'estimated' });
    const minted = n.bookingId === 'minted';
    if (n.failure !== null || n.modelDiffers || n.identityMismatch || minted) {
      const { tell, held } = this.#problems.take();
      if (held > 0) this.#d.log.warn({ held }, 'metering: more responses read with a problem in the last window (counted in keygate_metering_anomalies_total and keygate_metering_failures_total)');
      if (tell) {
        this.#d.log.warn(
          { requestId: o.booking.request_id, bookingId: o.booking.booking_id, keyId: o.booking.key_id, model: o.booking.model, failure: n.failure, modelDiffers: n.modelDiffers, identityMismatch: n.identityMismatch, missingBookingId: minted },
          minted
            ? 'metering: no booking_id in the forwarded ext_authz metadata (forward the envoy.filters.http.ext_authz namespace to ext_proc); booked under an id minted for this stream'
            : 'metering: response read with a problem (booked from what was read)',
        );
      }
    }
    this.#d.booker.add(p);
  }

  /**
   * The price table, read again while the store cannot answer it (100 ms, doubling to 2 s): a
   * served response waits for its price rather than go unbooked. Gives up (the last error) when
   * the meter is closing and its deadline has passed, or at once when `maxStreams` responses
   * already wait (memory stays bounded through a long outage).
   */
  async #pricesLater(first: unknown): Promise<PriceTable | Error> {
    let err = first;
    if (this.#awaitingPrices >= this.#limits.maxStreams) return asError(err);
    this.#awaitingPrices++;
    try {
      for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
        const left = this.#closeDeadline === null ? wait : this.#closeDeadline - this.#now();
        if (left <= 0) return asError(err);
        this.#d.log.debug({ err: { message: asError(err).message }, retryMs: Math.min(wait, left) }, 'metering: price table unavailable; read again');
        await sleep(this.#clock, Math.min(wait, left));
        try {
          return await this.#d.prices();
        } catch (e) {
          err = e;
        }
      }
    } finally {
      this.#awaitingPrices--;
    }
  }

  /** Stops metering: refuses new streams, ends the open ones (booked from what was seen), then drains the booker until `deadline` (epoch ms). */
  async close(deadline: number): Promise<void> {
    this.#closed = true;
    this.#closeDeadline = deadline;
    for (const s of [...this.#open]) {
      s.end();
      s.onExpire?.();
    }
    await Promise.race([Promise.all([...this.#ending]), sleep(this.#clock, Math.max(0, deadline - this.#now()), true)]);
    await this.#d.booker.close(deadline);
  }
}

class Stream implements MeterStream {
  timer: TimerHandle | null = null;
  onExpire: (() => void) | null = null;
  #ended = false;
  readonly #meter: Meter;
  readonly #session: MeterSession;
  /** When the stream opened (epoch ms), the start of its span. */
  readonly openedAt: number;

  constructor(meter: Meter, session: MeterSession, openedAt: number) {
    this.#meter = meter;
    this.#session = session;
    this.openedAt = openedAt;
  }

  get wantsMetadata(): boolean {
    return this.#session.wantsMetadata;
  }

  undecodable(): MeterStep {
    if (this.#ended) return CLOSED;
    return this.#session.undecodable();
  }

  message(req: ProcessingRequest): MeterStep {
    if (this.#ended) return CLOSED;
    try {
      return this.#session.handle(req);
    } catch (err) {
      this.#meter.internal(err);
      this.#ended = true;
      this.#meter.settle(this, null);
      return CLOSED;
    }
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    let outcome: Promise<MeterOutcome> | null;
    try {
      outcome = this.#session.end();
    } catch (err) {
      this.#meter.internal(err);
      outcome = null;
    }
    this.#meter.settle(this, outcome);
  }
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String((err as { message?: unknown })?.message ?? err));
}
