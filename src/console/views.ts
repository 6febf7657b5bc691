/**
 * The JSON forms of the console's resources (snake_case, ISO-8601 times, money in `…_micros`), as the
 * CLI's `--json` prints them and a management API serves them. Never key material.
 */
import type { PriceBasis } from '../prices/basis.ts';
import type { LimitPeriod, TokenTotals, UsageEntry } from '../schema/money.ts';
import type { KeyRecord } from '../schema/redis-schema.ts';
import { requestRateToApi, tokenRateToApi, type ApiRequestRate, type ApiTokenRate, type Rates } from '../schema/rates.ts';
import type { AccountInfo } from './accounts.ts';
import type { CredentialInfo } from './credentials.ts';
import type { Family } from '../core/families/index.ts';
import type { KeyView } from './keys.ts';
import type { RatesUse } from './rates.ts';
import type { CreditResult, UsageResult, WalletRule } from './wallet.ts';
import type { BareModels } from '../store/sidecar-settings.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export type KeyRecordJson = {
  id: string;
  account: string;
  name: string;
  status: KeyRecord['status'];
  hint: string;
  models: string[] | null;
  expires_at: string | null;
  created_at: string;
  updated_at: string;
  revoked_at: string | null;
};

export type KeyJson = KeyRecordJson & {
  limit: { amount_micros: number; period: LimitPeriod } | null;
  last_used_at: string | null;
  requests: { today: number; month: number };
  refused: { endpoint: number };
  spend: { period: LimitPeriod; period_micros: number; total_micros: number };
  tokens: TokensJson;
  rate: ApiRequestRate | null;
  token_rate: ApiTokenRate | null;
  rate_use: RateUseJson;
};

/** The current window's use of a key's rates (null: no such rate); `held`: units of `used` in leases sidecars still hold. */
export type RateUseJson = {
  requests: { used: number; held: number; resets_at: string } | null;
  tokens: { used: number; resets_at: string } | null;
};

/** `rate`, `token_rate` in the API form (`{requests, per}`, `{tokens, per}`; null = none). */
export function ratesJson(r: Rates): { rate: ApiRequestRate | null; token_rate: ApiTokenRate | null } {
  return { rate: requestRateToApi(r.requests), token_rate: tokenRateToApi(r.tokens) };
}

export function rateUseJson(u: RatesUse): RateUseJson {
  const r = u.requests;
  const t = u.tokens;
  return {
    requests: r === null ? null : { used: r.used, held: r.held, resets_at: r.resetsAt },
    tokens: t === null ? null : { used: t.used, resets_at: t.resetsAt },
  };
}

/** Booked tokens today and this month (UTC). */
export type TokensJson = { today: { input: number; output: number }; month: { input: number; output: number } };
const tokensJson = (t: TokenTotals): TokensJson => ({ today: { ...t.today }, month: { ...t.month } });

/** A key record without its usage. */
export function keyRecordJson(r: KeyRecord): KeyRecordJson {
  return {
    id: r.id,
    account: r.account,
    name: r.name,
    status: r.status,
    hint: r.hint,
    models: r.models === null ? null : [...r.models],
    expires_at: iso(r.expiresAt),
    created_at: iso(r.createdAt)!,
    updated_at: iso(r.updatedAt)!,
    revoked_at: iso(r.revokedAt),
  };
}

/** A key with its limit, last use, request counts and spend. */
export function keyJson(v: KeyView): KeyJson {
  const u = v.usage;
  return {
    ...keyRecordJson(v),
    limit: u.limit === null ? null : { amount_micros: u.limit.amountMicros, period: u.limit.period },
    last_used_at: iso(u.lastUsedAt),
    requests: { today: u.requests.today, month: u.requests.month },
    refused: { endpoint: u.refused.endpoint },
    spend: { period: u.spend.period, period_micros: u.spend.periodMicros, total_micros: u.spend.totalMicros },
    tokens: tokensJson(u.tokens),
    ...ratesJson(v.rates),
    rate_use: rateUseJson(v.rateUse),
  };
}

export function accountJson(a: AccountInfo): {
  id: string;
  status: AccountInfo['status'];
  wallet: { enforced: boolean; balance_micros: number; rule: WalletRule };
  rate: ApiRequestRate | null;
  token_rate: ApiTokenRate | null;
  rate_use: RateUseJson;
  tokens: TokensJson;
  bare_models: BareModels;
  billing: AccountInfo['billing'];
} {
  return {
    id: a.id,
    status: a.status,
    wallet: { enforced: a.wallet.enforced, balance_micros: a.wallet.balance_micros, rule: a.wallet.rule },
    ...ratesJson(a.rates),
    rate_use: rateUseJson(a.rateUse),
    tokens: tokensJson(a.tokens),
    bare_models: a.bareModels,
    billing: a.billing,
  };
}

/** A credit's answer; `credited: false` = the reference was already credited and nothing changed. */
export function creditJson(r: CreditResult): { account: string; reference: string; amount_micros: number; credited: boolean; balance_micros: number } {
  return { account: r.account, reference: r.reference, amount_micros: r.amountMicros, credited: r.credited, balance_micros: r.balanceMicros };
}

/** A usage record's answer; `booked: false` = the request id was already recorded and nothing changed. */
export function usageJson(r: UsageResult): { booked: boolean; key_id: string; account: string; request_id: string; amount_micros: number; balance_micros: number | null } {
  return { booked: r.booked, key_id: r.keyId, account: r.account, request_id: r.requestId, amount_micros: r.amountMicros, balance_micros: r.balanceMicros };
}

/** One entry of the usage log (the lines of `usage export`). */
export function usageEntryJson(e: UsageEntry): {
  id: string;
  time: string;
  account: string;
  key_id: string;
  request_id: string;
  booking_id: string;
  amount_micros: number;
  model: string | null;
  input_tokens: number | null;
  output_tokens: number | null;
  cached_input_tokens?: number;
  cache_write_tokens?: number;
  reasoning_tokens?: number;
  source: 'meter' | 'record';
  estimated: boolean;
  unpriced: boolean;
  price?: PriceBasis;
} {
  return {
    id: e.id,
    time: new Date(e.time).toISOString(),
    account: e.account,
    key_id: e.keyId,
    request_id: e.requestId,
    booking_id: e.bookingId,
    amount_micros: e.amountMicros,
    model: e.model,
    input_tokens: e.inputTokens,
    output_tokens: e.outputTokens,
    // The counts a metered booking carries, when the entry has them.
    ...(e.cachedInputTokens !== null ? { cached_input_tokens: e.cachedInputTokens } : {}),
    ...(e.cacheWriteTokens !== null ? { cache_write_tokens: e.cacheWriteTokens } : {}),
    ...(e.reasoningTokens !== null ? { reasoning_tokens: e.reasoningTokens } : {}),
    // How the entry came: read from a response by metering or recorded through the API/CLI; a
    // count estimated (usage not reported, e.g. a stream cut short); no price matched (booked at 0).
    source: e.source,
    estimated: e.estimated,
    unpriced: e.unpriced,
    // Why this price (docs/metering.md, "Why this price"), when the entry has it.
    ...(e.price !== null ? { price: e.price as unknown as PriceBasis } : {}),
  };
}

/** An account's credential as the API and `credential list --json` show it (never the secret). */
export function credentialJson(c: CredentialInfo): { provider: Family; hint: string; set_at: string } {
  return { provider: c.provider, hint: c.hint, set_at: new Date(c.setAt).toISOString() };
}
