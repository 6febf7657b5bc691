/**
 * The money operations of the console library: credit a wallet, record usage, set a key's spend
 * limit, read an account's wallet and a key's usage, export the usage log. Each write is one atomic
 * script over records of one account (`src/schema/money-scripts.ts`; a usage record is the ledger's
 * booking write, `src/ledger/book.ts`, the one the sidecar's metering calls too), so it is atomic on
 * standalone Redis, Sentinel and Cluster alike. Every input is validated before the first write.
 */
import { recordedBasis } from '../prices/basis.ts';
import { Cluster } from 'ioredis';
import * as lua from '../schema/money-scripts.ts';
import {
  amountMicrosOf,
  LIMIT_PERIODS,
  MAX_AMOUNT_MICROS,
  MAX_BALANCE_MICROS,
  MAX_TOKEN_COUNT,
  MAX_TOKEN_TOTAL,
  parseKeySpend,
  parseKeyUse,
  parseTokenCounters,
  type TokenTotals,
  parseUsageEntry,
  BOOK_ID_PATTERN,
  BOOK_ID_RULE,
  spendIn,
  WalletField,
  GateField,
  type KeyLimit,
  type KeySpend,
  type KeyUse,
  type LimitPeriod,
  type UsageEntry,
} from '../schema/money.ts';
import { KeyField, type KeyRecord, type Schema } from '../schema/redis-schema.ts';
import type { RedisClient } from '../store/redis.ts';
import { agreement, liveSidecars, type LiveSidecars } from '../store/sidecar-settings.ts';
import { ConsoleError } from './errors.ts';
import { eventKeysFor, eventsWritten, wakeAccounts } from '../events/publish.ts'; // events: wallet.credited, wallet.low/empty
import { UsageBook, type FirstBooking } from '../ledger/book.ts';
import { bad, shown, validateAccountId, validateKeyId } from './validate.ts';

export interface MoneyOptions {
  readonly requireWallet: boolean;
  readonly usageIdempotencySeconds: number;
  readonly usageLogMaxEntries: number;
}

export interface UsageInput {
  readonly keyId: string;
  /** Cost of the request in micro-units: a positive integer (number or decimal-digit string). */
  readonly amountMicros: number | string;
  /** The router's request id; a second record with the same id (for the same account) changes nothing. */
  readonly requestId: string;
  readonly model?: string | null;
  readonly inputTokens?: number | null;
  readonly outputTokens?: number | null;
}

export interface UsageResult {
  /** False when the request id was already recorded: nothing changed. */
  readonly booked: boolean;
  readonly keyId: string;
  readonly account: string;
  readonly requestId: string;
  readonly amountMicros: number;
  /** The wallet's balance after the record; null when the account has no wallet (or on a duplicate). */
  readonly balanceMicros: number | null;
}

export interface CreditResult {
  readonly account: string;
  readonly reference: string;
  readonly amountMicros: number;
  /** False when the reference was already credited: nothing changed (amountMicros is the first credit's). */
  readonly credited: boolean;
  readonly balanceMicros: number;
}

/**
 * Why `enforced` says what it says (docs/decisions.md, "Who says a wallet is enforced"):
 * `credited`: the account has a wallet, which every sidecar enforces; without one, what the live
 * sidecars publish of their `KEYGATE_REQUIRE_WALLET`: `required` (all refuse), `not-required`
 * (none does), `mixed` (some do: a request may be refused or not depending on the sidecar), or
 * `unreported` (no live sidecar published one: the console's own setting is the answer).
 */
export type WalletRule = 'credited' | 'required' | 'not-required' | 'mixed' | 'unreported';
export const WALLET_RULES: readonly WalletRule[] = ['credited', 'required', 'not-required', 'mixed', 'unreported'];

export interface AccountWallet {
  /** A request of the account can be refused (402) at a balance of zero or below: see `rule`. */
  readonly enforced: boolean;
  readonly balance_micros: number;
  readonly rule: WalletRule;
}

/** Usage of one key as the console shows it. */
export interface KeyUsage {
  readonly lastUsedAt: number | null;
  readonly requests: { readonly today: number; readonly month: number };
  /** Requests refused by why (all time): `endpoint`, the endpoint rule (docs/endpoints.md). */
  readonly refused: { readonly endpoint: number };
  /** Spend in the limit's current period (this month's when the key has no limit), and all time. */
  readonly spend: { readonly period: LimitPeriod; readonly periodMicros: number; readonly totalMicros: number };
  readonly limit: KeyLimit | null;
  /** Booked tokens today and this month (UTC), from the key's token counters (metered bookings and usage records with counts). */
  readonly tokens: TokenTotals;
}

/** The record booked first under a request id, as a repeat with another body is answered (null: not given, or booked before the record was kept whole). */
export interface BookedUsage extends FirstBooking {
  readonly account: string;
  readonly requestId: string;
}

/** A usage record that repeats a booked request id with another key, amount, model or token counts: carries the booked record. */
export class UsageConflict extends ConsoleError {
  readonly booked: BookedUsage;
  constructor(message: string, booked: UsageConflict['booked']) {
    super('CONFLICT', message);
    this.booked = booked;
  }
}

export function validateAmountMicros(v: unknown, what = 'amount'): number {
  const n = amountMicrosOf(v);
  if (n === null) throw bad(`${what} must be a positive integer number of micro-units, at most ${MAX_AMOUNT_MICROS}`);
  return n;
}

export function validateLimit(limit: unknown): KeyLimit {
  if (typeof limit !== 'object' || limit === null) throw bad('limit must be {amountMicros, period}');
  const l = limit as { amountMicros?: unknown; period?: unknown };
  const amountMicros = validateAmountMicros(l.amountMicros, 'limit amount');
  if (typeof l.period !== 'string' || !(LIMIT_PERIODS as readonly string[]).includes(l.period)) {
    throw bad(`limit period must be one of ${LIMIT_PERIODS.join(', ')}`);
  }
  return { amountMicros, period: l.period as LimitPeriod };
}

const MODEL_TEXT = /^[A-Za-z0-9._:@/+=,~-]{1,256}$/;

function optionalCount(v: unknown, what: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || v > MAX_TOKEN_COUNT) throw bad(`${what} must be a non-negative integer, at most ${MAX_TOKEN_COUNT}`);
  return v;
}

export class WalletOps {
  readonly #redis: RedisClient;
  readonly #s: Schema;
  readonly #o: MoneyOptions;
  /** The booking write (src/ledger/book.ts), shared with the sidecar's metering. */
  readonly #book: UsageBook;
  /** Key id → account: never changes once the key exists, so it is remembered (bounded). */
  readonly #accountOf = new Map<string, string>();

  constructor(redis: RedisClient, s: Schema, o: MoneyOptions) {
    this.#redis = redis;
    this.#s = s;
    this.#o = o;
    this.#book = new UsageBook(redis, s, { idempotencySeconds: o.usageIdempotencySeconds, logMaxEntries: o.usageLogMaxEntries });
  }

  /** Adds to an account's wallet (creating it: from now on the wallet is enforced). Idempotent on `reference`. */
  async credit(account: string, amountMicros: unknown, reference: unknown): Promise<CreditResult> {
    validateAccountId(account);
    const amount = validateAmountMicros(amountMicros);
    if (typeof reference !== 'string' || !BOOK_ID_PATTERN.test(reference)) {
      throw bad(`a credit needs a reference: ${BOOK_ID_RULE}${typeof reference === 'string' && reference !== '' ? `, not ${shown(reference)}` : ''}`);
    }
    const s = this.#s;
    const ev = await eventKeysFor(this.#redis, s.ns, account); // events
    const r = (await this.#redis.eval(lua.CREDIT, 5, s.wallet(account), s.credits(account), s.gate(account), ...ev, String(amount), reference, String(MAX_BALANCE_MICROS), account)) as string[];
    if (eventsWritten(r, lua.CREDIT_EVENTS_AT) > 0) await wakeAccounts(this.#redis, s.ns, [account]); // events
    switch (r[0]) {
      case 'OK':
        return { account, reference, amountMicros: amount, credited: true, balanceMicros: Number(r[1]) };
      case 'DUP':
        return { account, reference, amountMicros: Number(String(r[2]).split(':')[0]), credited: false, balanceMicros: Number(r[1]) };
      case 'OVERFLOW':
        throw new ConsoleError('RANGE', `the credit would take the balance above ${MAX_BALANCE_MICROS} micro-units (balance ${r[1]}); nothing was changed`);
      default:
        throw new ConsoleError('CORRUPT', `account ${account}: unexpected answer from the credit script`);
    }
  }

  /**
   * Books one request's cost: debits the wallet (if the account has one), adds to the key's spend in
   * its periods, appends to the usage log. Idempotent on the request id. A revoked key is still booked.
   */
  async recordUsage(input: UsageInput): Promise<UsageResult> {
    if (typeof input !== 'object' || input === null) throw bad('usage must be an object');
    const keyId = validateKeyId(input.keyId);
    const amount = validateAmountMicros(input.amountMicros);
    if (typeof input.requestId !== 'string' || !BOOK_ID_PATTERN.test(input.requestId)) {
      throw bad(`a usage record needs a request id: ${BOOK_ID_RULE}`);
    }
    const model = input.model ?? '';
    if (model !== '' && (typeof model !== 'string' || !MODEL_TEXT.test(model))) throw bad('model must be 1-256 of [A-Za-z0-9._:@/+=,~-]');
    const inTok = optionalCount(input.inputTokens, 'input tokens');
    const outTok = optionalCount(input.outputTokens, 'output tokens');
    const account = await this.accountOfKey(keyId);
    const r = await this.#book.book({
      account,
      keyId,
      bookingId: input.requestId,
      amountMicros: amount,
      model: model === '' ? null : model,
      inputTokens: inTok,
      outputTokens: outTok,
      price: recordedBasis(model === '' ? null : model, amount),
    });
    switch (r.outcome) {
      case 'booked':
        return { booked: true, keyId, account, requestId: input.requestId, amountMicros: amount, balanceMicros: r.balanceMicros };
      case 'duplicate':
        if (!r.same) throw new UsageConflict(`request id ${shown(input.requestId)} was already booked with another key, amount, model or token counts; nothing was changed`, {
            keyId: r.first.keyId,
            account,
            requestId: input.requestId,
            amountMicros: r.first.amountMicros,
            model: r.first.model,
            inputTokens: r.first.inputTokens,
            outputTokens: r.first.outputTokens,
          });
        return { booked: false, keyId, account, requestId: input.requestId, amountMicros: amount, balanceMicros: null };
      case 'floor':
        throw new ConsoleError('RANGE', `the record would take the balance below -${MAX_BALANCE_MICROS} micro-units (balance ${r.balanceMicros}); nothing was changed`);
      case 'total':
        throw new ConsoleError('RANGE', `the record would take key ${keyId}'s total spend above ${MAX_BALANCE_MICROS} micro-units (total ${r.totalMicros}); nothing was changed`);
      case 'tokens':
        throw new ConsoleError('RANGE', `the record's tokens would take ${tokenTotalNamed(r.over, keyId)} above ${MAX_TOKEN_TOTAL} (input plus output); nothing was changed`);
      default:
        throw new ConsoleError('CORRUPT', `key ${keyId}: unexpected answer from the usage script`);
    }
  }

  /** Sets (or with null removes) a key's spend limit; the block is re-evaluated at once. */
  async setLimit(account: string, keyId: string, limit: KeyLimit | null): Promise<void> {
    const s = this.#s;
    await this.#redis.eval(
      lua.SET_LIMIT,
      2,
      s.keySpend(account, keyId),
      s.gate(account),
      keyId,
      limit === null ? '' : String(limit.amountMicros),
      limit === null ? '' : limit.period,
    );
  }

  /** Removes the spend record (and its gate entry) of a key id that never became a key (a create that collided, a lost roll). */
  async dropSpend(account: string, keyId: string): Promise<void> {
    await this.#redis.del(this.#s.keySpend(account, keyId));
    await this.#redis.hdel(this.#s.gate(account), `${GateField.limitPrefix}${keyId}`);
  }

  /** A roll's new key starts with the old key's spend record (periods, total, limit); its block is set at once. */
  async copySpend(account: string, fromKeyId: string, toKeyId: string): Promise<void> {
    const s = this.#s;
    await this.#redis.eval(lua.COPY_SPEND, 3, s.keySpend(account, fromKeyId), s.keySpend(account, toKeyId), s.gate(account), toKeyId);
  }

  /** The account's wallet; without one, what the live sidecars (read here unless given) do about it. */
  async wallet(account: string, live?: LiveSidecars): Promise<AccountWallet> {
    validateAccountId(account);
    const bal = await this.#redis.hget(this.#s.wallet(account), WalletField.balance);
    if (bal !== null && !/^-?\d{1,17}$/.test(bal)) throw new ConsoleError('CORRUPT', `account ${account}: wallet balance is not an integer`);
    if (bal !== null) return { enforced: true, balance_micros: Number(bal), rule: 'credited' };
    const a = agreement((live ?? (await liveSidecars(this.#redis, this.#s.sidecars()))).requireWallet);
    const rule: WalletRule = a.kind !== 'all' ? a.kind : a.value ? 'required' : 'not-required';
    return { enforced: rule === 'unreported' ? this.#o.requireWallet : rule !== 'not-required', balance_micros: 0, rule };
  }

  /** Usage of keys (one account or several), read in one round of parallel reads. */
  async usage(records: readonly KeyRecord[]): Promise<KeyUsage[]> {
    if (records.length === 0) return [];
    const s = this.#s;
    const now = await this.#serverNow();
    const [spends, uses, tokens] = await Promise.all([
      Promise.all(records.map((r) => this.#redis.hgetall(s.keySpend(r.account, r.id)))),
      Promise.all(records.map((r) => this.#redis.hgetall(s.keyUse(r.account, r.id)))),
      Promise.all(records.map((r) => this.#redis.hgetall(s.tokens(r.account, r.id)))),
    ]);
    return records.map((r, i) => {
      const sp = parseKeySpend(spends[i]!, now);
      if (typeof sp === 'string') throw new ConsoleError('CORRUPT', `key ${r.id}: spend record does not follow the schema (${sp})`);
      return keyUsage(sp, parseKeyUse(uses[i]!, now), parseTokenCounters(tokens[i]!, now));
    });
  }

  /** The account's booked tokens today and this month (UTC). */
  async accountTokens(account: string): Promise<TokenTotals> {
    const [hash, now] = await Promise.all([this.#redis.hgetall(this.#s.tokens(validateAccountId(account))), this.#serverNow()]);
    return parseTokenCounters(hash, now);
  }

  /** The account of a key id (never changes); NOT_FOUND for an unknown id. */
  async accountOfKey(keyId: string): Promise<string> {
    const known = this.#accountOf.get(keyId);
    if (known !== undefined) return known;
    const digest = await this.#redis.get(this.#s.keyIdIndex(keyId));
    const account = digest === null ? null : await this.#redis.hget(this.#s.keyRecord(digest), KeyField.account);
    if (account === null) throw new ConsoleError('NOT_FOUND', `no key with id ${keyId}`);
    if (this.#accountOf.size >= 10_000) this.#accountOf.clear();
    this.#accountOf.set(keyId, account);
    return account;
  }

  /**
   * The usage log from `sinceMs` (inclusive) to `untilMs` (exclusive), oldest first, merged over the
   * accounts (all of them, or the one given). Pages through Redis; memory stays at one page per account.
   */
  async *exportUsage(o: { sinceMs: number; untilMs?: number; account?: string; pageSize?: number }): AsyncGenerator<UsageEntry> {
    const page = o.pageSize ?? 500;
    const end = o.untilMs === undefined ? '+' : `(${o.untilMs}-0`;
    const accounts = o.account !== undefined ? [validateAccountId(o.account)] : (await this.#redis.smembers(this.#s.usageAccounts())).sort();
    interface Cursor {
      account: string;
      buf: UsageEntry[];
      next: string | null;
    }
    const fill = async (c: Cursor) => {
      if (c.buf.length > 0 || c.next === null) return;
      const rows = (await this.#redis.xrange(this.#s.usageLog(c.account), c.next, end, 'COUNT', page)) as [string, string[]][];
      c.buf = rows.map(([id, flat]) => parseUsageEntry(c.account, id, flat));
      c.next = rows.length < page ? null : `(${rows[rows.length - 1]![0]}`;
    };
    const cursors: Cursor[] = accounts.map((account) => ({ account, buf: [], next: `${Math.max(0, Math.floor(o.sinceMs))}-0` }));
    for (;;) {
      await Promise.all(cursors.map(fill));
      let best: Cursor | null = null;
      for (const c of cursors) {
        const head = c.buf[0];
        if (head === undefined) continue;
        if (best === null || compareIds(head.id, best.buf[0]!.id) < 0) best = c;
      }
      if (best === null) return;
      yield best.buf.shift()!;
    }
  }

  async #serverNow(): Promise<number> {
    const redis = this.#redis;
    const [sec, micro] = redis instanceof Cluster ? await redis.nodes('master')[0]!.time() : await redis.time();
    return Number(sec) * 1000 + Math.floor(Number(micro) / 1000);
  }
}

/** RECORD_USAGE's TOKENS answer ("key month 123", "account window 5", "count") in words. */
function tokenTotalNamed(answer: string, keyId: string): string {
  const [whose, period, total] = answer.split(' ');
  if (period === undefined) return `a count above ${MAX_TOKEN_COUNT}`;
  const owner = whose === 'key' ? `key ${keyId}'s` : "the account's";
  const what = period === 'window' ? 'token-rate window' : period === 'day' ? 'tokens today' : 'tokens this month';
  return `${owner} ${what} (now ${total})`;
}

function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am - bm || as - bs;
}

export function keyUsage(sp: KeySpend, use: KeyUse, tokens: TokenTotals = NO_TOKENS): KeyUsage {
  const period: LimitPeriod = sp.limit?.period ?? 'month';
  return {
    lastUsedAt: use.lastUsedAt,
    requests: { today: use.today, month: use.month },
    refused: { endpoint: use.refusedEndpoint },
    spend: { period, periodMicros: spendIn(sp, period), totalMicros: sp.total },
    limit: sp.limit,
    tokens,
  };
}

/** No tokens booked. */
export const NO_TOKENS: TokenTotals = { today: { input: 0, output: 0 }, month: { input: 0, output: 0 } };
