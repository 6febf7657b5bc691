/**
 * Prometheus metrics (`/metrics` on the admin port), on a registry of their own.
 *
 * Hot path: one decision costs two typed-array increments and a bucket search: decision counts and
 * the latency histogram live in Float64Arrays and are turned into samples only when scraped. No
 * label object is built per decision.
 *
 * Store-side numbers (cache hits, misses, invalidations, size) are read at scrape time through
 * `addStoreStats`, so any store can report them without depending on this module.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry, type Histogram } from 'prom-client';
import type { CheckOutcome, DecisionObserver } from '../authorizer.ts';
import { DENY_CODES } from '../core/codes.ts';
import { FAMILIES, type Family } from '../core/families/index.ts';

/** What a store may report; every field is optional (an uncached store reports nothing). */
export interface StoreStats {
  /** Decisions' store lookups answered from the cache (monotonic). */
  readonly cacheHits?: number;
  /** Lookups that went to Redis (monotonic). */
  readonly cacheMisses?: number;
  /** Cache entries dropped on an invalidation message or a link reset (monotonic). */
  readonly cacheInvalidations?: number;
  /** Entries held now. */
  readonly cacheSize?: number;
  /** Allowed requests not counted per key because the counter held its maximum of keys (monotonic). */
  readonly usageDropped?: number;
  /** Usage-counter flushes that failed (monotonic; their counts are kept for the next flush). */
  readonly usageFlushFailures?: number;
  /** Keys with counts waiting for the next flush. */
  readonly usagePendingKeys?: number;
}

/** Anything that emits ioredis-style `error` and `reconnecting` events. */
export interface RedisEvents {
  on(event: 'error' | 'reconnecting', fn: (...args: unknown[]) => void): unknown;
}

/** `code` label of an allow. */
export const ALLOW_CODE = 'OK';
/** Every `code` label value: OK first, then the deny codes. */
export const CODES = [ALLOW_CODE, ...DENY_CODES] as const;
const FAMILY_INDEX: Record<Family, number> = { openai: 0, anthropic: 1, google: 2 };
const CODE_INDEX = new Map<string, number>(CODES.map((c, i) => [c, i]));

/** Index of a decision's code in `CODES` (0: allowed). */
export function codeIndex(d: CheckOutcome['decision']): number {
  return d.allow ? 0 : (CODE_INDEX.get(d.code) ?? 0);
}

/** Seconds: decisions are sub-millisecond when cached, a Redis round trip when not, 250 ms at the timeout. */
export const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

export interface MetricsOptions {
  /** Process and Node.js runtime metrics (CPU, memory, event loop lag, GC). Default true. */
  readonly defaultMetrics?: boolean;
  readonly version?: string;
}

export class Metrics {
  readonly registry = new Registry();
  /** decisions[code * FAMILIES.length + family] */
  readonly #decisions = new Float64Array(CODES.length * FAMILIES.length);
  readonly #redisErrors: Counter<'connection'>;
  readonly #redisReconnects: Counter<'connection'>;
  readonly #storeStats: Array<() => StoreStats | undefined> = [];
  readonly #inFlight: Array<() => number> = [];
  #ready: () => boolean = () => false;

  /** The observer to hand to `Authorizer.observe`. */
  readonly observer: DecisionObserver;

  constructor(opts: MetricsOptions = {}) {
    const registers = [this.registry];
    const decisions = this.#decisions;

    new Counter({
      name: 'keygate_decisions_total',
      help: 'Decisions by result (allow|deny), code (OK or the deny code) and entry family.',
      labelNames: ['result', 'code', 'family'] as const,
      registers,
      collect() {
        this.reset();
        for (let c = 0; c < CODES.length; c++) {
          const code = CODES[c]!;
          const result = code === ALLOW_CODE ? 'allow' : 'deny';
          for (let f = 0; f < FAMILIES.length; f++) {
            const n = decisions[c * FAMILIES.length + f]!;
            // Allows and every code appear from the start so that rate() has a baseline.
            this.inc({ result, code, family: FAMILIES[f]! }, n);
          }
        }
      },
    });

    const latency = new FixedHistogram(
      'keygate_decision_duration_seconds',
      'Time from CheckRequest decoded to decision made, by result.',
      'result',
      ['allow', 'deny'],
      LATENCY_BUCKETS,
    );
    this.registry.registerMetric(latency as unknown as Histogram);

    this.#redisErrors = new Counter({
      name: 'keygate_redis_errors_total',
      help: 'Errors reported by a Redis connection (connection refused, timeouts, protocol errors).',
      labelNames: ['connection'] as const,
      registers,
    });
    this.#redisReconnects = new Counter({
      name: 'keygate_redis_reconnects_total',
      help: 'Reconnect attempts by a Redis connection after it was lost.',
      labelNames: ['connection'] as const,
      registers,
    });

    const storeStats = this.#storeStats;
    const sum = (pick: (s: StoreStats) => number | undefined): number | undefined => {
      let total: number | undefined;
      for (const read of storeStats) {
        const v = safeRead(read);
        const n = v === undefined ? undefined : pick(v);
        if (typeof n === 'number' && Number.isFinite(n)) total = (total ?? 0) + n;
      }
      return total;
    };
    const callbackCounter = (name: string, help: string, pick: (s: StoreStats) => number | undefined) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          const v = sum(pick);
          this.reset();
          if (v !== undefined && v > 0) this.inc(v);
        },
      });
    callbackCounter('keygate_cache_hits_total', 'Store lookups answered from the local cache.', (s) => s.cacheHits);
    callbackCounter('keygate_cache_misses_total', 'Store lookups that went to Redis.', (s) => s.cacheMisses);
    callbackCounter(
      'keygate_cache_invalidations_total',
      'Cache entries dropped because the store said they changed or the invalidation link broke.',
      (s) => s.cacheInvalidations,
    );
    callbackCounter(
      'keygate_usage_counts_dropped_total',
      'Allowed requests not counted for last-used and request counts because too many keys were pending a flush.',
      (s) => s.usageDropped,
    );
    callbackCounter('keygate_usage_flush_failures_total', 'Usage-counter flushes to Redis that failed (retried with the next flush).', (s) => s.usageFlushFailures);
    new Gauge({
      name: 'keygate_usage_pending_keys',
      help: 'Keys whose request counts wait for the next flush (at most one second).',
      registers,
      collect() {
        this.set(sum((s) => s.usagePendingKeys) ?? 0);
      },
    });
    new Gauge({
      name: 'keygate_cache_entries',
      help: 'Entries held in the local cache.',
      registers,
      collect() {
        this.set(sum((s) => s.cacheSize) ?? 0);
      },
    });

    const inFlight = this.#inFlight;
    new Gauge({
      name: 'keygate_checks_in_flight',
      help: 'Checks received and not yet answered, over all transports.',
      registers,
      collect() {
        let n = 0;
        for (const read of inFlight) n += read();
        this.set(n);
      },
    });

    const ready = () => this.#ready();
    new Gauge({
      name: 'keygate_ready',
      help: '1 when the sidecar reports ready (store reachable, not draining), else 0.',
      registers,
      collect() {
        this.set(ready() ? 1 : 0);
      },
    });
    new Gauge({
      name: 'keygate_build_info',
      help: 'Always 1; labels carry the version.',
      labelNames: ['version'] as const,
      registers,
    }).set({ version: opts.version ?? 'unknown' }, 1);

    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });

    this.observer = (outcome: CheckOutcome, _input, startedAt: bigint) => {
      const d = outcome.decision;
      const c = codeIndex(d);
      const i = c * FAMILIES.length + FAMILY_INDEX[outcome.family];
      decisions[i] = decisions[i]! + 1;
      latency.observe(d.allow ? 0 : 1, Number(process.hrtime.bigint() - startedAt) / 1e9);
    };
  }

  /** Counts `error` and `reconnecting` events of a Redis client under `connection`. */
  watchRedis(client: RedisEvents, connection: string): void {
    const errors = this.#redisErrors.labels(connection);
    const reconnects = this.#redisReconnects.labels(connection);
    errors.inc(0);
    reconnects.inc(0);
    client.on('error', () => errors.inc());
    client.on('reconnecting', () => reconnects.inc());
  }

  /** Adds a source of cache numbers, read at scrape time (several sources are summed). */
  addStoreStats(read: () => StoreStats | undefined): void {
    this.#storeStats.push(read);
  }

  /** Adds a transport's count of checks in flight (summed into keygate_checks_in_flight). */
  addInFlight(read: () => number): void {
    this.#inFlight.push(read);
  }

  setReadiness(ready: () => boolean): void {
    this.#ready = ready;
  }

  /** The exposition text and its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/**
 * A histogram over fixed label values, kept in typed arrays: observing is a bucket search and two
 * additions, no allocation (prom-client's own histogram builds and hashes a label object per call,
 * the largest per-decision cost measured). Registered on the registry as a metric whose `get()`
 * returns the same shape prom-client's Histogram does.
 */
class FixedHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #label: string;
  readonly #values: readonly string[];
  readonly #bounds: readonly number[];
  /** counts[v * (bounds + 1) + b]: non-cumulative; the last slot of each row is +Inf. */
  readonly #counts: Float64Array;
  readonly #sums: Float64Array;

  constructor(name: string, help: string, label: string, values: readonly string[], bounds: readonly number[]) {
    this.name = name;
    this.help = help;
    this.#label = label;
    this.#values = values;
    this.#bounds = bounds;
    this.#counts = new Float64Array(values.length * (bounds.length + 1));
    this.#sums = new Float64Array(values.length);
  }

  observe(valueIndex: number, x: number): void {
    const bounds = this.#bounds;
    let b = 0;
    while (b < bounds.length && x > bounds[b]!) b++;
    const i = valueIndex * (bounds.length + 1) + b;
    this.#counts[i] = this.#counts[i]! + 1;
    this.#sums[valueIndex] = this.#sums[valueIndex]! + x;
  }

  reset(): void {
    this.#counts.fill(0);
    this.#sums.fill(0);
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: object[] }> {
    const values: object[] = [];
    const row = this.#bounds.length + 1;
    this.#values.forEach((v, vi) => {
      let cumulative = 0;
      for (let b = 0; b < row; b++) {
        cumulative += this.#counts[vi * row + b]!;
        const le = b < this.#bounds.length ? this.#bounds[b]! : '+Inf';
        values.push({ metricName: `${this.name}_bucket`, labels: { le, [this.#label]: v }, value: cumulative });
      }
      values.push({ metricName: `${this.name}_sum`, labels: { [this.#label]: v }, value: this.#sums[vi]! });
      values.push({ metricName: `${this.name}_count`, labels: { [this.#label]: v }, value: cumulative });
    });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

function safeRead(read: () => StoreStats | undefined): StoreStats | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}
