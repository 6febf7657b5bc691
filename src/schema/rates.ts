/**
 * The rate side of the Redis schema (docs/rate-limits.md): request and token rates on keys and
 * accounts, their text and record forms, the window counters shared by every sidecar, and the gate
 * fields that block a key or an account whose token rate is used up.
 *
 *   key record  `{ns}:v1:key:{digest}`   fields `rate`, `token_rate` (the sidecar reads them with the record)
 *   account     `{ns}:v1:acct:{acct}`     fields `rate`, `token_rate` (read with the account's status)
 *   {ns}:v1:rate:{<acct>}:{keyId}   HASH  the key's request window: `w` start, `c` counted, `h` held by leases
 *   {ns}:v1:rate:{<acct>}           HASH  the account's request window (same fields)
 *   {ns}:v1:tokrate:{<acct>}:{keyId} HASH the key's token rate mirror and window: `limit`, `per`, `w`, `used`
 *   {ns}:v1:tokrate:{<acct>}        HASH  the account's (same fields)
 *   gate `{ns}:v1:gate:{<acct>}`      fields `tokrate:{keyId}` and `tokrate` = epoch ms the block ends
 *
 * Every counter carries the account's hash tag, so one script touches one Cluster slot.
 * A rate's record form is `N/U` (`5/s`, `100000/m`), the same text as the CLI's `--rate N/UNIT`.
 */
import { KEY_ID_PATTERN, SCHEMA_VERSION, type Schema } from './redis-schema.ts';
import { encodeRateFields, parseRateFields, RATE_FIELDS, RateField } from './rate-fields.ts';
import { NO_RATES, NO_TOKEN_BLOCKS, UNIT_MS, type Rates, type TokenBlocks } from '../core/rate.ts';
import { formatRate, MAX_RATE_REQUESTS, MAX_RATE_TOKENS, maxRateOf, parseRateText, RATE_UNITS, UNIT_LETTER, type Rate, type RateKind, type RateUnit } from '../core/rate-text.ts';

// The text form of a rate is shared with the web page (src/core/rate-text.ts, no zod there).
export { formatRate, MAX_RATE_REQUESTS, MAX_RATE_TOKENS, parseRateText, RATE_UNITS, UNIT_LETTER, type Rate, type RateKind, type RateUnit };
// The pure rate rules (window lengths, the cached rates and token blocks) live in the floor (src/core/rate.ts).
export { NO_RATES, NO_TOKEN_BLOCKS, UNIT_MS, type Rates, type TokenBlocks };
// The two rate fields of a key or account record and their codec (src/schema/rate-fields.ts; the key record's decoder reads them too).
export { encodeRateFields, parseRateFields, RATE_FIELDS, RateField };

/** The API form: `{requests, per}` / `{tokens, per}`. */
export interface ApiRequestRate {
  readonly requests: number;
  readonly per: RateUnit;
}
export interface ApiTokenRate {
  readonly tokens: number;
  readonly per: RateUnit;
}

/** Validates an API value (`null` removes); an error naming the problem otherwise. */
export function rateFromApi(v: unknown, kind: RateKind): Rate | null | { readonly error: string } {
  if (v === null) return null;
  const field = kind === 'requests' ? 'requests' : 'tokens';
  const name = kind === 'requests' ? 'rate' : 'token_rate';
  if (typeof v !== 'object' || Array.isArray(v)) return { error: `${name} must be {${field}, per} or null` };
  const o = v as Record<string, unknown>;
  const extra = Object.keys(o).filter((k) => k !== field && k !== 'per');
  if (extra.length > 0) return { error: `${name} has unknown field ${JSON.stringify(extra[0]!.slice(0, 40))}` };
  const n = o[field];
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > maxRateOf(kind)) {
    return { error: `${name}.${field} must be an integer from 1 to ${maxRateOf(kind)}` };
  }
  if (typeof o.per !== 'string' || !(RATE_UNITS as readonly string[]).includes(o.per)) {
    return { error: `${name}.per must be one of ${RATE_UNITS.join(', ')}` };
  }
  return { count: n, per: o.per as RateUnit };
}

export function requestRateToApi(r: Rate | null): ApiRequestRate | null {
  return r === null ? null : { requests: r.count, per: r.per };
}
export function tokenRateToApi(r: Rate | null): ApiTokenRate | null {
  return r === null ? null : { tokens: r.count, per: r.per };
}

/** Whether a key's rate stays within its account's (an owner sets its keys' rates within the account's). */
export function withinRate(inner: Rate, outer: Rate): boolean {
  // Compare per millisecond without fractions: inner/innerMs ≤ outer/outerMs.
  return inner.count * UNIT_MS[outer.per] <= outer.count * UNIT_MS[inner.per];
}

// ── Redis keys ─────────────────────────────────────────────────────────────────────────────

/** Names of the rate records of one account (all with the `{acct}` hash tag). */
export interface RateKeys {
  /** The request window of a key (`keyId`) or of the account (no `keyId`). */
  requests(accountId: string, keyId?: string): string;
  /** The token window and rate mirror of a key or of the account. */
  tokens(accountId: string, keyId?: string): string;
}

export function rateKeys(s: Schema): RateKeys {
  const base = `${s.ns}:v${SCHEMA_VERSION}:`;
  return {
    requests: (a, keyId) => (keyId === undefined ? `${base}rate:{${a}}` : `${base}rate:{${a}}:${keyId}`),
    tokens: (a, keyId) => (keyId === undefined ? `${base}tokrate:{${a}}` : `${base}tokrate:{${a}}:${keyId}`),
  };
}

/** Fields of a request window record. */
export const RequestWindowField = { start: 'w', counted: 'c', held: 'h' } as const;
/** Fields of a token window record. */
export const TokenWindowField = { limit: 'limit', per: 'per', start: 'w', used: 'used' } as const;

// ── Token blocks in the gate record ────────────────────────────────────────────────────────

/** Gate fields: `tokrate:{keyId}` (a key's token rate used up) and `tokrate` (the account's) = epoch ms the block ends. */
export const TokenGateField = { keyPrefix: 'tokrate:', account: 'tokrate' } as const;

/** Reads the token blocks of an HGETALL of the gate record; a string naming the problem when one does not follow the schema. */
export function parseTokenBlocks(hash: Record<string, string>): TokenBlocks | string {
  let account: number | null = null;
  let keys: Map<string, number> | null = null;
  for (const [field, value] of Object.entries(hash)) {
    if (field !== TokenGateField.account && !field.startsWith(TokenGateField.keyPrefix)) continue;
    if (!/^\d{1,16}$/.test(value)) return `${field}: not epoch ms`;
    if (field === TokenGateField.account) {
      account = Number(value);
      continue;
    }
    const keyId = field.slice(TokenGateField.keyPrefix.length);
    if (!KEY_ID_PATTERN.test(keyId)) return `${field}: not a key id`;
    (keys ??= new Map()).set(keyId, Number(value));
  }
  return account === null && keys === null ? NO_TOKEN_BLOCKS : { account, keys };
}
