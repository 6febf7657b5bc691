/**
 * Rate limits, the pure part (docs/rate-limits.md): fixed UTC windows, the lease pool that bounds
 * what sidecars may hold unused, which rate refuses first, the 429's `retry-after`, its message, the
 * `x-ratelimit-*` headers of an allowed answer and Envoy's `total_limit` metadata. No I/O.
 */
import { formatRate, type Rate, type RateKind, type RateUnit } from './rate-text.ts';

/** Window length per unit (UTC, no leap seconds: every unit divides the epoch evenly). */
export const UNIT_MS: Readonly<Record<RateUnit, number>> = { second: 1_000, minute: 60_000, hour: 3_600_000, day: 86_400_000 };

/** The rates of a key or of an account, as the sidecar caches them with the record. */
export interface Rates {
  readonly requests: Rate | null;
  readonly tokens: Rate | null;
}

export const NO_RATES: Rates = Object.freeze({ requests: null, tokens: null });

/** Token-rate blocks of an account's keys and of the account itself, from the gate record. */
export interface TokenBlocks {
  /** Epoch ms the account's block ends, or null. */
  readonly account: number | null;
  readonly keys: ReadonlyMap<string, number> | null;
}

export const NO_TOKEN_BLOCKS: TokenBlocks = Object.freeze({ account: null, keys: null });

export const RATE_LIMITED_STATUS = 429;

/** One fixed window: `[start, end)` epoch ms, aligned to UTC (a minute starts at second 0). */
export interface Window {
  readonly start: number;
  readonly end: number;
}

export function windowOf(per: RateUnit, nowMs: number): Window {
  const len = UNIT_MS[per];
  const start = Math.floor(nowMs / len) * len;
  return { start, end: start + len };
}

/** Limits below this are exact: every request asks Redis, nothing is held unused. */
export const EXACT_BELOW = 100;
/** The share of a limit that sidecars may hold unused in leases (and so the most a window may refuse below its limit). */
export const POOL_SHARE = 0.05;

/**
 * The lease pool of a limit: how many units all sidecars together may hold reserved and unused in
 * one window. 0 (exact mode) below EXACT_BELOW. Requests are refused only when the window's counted
 * units reach the limit, and counted − allowed ≤ held ≤ pool, so nothing is refused below
 * limit − pool ≥ 95% of the limit, and nothing is ever allowed above the limit.
 */
export function leasePool(limit: number): number {
  return limit < EXACT_BELOW ? 0 : Math.floor(limit * POOL_SHARE);
}

export type RateScope = 'key' | 'account';

/** The order in which used-up rates are named: key requests, key tokens, account requests, account tokens. */
export const REFUSAL_ORDER: ReadonlyArray<readonly [RateScope, RateKind]> = [
  ['key', 'requests'],
  ['key', 'tokens'],
  ['account', 'requests'],
  ['account', 'tokens'],
];

/** A used-up rate: which one, its value, and the instant (epoch ms, this process's clock) a window admits again. */
export interface RateRefusal {
  readonly scope: RateScope;
  readonly kind: RateKind;
  readonly rate: Rate;
  readonly retryAt: number;
}

/**
 * The refusal to answer when the given rates are used up (null when none): named after the first in
 * REFUSAL_ORDER, waiting until the latest `retryAt` among them — the first instant every one of them
 * admits the request again (a key's 2/s and its account's 3/h both used up wait for the hour).
 */
export function firstRefusal(refusals: readonly (RateRefusal | null | undefined)[]): RateRefusal | null {
  let best: RateRefusal | null = null;
  let bestRank = Infinity;
  let latest = -Infinity;
  for (const r of refusals) {
    if (!r) continue;
    if (r.retryAt > latest) latest = r.retryAt;
    const rank = REFUSAL_ORDER.findIndex(([s, k]) => s === r.scope && k === r.kind);
    if (rank < bestRank) {
      best = r;
      bestRank = rank;
    }
  }
  return best === null || best.retryAt === latest ? best : { ...best, retryAt: latest };
}

/**
 * The token-rate refusals a gate's blocks make at `nowMs` (a block lifts by itself at its instant).
 * `rates` are the key's and the account's token rates (for the message); a block without a rate
 * (removed since) still refuses until its instant passes or the console clears it.
 */
export function tokenRefusals(blocks: TokenBlocks, keyId: string, nowMs: number, keyRate: Rate | null, accountRate: Rate | null): RateRefusal[] {
  const out: RateRefusal[] = [];
  const k = blocks.keys?.get(keyId);
  if (k !== undefined && nowMs < k && keyRate !== null) out.push({ scope: 'key', kind: 'tokens', rate: keyRate, retryAt: k });
  const a = blocks.account;
  if (a !== null && nowMs < a && accountRate !== null) out.push({ scope: 'account', kind: 'tokens', rate: accountRate, retryAt: a });
  return out;
}

/** `retry-after` (whole seconds, rounded up, at least 1) and `retry-after-ms` (at least 1) for a wait until `retryAt`. */
export function retryAfter(retryAt: number, nowMs: number): { readonly seconds: number; readonly ms: number } {
  const ms = Math.max(1, Math.ceil(retryAt - nowMs));
  return { seconds: Math.max(1, Math.ceil(ms / 1000)), ms };
}

/** The 429's headers (no `x-should-retry: false`: the SDKs retry after the wait). */
export function retryHeaders(retryAt: number, nowMs: number): Array<[string, string]> {
  const r = retryAfter(retryAt, nowMs);
  return [
    ['retry-after', String(r.seconds)],
    ['retry-after-ms', String(r.ms)],
  ];
}

/** `key request rate 5/s`, `account token rate 100000/m`. */
export function rateName(r: Pick<RateRefusal, 'scope' | 'kind' | 'rate'>): string {
  return `${r.scope} ${r.kind === 'requests' ? 'request' : 'token'} rate ${formatRate(r.rate)}`;
}

/** The 429's message: which rate, its value, and when to retry. */
export function rateMessage(r: RateRefusal, nowMs: number): string {
  const wait = retryAfter(r.retryAt, nowMs).seconds;
  const whose = r.scope === 'key' ? 'this API key' : 'the account that owns this API key';
  return `The ${rateName(r)} of ${whose} is used up for the current window. Retry after ${wait} s, or ask for a higher rate in the console.`;
}

/**
 * A duration in the form the OpenAI API uses in `x-ratelimit-reset-*` (Go's): `20ms`, `1s`, `1.5s`,
 * `6m0s`, `1h0m0s`. Rounded up to the millisecond.
 */
export function formatResetDuration(ms: number): string {
  let n = Math.max(0, Math.ceil(ms));
  if (n < 1000) return `${n}ms`;
  const h = Math.floor(n / 3_600_000);
  n -= h * 3_600_000;
  const m = Math.floor(n / 60_000);
  n -= m * 60_000;
  const s = Math.floor(n / 1000);
  const frac = n % 1000;
  const sec = frac === 0 ? `${s}s` : `${s}.${String(frac).padStart(3, '0').replace(/0+$/, '')}s`;
  if (h > 0) return `${h}h${m}m${sec}`;
  if (m > 0) return `${m}m${sec}`;
  return sec;
}

/** What an allowed answer reports of one rate: its limit, what remains in the window, and when it resets. */
export interface RateView {
  readonly limit: number;
  readonly remaining: number;
  /** Epoch ms (this process's clock) the window ends. */
  readonly resetAt: number;
}

/**
 * `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` for an allowed answer (OpenAI's names);
 * the key's view of each kind is given by the caller (the tighter of key and account).
 */
export function rateLimitHeaders(v: { readonly requests?: RateView | null; readonly tokens?: RateView | null }, nowMs: number): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const kind of ['requests', 'tokens'] as const) {
    const r = v[kind];
    if (!r) continue;
    out.push(
      [`x-ratelimit-limit-${kind}`, String(r.limit)],
      [`x-ratelimit-remaining-${kind}`, String(Math.max(0, Math.min(r.limit, r.remaining)))],
      [`x-ratelimit-reset-${kind}`, formatResetDuration(r.resetAt - nowMs)],
    );
  }
  return out;
}

/** The tighter of two views (the smaller remaining; the key's on a tie). */
export function tighterView(key: RateView | null | undefined, account: RateView | null | undefined): RateView | null {
  if (!key) return account ?? null;
  if (!account) return key;
  return account.remaining < key.remaining ? account : key;
}

export type EnvoyRateUnit = 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY';
const ENVOY_UNIT: Readonly<Record<RateUnit, EnvoyRateUnit>> = { second: 'SECOND', minute: 'MINUTE', hour: 'HOUR', day: 'DAY' };

/** Dynamic metadata for Envoy Gateway's `limit.fromMetadata`: `total_limit: {requests_per_unit, unit}`. */
export function totalLimitMetadata(rate: Rate): { readonly total_limit: { readonly requests_per_unit: number; readonly unit: EnvoyRateUnit } } {
  return { total_limit: { requests_per_unit: rate.count, unit: ENVOY_UNIT[rate.per] } };
}
