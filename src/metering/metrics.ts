/**
 * The metering's Prometheus metrics, on the sidecar's registry (docs/metering.md, "Metrics"). None
 * of them is touched by a Check: only ext_proc streams and the booker count here.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Why a response that was served is not (or not yet) in the books. */
export const UNBOOKED_REASONS = ['overload', 'no-identity', 'no-response-headers', 'prices-unavailable', 'floor', 'queue-full', 'shutdown', 'internal'] as const;
export type UnbookedReason = (typeof UNBOOKED_REASONS)[number];

/** Metering failures: reading a response (the first seven), a booking write (flush), a bug (internal). */
export const FAILURE_KINDS = ['corrupt', 'truncated', 'too-large', 'backlog', 'unsupported-encoding', 'unreadable', 'undecodable-message', 'flush', 'owned', 'internal'] as const;

export const TOKEN_DIRECTIONS = ['input', 'cached_input', 'cache_write', 'output', 'reasoning'] as const;

/** Seconds from a response's end to its booking in Redis. */
export const BOOKING_LAG_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class MeteringMetrics {
  readonly unbooked: Counter<'reason'>;
  readonly bookings: Counter<'result'>;
  readonly lag: Histogram;
  readonly tokens: Counter<'direction'>;
  readonly unpriced: Counter;
  readonly failures: Counter<'kind'>;
  readonly anomalies: Counter<'kind'>;
  readonly streams: Counter<'outcome'>;

  constructor(registry: Registry, openStreams: () => number, pendingBookings: () => number) {
    const registers = [registry];
    this.unbooked = new Counter({
      name: 'keygate_metering_unbooked_responses_total',
      help: 'Metered responses not booked, by reason (overload: stream refused at the stream bound; floor: the wallet floor; queue-full, shutdown: dropped by the booker; internal: a metering bug).',
      labelNames: ['reason'] as const,
      registers,
    });
    for (const r of UNBOOKED_REASONS) this.unbooked.inc({ reason: r }, 0);
    this.bookings = new Counter({
      name: 'keygate_metering_bookings_total',
      help: 'Metered bookings written (booked) or found already booked under the same request id (duplicate).',
      labelNames: ['result'] as const,
      registers,
    });
    this.bookings.inc({ result: 'booked' }, 0);
    this.bookings.inc({ result: 'duplicate' }, 0);
    this.lag = new Histogram({
      name: 'keygate_metering_booking_lag_seconds',
      help: "Seconds from a metered response's end to its booking in Redis.",
      buckets: BOOKING_LAG_BUCKETS,
      registers,
    });
    this.tokens = new Counter({
      name: 'keygate_metering_tokens_total',
      help: 'Tokens booked by metering, by direction (input includes cached_input and cache_write; output includes reasoning).',
      labelNames: ['direction'] as const,
      registers,
    });
    for (const d of TOKEN_DIRECTIONS) this.tokens.inc({ direction: d }, 0);
    this.unpriced = new Counter({
      name: 'keygate_metering_unpriced_total',
      help: 'Metered bookings whose model matched no price (booked at 0, marked unpriced).',
      registers,
    });
    this.failures = new Counter({
      name: 'keygate_metering_failures_total',
      help: 'Metering failures by kind: reading a response (corrupt, truncated, too-large, backlog, unsupported-encoding, unreadable, undecodable-message), flush (a booking write failed; retried), internal.',
      labelNames: ['kind'] as const,
      registers,
    });
    // Every kind from the start, so that increase() and rate() see the first failure.
    for (const k of FAILURE_KINDS) this.failures.inc({ kind: k }, 0);
    this.anomalies = new Counter({
      name: 'keygate_metering_anomalies_total',
      help: 'Oddities in metered responses: bad-counts, bad-model, clamped, model-differs, identity-mismatch, oversized-events, estimated, cut, missing-booking-id (no booking_id forwarded: booked under an id minted per stream), cost-clamped.',
      labelNames: ['kind'] as const,
      registers,
    });
    this.streams = new Counter({
      name: 'keygate_metering_streams_total',
      help: 'ext_proc streams by outcome: booking, or why there was nothing to book (not-metered, error-status, no-identity, no-response-headers), or overload.',
      labelNames: ['outcome'] as const,
      registers,
    });
    new Gauge({
      name: 'keygate_metering_open_streams',
      help: 'ext_proc streams open now.',
      registers,
      collect() {
        this.set(openStreams());
      },
    });
    new Gauge({
      name: 'keygate_metering_pending_bookings',
      help: 'Priced bookings waiting for the next flush.',
      registers,
      collect() {
        this.set(pendingBookings());
      },
    });
  }
}
