/**
 * The booking write: every booked request — a usage record of the console (`POST /v1/usage`, the
 * library's `recordUsage`) or a metered response of the sidecar (src/metering/booker.ts, batched) —
 * goes through here, as one call of the usage-record script (`RECORD_USAGE`, ./book-script.ts):
 * idempotent on the booking id, the wallet debited, the key's spend grown, the gate written on a
 * crossing, token counters and rates, the day's totals, one usage-log entry (which the PostgreSQL
 * ledger's sink reads, ./sink.ts). This module owns the script's arguments, the reading of its
 * reply and the events' wake-up; the callers map the typed reply to their own answers.
 *
 * Loaded by the sidecar's runtime: it imports no PostgreSQL module (./index.ts and the modules
 * behind it are the console's and `keygate ledger`'s).
 */
import { Cluster, type Redis } from 'ioredis';
import { MONEY_DEFAULTS } from '../core/money.ts';
import { eventsWritten, wakeAccounts } from '../events/publish.ts';
import type { PriceBasis } from '../prices/basis.ts';
import { eventsSchema } from '../schema/events.ts';
import { MAX_BALANCE_MICROS } from '../schema/money.ts';
import type { Schema } from '../schema/redis-schema.ts';
import type { RedisClient } from '../store/redis.ts';
import { RECORD_USAGE, RECORD_USAGE_EVENTS_AT, RECORD_USAGE_KEYS, usageRecordKeys } from './book-script.ts';

/** One booking, named. A count given as null (or absent) is not given. */
export interface Usage {
  readonly account: string;
  readonly keyId: string;
  /** What the booking is idempotent on (metering: keygate's booking id; a usage record: its request id). */
  readonly bookingId: string;
  /** The cost in micro-units (≥ 0). */
  readonly amountMicros: number;
  readonly model: string | null;
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
  readonly cachedInputTokens?: number | null;
  readonly cacheWriteTokens?: number | null;
  readonly reasoningTokens?: number | null;
  /** Absent: a usage record (`record`). */
  readonly source?: 'meter';
  readonly estimated?: boolean;
  readonly unpriced?: boolean;
  /** Why this amount (the log entry's `price`); absent: the entry has none. */
  readonly price?: PriceBasis;
  /** The log's request id label (absent: the booking id). */
  readonly label?: string;
}

export interface BookOptions {
  /** How long a booking id is remembered (a repeat within it changes nothing). */
  readonly idempotencySeconds: number;
  /** Usage-log entries kept per account. */
  readonly logMaxEntries: number;
}

const DEFAULTS: BookOptions = { idempotencySeconds: MONEY_DEFAULTS.usageIdempotencySeconds, logMaxEntries: MONEY_DEFAULTS.usageLogMaxEntries };

/** The first booking under a booking id, as `usagereq` keeps it (null: not given, or booked before it was kept). */
export interface FirstBooking {
  readonly keyId: string;
  readonly amountMicros: number;
  readonly model: string | null;
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
}

/**
 * What the script answered for one booking. `duplicate`: the booking id was booked before, nothing
 * changed (`same`: with the same key, amount, model and counts, a plain retry). `floor`, `total`,
 * `tokens`: refused by a bound (the wallet's floor, the key's total spend, a token total), nothing
 * written. `unexpected`: an answer the script never gives.
 */
export type BookReply =
  | { readonly outcome: 'booked'; readonly balanceMicros: number | null }
  | { readonly outcome: 'duplicate'; readonly first: FirstBooking; readonly same: boolean }
  | { readonly outcome: 'floor'; readonly balanceMicros: number }
  | { readonly outcome: 'total'; readonly totalMicros: number }
  | { readonly outcome: 'tokens'; readonly over: string }
  | { readonly outcome: 'unexpected' };

const count = (n: number | null | undefined) => (n === null || n === undefined ? '' : String(n));

/** The ARGV of RECORD_USAGE for one booking, in the order the script reads them (./book-script.ts). */
export function usageRecordArgs(u: Usage, o: BookOptions): string[] {
  return [
    u.keyId,
    String(u.amountMicros),
    u.bookingId,
    String(o.idempotencySeconds),
    String(o.logMaxEntries),
    String(MAX_BALANCE_MICROS),
    u.model ?? '',
    count(u.inputTokens),
    count(u.outputTokens),
    u.account, // 10: events
    count(u.cachedInputTokens),
    count(u.cacheWriteTokens),
    count(u.reasoningTokens),
    u.source ?? '',
    u.estimated ? '1' : '',
    u.unpriced ? '1' : '',
    u.price === undefined ? '' : JSON.stringify(u.price), // 17: why this price
    u.label ?? '', // 18: the label
  ];
}

/** Reads RECORD_USAGE's reply to the booking `u`. */
export function readBooking(r: unknown, u: Usage): BookReply {
  if (!Array.isArray(r)) return { outcome: 'unexpected' };
  switch (r[0]) {
    case 'OK':
      return { outcome: 'booked', balanceMicros: r[1] === '' ? null : Number(r[1]) };
    case 'DUP': {
      // "keyId:amount:input:output:model" (the model may hold ':'); "keyId:amount" when booked before counts and model were kept
      const first = String(r[1]);
      const [firstKey = '', firstAmount, firstIn, firstOut, ...modelParts] = first.split(':');
      const countOf = (v: string | undefined) => (v === undefined || v === '' ? null : Number(v));
      const firstModel = modelParts.join(':');
      const booked: FirstBooking = {
        keyId: firstKey,
        amountMicros: Number(firstAmount),
        model: firstModel === '' ? null : firstModel,
        inputTokens: countOf(firstIn),
        outputTokens: countOf(firstOut),
      };
      const same = firstIn === undefined ? firstKey === u.keyId && booked.amountMicros === u.amountMicros : first === r[2];
      return { outcome: 'duplicate', first: booked, same };
    }
    case 'FLOOR':
      return { outcome: 'floor', balanceMicros: Number(r[1]) };
    case 'TOTAL':
      return { outcome: 'total', totalMicros: Number(r[1]) };
    case 'TOKENS':
      return { outcome: 'tokens', over: String(r[1]) };
    default:
      return { outcome: 'unexpected' };
  }
}

type WithRecordUsage = { kgRecordUsage(...args: string[]): Promise<unknown> };

/**
 * Books usage on one Redis client (standalone, Sentinel or Cluster): `book` one booking, `bookAll` a
 * batch in one pipeline (Cluster: each booking to its account's node at once). Before a booking of
 * an account it has not listed yet, the account goes into the usage export's and the events' lists
 * of accounts (an account in a list may have no entries yet, never the reverse); after, the accounts
 * whose booking wrote an event (a wallet or limit alert) are put in the webhook worker's due set.
 */
export class UsageBook {
  readonly #redis: RedisClient;
  readonly #s: Schema;
  readonly #o: BookOptions;
  /** Accounts already in the export's and the events' lists (bounded). */
  readonly #listed = new Set<string>();

  constructor(redis: RedisClient, s: Schema, o: BookOptions = DEFAULTS) {
    this.#redis = redis;
    this.#s = s;
    this.#o = o;
    if (!('kgRecordUsage' in redis)) redis.defineCommand('kgRecordUsage', { numberOfKeys: RECORD_USAGE_KEYS, lua: RECORD_USAGE });
  }

  /** Books one usage; rejects when the write's outcome is not known (Redis failed). */
  async book(u: Usage): Promise<BookReply> {
    await this.#list([u]);
    const r = await (this.#redis as RedisClient & WithRecordUsage).kgRecordUsage(...this.#args(u));
    await this.#wake([u], [r]);
    return readBooking(r, u);
  }

  /**
   * Books a batch; one reply per booking in order, null where that booking's write failed (its
   * outcome unknown: the script is idempotent, so it may be booked again). Rejects when nothing is
   * known (the pipeline discarded, the connection lost).
   */
  async bookAll(batch: readonly Usage[]): Promise<(BookReply | null)[]> {
    await this.#list(batch);
    const redis = this.#redis;
    if (redis instanceof Cluster) {
      const c = redis as Cluster & WithRecordUsage;
      const settled = await Promise.allSettled(batch.map((u) => c.kgRecordUsage(...this.#args(u))));
      const replies = settled.map((r) => (r.status === 'fulfilled' ? r.value : null));
      await this.#wake(batch, replies);
      return settled.map((r, i) => (r.status === 'fulfilled' ? readBooking(r.value, batch[i]!) : null));
    }
    const pipe = (redis as Redis).pipeline() as ReturnType<Redis['pipeline']> & WithRecordUsage;
    for (const u of batch) pipe.kgRecordUsage(...this.#args(u));
    const results = await pipe.exec();
    if (results === null) throw new Error('pipeline discarded');
    await this.#wake(batch, results.map(([err, v]) => (err !== null ? null : v)));
    return results.map(([err, v], i) => (err !== null ? null : readBooking(v, batch[i]!)));
  }

  #args(u: Usage): string[] {
    return [...usageRecordKeys(this.#s, u.account, u.keyId, u.bookingId), ...usageRecordArgs(u, this.#o)];
  }

  /** The export's and the events' lists of accounts, written first: listed never lags an entry. */
  async #list(batch: readonly Usage[]): Promise<void> {
    const fresh = [...new Set(batch.map((u) => u.account))].filter((a) => !this.#listed.has(a));
    if (fresh.length === 0) return;
    await this.#redis.sadd(this.#s.usageAccounts(), ...fresh);
    await this.#redis.sadd(eventsSchema(this.#s.ns).accounts(), ...fresh);
    if (this.#listed.size + fresh.length > 10_000) this.#listed.clear();
    for (const a of fresh) this.#listed.add(a);
  }

  /** Wakes the webhook worker for the accounts whose booking wrote an event. */
  #wake(batch: readonly Usage[], replies: readonly unknown[]): Promise<void> {
    return wakeAccounts(this.#redis, this.#s.ns, [...new Set(batch.filter((_, i) => eventsWritten(replies[i], RECORD_USAGE_EVENTS_AT) > 0).map((u) => u.account))]);
  }
}
