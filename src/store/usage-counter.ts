/**
 * Per-key request counts and last-used times, counted by the sidecar in memory and written to Redis
 * once a second (`KEYGATE_COUNT_USAGE`). The request path only increments a Map entry; the
 * flush sends one pipelined write (one `KEY_USE` script call per key seen in the interval).
 *
 * Bounds: at most `maxKeys` keys are held between flushes; beyond that, requests of further keys
 * are not counted until the next flush (`dropped` counts them). A failed flush puts its counts back
 * (within the same bound) for the next one. Closing flushes what is left; a sidecar that dies
 * loses at most one interval of counts.
 */
import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';
import { KEY_USE } from '../schema/money-scripts.ts';
import type { Schema } from '../schema/redis-schema.ts';
import type { RedisClient } from './redis.ts';
import { every, systemClock, type Clock } from '../core/clock.ts';

export interface Pending {
  readonly account: string;
  n: number;
  last: number;
}

/** Writes one batch of counts (key id → pending counts); rejects when any of it failed. */
export type UsageWrite = (batch: ReadonlyMap<string, Pending>) => Promise<void>;

export interface UsageCounterOptions {
  /** Flush interval (default `USAGE_FLUSH_MS`). */
  readonly intervalMs?: number;
  /** Keys held between flushes (default 100,000). */
  readonly maxKeys?: number;
  /** The last-used times and the flush timer (default `systemClock`). */
  readonly clock?: Clock;
}

/** How often the counts are written: once a second. */
export const USAGE_FLUSH_MS = 1000;

type WithKeyUse = { kgKeyUse(key: string, n: string, last: string): Promise<unknown> };

/** The write to Redis: one `KEY_USE` script call per key (pipelined; on Cluster each sent to its node at once). */
export function redisUsageWrite(redis: RedisClient, s: Schema): UsageWrite {
  if (!('kgKeyUse' in redis)) redis.defineCommand('kgKeyUse', { numberOfKeys: 1, lua: KEY_USE });
  return async (batch) => {
    if (redis instanceof Cluster) {
      // Keys of different accounts live in different slots: ioredis sends each to its node at once.
      const c = redis as Cluster & WithKeyUse;
      await Promise.all([...batch].map(([id, p]) => c.kgKeyUse(s.keyUse(p.account, id), String(p.n), String(p.last))));
    } else {
      const pipe = (redis as Redis).pipeline() as ReturnType<Redis['pipeline']> & WithKeyUse;
      for (const [id, p] of batch) pipe.kgKeyUse(s.keyUse(p.account, id), String(p.n), String(p.last));
      const results = await pipe.exec();
      const failed = results?.find(([err]) => err !== null);
      if (failed) throw failed[0];
    }
  };
}

export class UsageCounter {
  readonly #write: UsageWrite;
  readonly #log: Logger;
  readonly #maxKeys: number;
  readonly #now: () => number;
  readonly #stopTimer: () => void;
  #pending = new Map<string, Pending>();
  #flushing: Promise<void> | null = null;
  /** The one flush queued behind `#flushing` (callers during a flush share it). */
  #queued: Promise<void> | null = null;
  #closed = false;
  /** Requests not counted because `maxKeys` keys were already pending (monotonic). */
  dropped = 0;
  /** Flushes that failed (monotonic). */
  failedFlushes = 0;

  constructor(write: UsageWrite, log: Logger, opts: UsageCounterOptions = {}) {
    this.#write = write;
    this.#log = log;
    this.#maxKeys = opts.maxKeys ?? 100_000;
    const clock = opts.clock ?? systemClock;
    this.#now = clock.now;
    this.#stopTimer = every(clock, opts.intervalMs ?? USAGE_FLUSH_MS, () => void this.flush());
  }

  /** One allowed request of `keyId` (the request path: an in-memory increment, nothing else). */
  count(keyId: string, account: string): void {
    const p = this.#pending.get(keyId);
    if (p !== undefined) {
      p.n++;
      p.last = this.#now();
    } else if (this.#pending.size < this.#maxKeys) {
      this.#pending.set(keyId, { account, n: 1, last: this.#now() });
    } else {
      this.dropped++;
    }
  }

  /** Keys waiting for the next flush. */
  get pendingKeys(): number {
    return this.#pending.size;
  }

  /**
   * Writes the pending counts (one pipeline). What was counted before the call is written when the
   * promise settles: a call made while a flush is writing (its batch already taken) waits for it and
   * then runs one more; all calls made meanwhile share that one.
   */
  flush(): Promise<void> {
    if (this.#queued) return this.#queued;
    if (this.#flushing) {
      return (this.#queued = this.#flushing.then(() => {
        this.#queued = null;
        return this.flush();
      }));
    }
    return (this.#flushing = this.#flushOnce().finally(() => {
      this.#flushing = null;
    }));
  }

  async #flushOnce(): Promise<void> {
    if (this.#pending.size === 0) return;
    const batch = this.#pending;
    this.#pending = new Map();
    try {
      await this.#write(batch);
    } catch (err) {
      this.failedFlushes++;
      this.#log.warn({ err: { message: (err as Error)?.message }, keys: batch.size }, 'usage counter flush failed; keeping the counts for the next one');
      if (this.#closed) return;
      for (const [id, p] of batch) {
        const cur = this.#pending.get(id);
        if (cur !== undefined) {
          cur.n += p.n;
          cur.last = Math.max(cur.last, p.last);
        } else if (this.#pending.size < this.#maxKeys) this.#pending.set(id, { ...p });
        else this.dropped += p.n;
      }
    }
  }

  /** Stops the timer and flushes what is left (once; a failure is logged, not thrown). */
  async close(): Promise<void> {
    this.#stopTimer();
    if (this.#flushing) await this.#flushing;
    if (this.#queued) await this.#queued;
    this.#closed = true;
    await this.flush();
  }
}
