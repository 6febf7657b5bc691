/**
 * What remains of a token rate's window, for the `x-ratelimit-*-tokens` headers of allowed answers
 * (docs/rate-limits.md). The count changes with every booking, so it is not cached with the gate:
 * each window record is read at most once per `refreshMs` per sidecar, in the background, and the
 * header reports the count as of that read. A decision never waits for it; until the first read
 * answers, the window counts as unused: the limit comes from the key's (or account's) record and
 * the whole of it is reported remaining, so the headers are there from a key's first allowed
 * request (a window past its limit is refused by the gate's token block, not by this view).
 */
import { LRUCache } from 'lru-cache';
import { windowOf, type RateView } from '../core/rate.ts';
import { TokenWindowField, type Rate } from '../schema/rates.ts';
import type { RedisClient } from './redis.ts';
import { systemClock, type Clock } from '../core/clock.ts';

export interface TokenRateViewsOptions {
  /** A record is read again at most this often. Default 1 000 ms. */
  readonly refreshMs?: number;
  /** Records remembered (bounded memory). Default 100 000. */
  readonly maxEntries?: number;
  /** When a record was last read (default `systemClock`). */
  readonly clock?: Clock;
}

interface Entry {
  windowStart: number;
  used: number;
  /** When the last read was sent (reads are at most one per `refreshMs`, answered or not). */
  sentAt: number;
  reading: boolean;
}

export class TokenRateViews {
  readonly #redis: RedisClient;
  readonly #refreshMs: number;
  readonly #now: () => number;
  readonly #entries: LRUCache<string, Entry>;
  /** Background reads sent (tests, metrics). */
  reads = 0;

  constructor(redis: RedisClient, opts: TokenRateViewsOptions = {}) {
    this.#redis = redis;
    this.#refreshMs = opts.refreshMs ?? 1000;
    this.#now = (opts.clock ?? systemClock).now;
    this.#entries = new LRUCache({ max: opts.maxEntries ?? 100_000 });
  }

  /** The window's view of a token rate (`rkey`: its `tokrate:` record) as last read (before the first read: unused). */
  view(rkey: string, rate: Rate): RateView {
    const now = this.#now();
    let e = this.#entries.get(rkey);
    if (e === undefined) {
      e = { windowStart: -1, used: 0, sentAt: -Infinity, reading: false };
      this.#entries.set(rkey, e);
    }
    if (!e.reading && now - e.sentAt >= this.#refreshMs) this.#read(rkey, e, now);
    const w = windowOf(rate.per, now);
    const used = e.windowStart === w.start ? e.used : 0;
    return { limit: rate.count, remaining: Math.max(0, rate.count - used), resetAt: w.end };
  }

  #read(rkey: string, e: Entry, now: number): void {
    e.reading = true;
    e.sentAt = now;
    this.reads++;
    this.#redis.hmget(rkey, TokenWindowField.start, TokenWindowField.used).then(
      ([w, used]) => {
        e.reading = false;
        e.windowStart = typeof w === 'string' && /^\d{1,16}$/.test(w) ? Number(w) : -1;
        e.used = typeof used === 'string' && /^\d{1,16}$/.test(used) ? Number(used) : 0;
      },
      () => {
        // Unreachable: keep the last view; try again after the interval.
        e.reading = false;
      },
    );
  }
}
