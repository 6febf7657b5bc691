/**
 * The cache decorator of the one lookup shape (`RecordSource.lookup(type, id)`): every record type
 * (`src/schema/records.ts`: key records, account states, gates, and any added later) is held in
 * process memory by its Redis key name and dropped by the store the moment it changes (see
 * `invalidation.ts`). The unit tier runs this same class over in-memory hashes.
 *
 * Rules (each one closes a way to serve an answer the store has already withdrawn):
 * - An entry is served only while tracking is confirmed on every link. Losing a link (close,
 *   reconnect, failed heartbeat, topology change) drops the whole cache at once, before the next
 *   answer; nothing is cached again until tracking is confirmed anew, and the cache is dropped
 *   once more at that moment.
 * - A fetch is cached only if no invalidation of its key (nor a flush) happened while it was in
 *   flight: the invalidation may describe a write that the fetched value predates.
 * - Concurrent lookups of one key share one fetch (single-flight), but only while tracking is on,
 *   and a lookup never joins a fetch that started before an invalidation of that key.
 * - A record type marked `afterPendingIo` (the key, read first by a decision) is answered after pending
 *   I/O callbacks have run (`setImmediate`): an invalidation that reached the process before the
 *   request did is applied before the request is answered. Other hits are answered synchronously.
 *
 * Bounds: positive entries (grants, account states) and negative entries (unknown, revoked or
 * corrupt keys) live in two LRUs, so a flood of random keys only churns the negative one; together
 * they hold at most `maxEntries`. Store lookups are capped (`maxInflight` at once, `maxQueued`
 * waiting) and each is bounded by `lookupTimeoutMs`, so a flood costs Redis at most `maxInflight`
 * concurrent reads per sidecar and no decision waits longer than the bound.
 *
 * Outage: a lookup that cannot reach the store rejects with `StoreUnavailable` (→ 503). With
 * `serveCachedDuringOutage`, losing the link does not drop the cache; entries are then served only
 * when the store cannot be reached, and are dropped when tracking is confirmed again.
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { RecordType } from '../schema/records.ts';
import type { Schema } from '../schema/redis-schema.ts';
import { StoreUnavailable, type RecordSource } from './record-source.ts';
import type { Tracker } from './invalidation.ts';
import { systemClock, type Clock } from '../core/clock.ts';

export interface CacheOptions {
  /** Total entries (positive + negative); 0 disables caching (and tracking). */
  readonly maxEntries: number;
  readonly serveCachedDuringOutage: boolean;
  /** Upper bound of one store lookup, queueing included. */
  readonly lookupTimeoutMs: number;
  /** Store lookups in flight at once (per sidecar). */
  readonly maxInflight: number;
  /** Lookups waiting for a slot; beyond that a lookup fails at once (503). */
  readonly maxQueued: number;
  /** The lookup deadline runs on it (default `systemClock`). */
  readonly clock?: Clock;
}

/** Counters for metrics; monotonic unless noted. */
export interface CacheStats {
  /** Answers served from memory. */
  hits: number;
  /** Lookups that went to the store. */
  misses: number;
  /** Lookups that joined a fetch already in flight for the same key. */
  coalesced: number;
  /** Keys invalidated by the store (messages × keys). */
  invalidations: number;
  /** Whole-cache drops (link lost or re-established, FLUSHALL, topology change). */
  flushes: number;
  /** Store lookups that failed (connection, timeout, shed). */
  redisErrors: number;
  /** Store lookups that hit `lookupTimeoutMs`. */
  timeouts: number;
  /** Lookups refused because too many were in flight and queued. */
  shed: number;
  /** Cached answers served while the store was unreachable (`serveCachedDuringOutage`). */
  staleServed: number;
  /** Connection re-establishments (data or invalidation link). */
  reconnects: number;
  /** Current entries (gauge). */
  size: number;
  /** Current negative entries, part of `size` (gauge). */
  negativeSize: number;
  /** Store lookups in flight (gauge). */
  inflight: number;
  /** Tracking confirmed on every link: the cache is in use (gauge). */
  tracking: boolean;
}

/** A cached answer of some record type (known by the Redis key name it is held under); never null or undefined. */
type Answer = {};

interface Flight {
  readonly promise: Promise<Answer>;
  readonly epoch: number;
  invalidated: boolean;
}


/**
 * Resolves after the I/O callbacks of the current loop turn (`setImmediate`): an invalidation that
 * arrived with the request is applied before the cache answers. One promise per turn, shared by
 * every lookup of that turn (under load a poll batch holds many requests); reset when it fires, so
 * a lookup after that waits for the next turn.
 */
let turn: Promise<void> | null = null;
function afterPendingIo(): Promise<void> {
  return (turn ??= new Promise<void>((resolve) =>
    setImmediate(() => {
      turn = null;
      resolve();
    }),
  ));
}

export class CachedRecordSource implements RecordSource {
  readonly #inner: RecordSource;
  readonly #tracker: Tracker | null;
  readonly #schema: Schema;
  readonly #opts: CacheOptions;
  readonly #log: Logger;
  readonly #pos: LRUCache<string, Answer> | null;
  readonly #neg: LRUCache<string, Answer> | null;
  readonly #inflight = new Map<string, Flight>();
  /** Bumped by every flush and tracking change: a fetch from an older epoch is never cached. */
  #epoch = 0;
  #active = 0;
  readonly #queue: Array<() => void> = [];
  readonly #counters = {
    hits: 0,
    misses: 0,
    coalesced: 0,
    invalidations: 0,
    flushes: 0,
    redisErrors: 0,
    timeouts: 0,
    shed: 0,
    staleServed: 0,
  };

  constructor(inner: RecordSource, tracker: Tracker | null, s: Schema, opts: CacheOptions, log: Logger) {
    this.#inner = inner;
    this.#tracker = opts.maxEntries > 0 ? tracker : null;
    this.#schema = s;
    this.#opts = opts;
    this.#log = log;
    if (this.#tracker) {
      // A quarter for unknown keys (at least 1), the rest for grants and accounts.
      const negMax = opts.maxEntries >= 2 ? Math.max(1, Math.floor(opts.maxEntries / 4)) : 0;
      this.#pos = new LRUCache<string, Answer>({ max: opts.maxEntries - negMax });
      this.#neg = negMax > 0 ? new LRUCache<string, Answer>({ max: negMax }) : null;
      this.#tracker.on('invalidate', (keys) => this.#invalidate(keys));
      this.#tracker.on('down', (reason) => {
        this.#epoch++;
        if (!opts.serveCachedDuringOutage) this.#flush(reason);
        else this.#detachFlights();
      });
      this.#tracker.on('up', () => this.#flush('tracking confirmed'));
    } else {
      this.#pos = null;
      this.#neg = null;
    }
  }

  /** The cache is in use: tracking confirmed on every link. */
  get #tracked(): boolean {
    return this.#tracker !== null && this.#tracker.tracked;
  }

  lookup<T>(type: RecordType<T>, id: string): T | Promise<T> {
    if (type.afterPendingIo === true && this.#tracked) return afterPendingIo().then(() => this.#lookup(type, id));
    return this.#lookup(type, id);
  }

  /** Data link up and, when caching, the invalidation link confirmed. */
  ready(): boolean {
    return this.#inner.ready() && (this.#tracker === null || this.#tracker.tracked);
  }

  stats(): CacheStats {
    const negativeSize = this.#neg?.size ?? 0;
    return {
      ...this.#counters,
      reconnects: this.#tracker?.reconnects ?? 0,
      size: (this.#pos?.size ?? 0) + negativeSize,
      negativeSize,
      inflight: this.#active,
      tracking: this.#tracked,
    };
  }

  async close(): Promise<void> {
    this.#tracker?.close();
    this.#flush('closing');
    await this.#inner.close();
  }

  #lookup<T>(type: RecordType<T>, id: string): T | Promise<T> {
    const rkey = type.key(this.#schema, id);
    if (this.#tracked) {
      const hit = this.#pos!.get(rkey) ?? this.#neg?.get(rkey);
      if (hit !== undefined) {
        this.#counters.hits++;
        return hit as T;
      }
      const flight = this.#inflight.get(rkey);
      if (flight) {
        this.#counters.coalesced++;
        return flight.promise as Promise<T>;
      }
    }
    this.#counters.misses++;
    return this.#fetch(rkey, type.negative as (v: Answer) => boolean, () => this.#inner.lookup(type, id) as Answer | Promise<Answer>) as Promise<T>;
  }

  #fetch(rkey: string, negative: (v: Answer) => boolean, fetch: () => Answer | Promise<Answer>): Promise<Answer> {
    const tracked = this.#tracked;
    const flight: Flight = { epoch: this.#epoch, invalidated: false, promise: undefined as unknown as Promise<Answer> };
    (flight as { promise: Promise<Answer> }).promise = this.#bounded(fetch).then(
      (value) => {
        if (this.#inflight.get(rkey) === flight) this.#inflight.delete(rkey);
        if (this.#pos && !flight.invalidated && flight.epoch === this.#epoch) {
          // Cache when tracking is confirmed; when serving stale answers during outages, also keep the
          // freshest answer seen while untracked (used only if the store becomes unreachable).
          if (this.#tracked || this.#opts.serveCachedDuringOutage) this.#put(rkey, value, negative(value));
        }
        return value;
      },
      (err: unknown) => {
        if (this.#inflight.get(rkey) === flight) this.#inflight.delete(rkey);
        this.#counters.redisErrors++;
        if (this.#opts.serveCachedDuringOutage && this.#pos && err instanceof StoreUnavailable && !this.#tracked) {
          const stale = this.#pos.get(rkey) ?? this.#neg?.get(rkey);
          if (stale !== undefined) {
            this.#counters.staleServed++;
            return stale;
          }
        }
        throw err;
      },
    );
    if (tracked) this.#inflight.set(rkey, flight);
    return flight.promise;
  }

  #put(rkey: string, value: Answer, negative: boolean): void {
    if (negative) {
      if (this.#neg) this.#neg.set(rkey, value);
      this.#pos!.delete(rkey);
    } else {
      this.#pos!.set(rkey, value);
      this.#neg?.delete(rkey);
    }
  }

  #invalidate(keys: string[] | null): void {
    if (keys === null) {
      this.#epoch++;
      this.#flush('store flushed');
      return;
    }
    for (const k of keys) {
      this.#counters.invalidations++;
      this.#pos?.delete(k);
      this.#neg?.delete(k);
      const flight = this.#inflight.get(k);
      if (flight) {
        flight.invalidated = true;
        this.#inflight.delete(k);
      }
    }
  }

  #flush(reason: string): void {
    this.#epoch++;
    this.#detachFlights();
    const had = (this.#pos?.size ?? 0) + (this.#neg?.size ?? 0);
    this.#pos?.clear();
    this.#neg?.clear();
    this.#counters.flushes++;
    this.#log.debug({ reason, entries: had }, 'key cache dropped');
  }

  #detachFlights(): void {
    for (const f of this.#inflight.values()) f.invalidated = true;
    this.#inflight.clear();
  }

  /** One store read under the in-flight cap and the lookup deadline. */
  #bounded(fetch: () => Answer | Promise<Answer>): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      let settled = false;
      let started = false;
      const clock = this.#opts.clock ?? systemClock;
      const timer = clock.setTimeout(() => {
        if (settled) return;
        settled = true;
        this.#counters.timeouts++;
        reject(new StoreUnavailable(started ? 'store lookup timed out' : 'store lookup queue timed out'));
      }, this.#opts.lookupTimeoutMs);
      const run = () => {
        if (settled) return; // timed out while queued
        started = true;
        this.#active++;
        let p: Promise<Answer>;
        try {
          p = Promise.resolve(fetch());
        } catch (err) {
          p = Promise.reject(err);
        }
        p.then(
          (v) => {
            this.#release();
            if (settled) return;
            settled = true;
            clock.clearTimeout(timer);
            resolve(v);
          },
          (err: unknown) => {
            this.#release();
            if (settled) return;
            settled = true;
            clock.clearTimeout(timer);
            reject(err instanceof StoreUnavailable ? err : new StoreUnavailable(err instanceof Error ? err.message : String(err)));
          },
        );
      };
      if (this.#active < this.#opts.maxInflight) run();
      else if (this.#queue.length < this.#opts.maxQueued) this.#queue.push(run);
      else {
        settled = true;
        clock.clearTimeout(timer);
        this.#counters.shed++;
        reject(new StoreUnavailable('too many store lookups in flight'));
      }
    });
  }

  #release(): void {
    this.#active--;
    while (this.#active < this.#opts.maxInflight && this.#queue.length > 0) this.#queue.shift()!();
  }
}
