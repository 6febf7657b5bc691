/**
 * Rate settings of keys and accounts on the console side (docs/rate-limits.md): validation, the
 * writes (the `rate`/`token_rate` fields the sidecar reads with the record, and the token-rate mirror
 * through `SET_TOKEN_RATE`, which lifts a block a raised or removed rate no longer justifies), and
 * the current window's use for `keys show`/`list` and the API.
 */
import { windowOf } from '../core/rate.ts';
import { SET_TOKEN_RATE } from '../schema/rate-scripts.ts';
import {
  encodeRateFields,
  formatRate,
  NO_RATES,
  parseRateFields,
  parseRateText,
  rateKeys,
  RateField,
  RequestWindowField,
  TokenGateField,
  TokenWindowField,
  UNIT_LETTER,
  withinRate,
  type Rate,
  type RateKind,
  type Rates,
} from '../schema/rates.ts';
import type { Schema } from '../schema/redis-schema.ts';
import type { RedisClient } from '../store/redis.ts';
import { ConsoleError } from './errors.ts';

/** A change of rates: `undefined` leaves a rate as it is, `null` removes it. */
export interface RatesPatch {
  readonly requests?: Rate | null;
  readonly tokens?: Rate | null;
}

/** Validates a rate given as an object (the library's callers); a ConsoleError naming the problem. */
export function validateRate(r: unknown, kind: RateKind): Rate | null {
  if (r === null) return null;
  const what = kind === 'requests' ? 'rate' : 'token rate';
  if (typeof r !== 'object' || r === null) throw new ConsoleError('INVALID_INPUT', `${what} must be {count, per} or null`);
  const o = r as { count?: unknown; per?: unknown };
  const letter = typeof o.per === 'string' ? (UNIT_LETTER as Record<string, string>)[o.per] : undefined;
  if (letter === undefined || !Object.hasOwn(UNIT_LETTER, o.per as string)) throw new ConsoleError('INVALID_INPUT', `${what} per must be one of second, minute, hour, day`);
  if (typeof o.count !== 'number' || !Number.isSafeInteger(o.count)) throw new ConsoleError('INVALID_INPUT', `${what} must be a positive integer per window`);
  const p = parseRateText(`${o.count}/${letter}`, kind);
  if ('error' in p) throw new ConsoleError('INVALID_INPUT', p.error);
  return p;
}

export function validateRatesPatch(p: RatesPatch | undefined): RatesPatch {
  if (p === undefined) return {};
  return {
    ...(p.requests !== undefined ? { requests: validateRate(p.requests, 'requests') } : {}),
    ...(p.tokens !== undefined ? { tokens: validateRate(p.tokens, 'tokens') } : {}),
  };
}

/** The rate fields of a patch as UPDATE ops (`set field value` / `del field`). */
export function rateOps(p: RatesPatch): string[] {
  const { set, del } = encodeRateFields(p);
  const ops: string[] = [];
  for (let i = 0; i < set.length; i += 2) ops.push('set', set[i]!, set[i + 1]!);
  for (const f of del) ops.push('del', f);
  return ops;
}

/** A rate as the audit log and the JSON views show it (`5/s`), or null. */
export function rateText(r: Rate | null): string | null {
  return r === null ? null : formatRate(r);
}

/** The audit `changes` of a patch. */
export function rateChanges(p: RatesPatch): Record<string, string | null> {
  const c: Record<string, string | null> = {};
  if (p.requests !== undefined) c.rate = rateText(p.requests);
  if (p.tokens !== undefined) c.token_rate = rateText(p.tokens);
  return c;
}

/**
 * The current window's use of one rate. For a request rate `used` is what the window has counted:
 * requests allowed plus units sidecars reserved ahead in leases (docs/rate-limits.md), `held` how
 * many of them are in leases not yet given back — some of those may be unused, so the requests
 * really allowed lie between `used − held` and `used` (exact when `held` is 0: an idle lease goes
 * back after 250 ms, its unused units with it). A token rate has no leases: `used` is exact.
 */
export interface RateUse {
  readonly used: number;
  /** ISO instant the window ends. */
  readonly resetsAt: string;
}

/** A request window's use: leases make part of `used` units reserved ahead, not requests allowed. */
export interface RequestRateUse extends RateUse {
  /** Units of `used` in leases still held by sidecars (at most 5% of the rate). */
  readonly held: number;
}

export interface RatesUse {
  readonly requests: RequestRateUse | null;
  readonly tokens: RateUse | null;
}

export class RateSettings {
  readonly #redis: RedisClient;
  readonly #s: Schema;
  readonly #keys: ReturnType<typeof rateKeys>;

  constructor(redis: RedisClient, s: Schema) {
    this.#redis = redis;
    this.#s = s;
    this.#keys = rateKeys(s);
  }

  /** Mirrors a key's or the account's token rate into its `tokrate` record (SET_TOKEN_RATE), lifting a block it no longer justifies. */
  async setTokenRate(account: string, keyId: string | null, rate: Rate | null): Promise<void> {
    const rec = this.#keys.tokens(account, keyId ?? undefined);
    const field = keyId === null ? TokenGateField.account : `${TokenGateField.keyPrefix}${keyId}`;
    await this.#redis.eval(SET_TOKEN_RATE, 2, rec, this.#s.gate(account), field, rate === null ? '' : String(rate.count), rate === null ? '' : rate.per);
  }

  /** The account's rates (a missing record has none); CORRUPT when a field does not follow the schema. */
  async accountRates(account: string): Promise<Rates> {
    const [rate, tokenRate] = await this.#redis.hmget(this.#s.account(account), RateField.rate, RateField.tokenRate);
    const r = parseRateFields(rate, tokenRate);
    if (typeof r === 'string') throw new ConsoleError('CORRUPT', `account ${account}: ${r}`);
    return r;
  }

  /** Sets the account's rates (HSET/HDEL on its record; the token rate mirrored). Nothing is written for an empty patch. */
  async setAccountRates(account: string, p: RatesPatch): Promise<Rates> {
    const { set, del } = encodeRateFields(p);
    const rec = this.#s.account(account);
    if (p.tokens !== undefined) await this.setTokenRate(account, null, p.tokens);
    if (set.length > 0) await this.#redis.hset(rec, ...set);
    if (del.length > 0) await this.#redis.hdel(rec, ...del);
    return this.accountRates(account);
  }

  /** The current window's use of a key's (or, without `keyId`, the account's) rates. */
  async use(account: string, keyId: string | null, rates: Rates, nowMs = Date.now()): Promise<RatesUse> {
    if (rates === NO_RATES) return { requests: null, tokens: null };
    const [req, tok] = await Promise.all([
      rates.requests
        ? this.#redis.hmget(this.#keys.requests(account, keyId ?? undefined), RequestWindowField.start, RequestWindowField.counted, RequestWindowField.held)
        : null,
      rates.tokens ? this.#redis.hmget(this.#keys.tokens(account, keyId ?? undefined), TokenWindowField.start, TokenWindowField.used) : null,
    ]);
    // v: the window's start, then its counts (used; for requests, held): 0 outside the current window
    const window = (r: Rate, v: (string | null)[]) => {
      const w = windowOf(r.per, nowMs);
      const current = v[0] !== null && Number(v[0]) === w.start;
      const num = (x: string | null | undefined) => {
        const n = current ? Number(x ?? 0) : 0;
        return Number.isSafeInteger(n) && n >= 0 ? n : 0;
      };
      return { used: num(v[1]), held: num(v[2]), resetsAt: new Date(w.end).toISOString() };
    };
    const requests = rates.requests && req ? window(rates.requests, req) : null;
    const tokens = rates.tokens && tok ? window(rates.tokens, tok) : null;
    return {
      requests: requests && { used: requests.used, held: Math.min(requests.used, requests.held), resetsAt: requests.resetsAt },
      tokens: tokens && { used: tokens.used, resetsAt: tokens.resetsAt },
    };
  }

  /** The owner rule: a key's rates fit inside its account's (an account without a rate bounds nothing). */
  async checkWithinAccount(account: string, key: Rates): Promise<void> {
    const a = await this.accountRates(account);
    if (key.requests && a.requests && !withinRate(key.requests, a.requests)) {
      throw new ConsoleError('INVALID_INPUT', `rate ${formatRate(key.requests)} exceeds the account's rate ${formatRate(a.requests)}; an owner sets a key's rate within its account's`);
    }
    if (key.tokens && a.tokens && !withinRate(key.tokens, a.tokens)) {
      throw new ConsoleError('INVALID_INPUT', `token rate ${formatRate(key.tokens)} exceeds the account's token rate ${formatRate(a.tokens)}; an owner sets a key's token rate within its account's`);
    }
  }
}
