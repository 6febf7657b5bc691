/**
 * The money side of the Redis schema (docs/redis-schema.md, "Wallet, spend limits and usage"):
 * field names, amounts, periods, and the decoders of the gate, wallet, spend, counter and usage-log
 * records. The sidecar reads only the gate record; everything else is the console's.
 *
 * Amounts are integer micro-units of the wallet's currency. Redis keeps balances and spend with
 * HINCRBY (64-bit integers); Lua sees them as doubles, exact up to 2^53, so keygate bounds one
 * amount to MAX_AMOUNT_MICROS and a balance to ±MAX_BALANCE_MICROS.
 */
import { z } from 'zod';
import { KEY_ID_PATTERN } from './redis-schema.ts';
import { keyLimitReached, NO_GATE, type Gate } from '../core/money.ts';

/** Largest amount of one credit or usage record: 10^15 micro-units (one billion currency units); the page's form rules hold it. */
import { MAX_AMOUNT_MICROS } from '../core/key-rules.ts';
export { MAX_AMOUNT_MICROS };
// The gate as the sidecar holds it, and the spend-limit rule on it: the floor's (src/core/money.ts).
export { keyLimitReached, NO_GATE, type Gate };
/** Largest balance (either sign) a wallet may hold: 2^53 − 1 − MAX_AMOUNT_MICROS, so every step stays exact in Lua. */
export const MAX_BALANCE_MICROS = Number.MAX_SAFE_INTEGER - MAX_AMOUNT_MICROS;

/**
 * The largest token count one usage record (or metered booking) carries, per count: 10^12. A
 * record's counts then stay far below 2^53, so a total plus one record's counts is exact in Lua
 * (doubles) and in JavaScript, and the check below is exact.
 */
export const MAX_TOKEN_COUNT = 1_000_000_000_000;
/**
 * The largest token total kept: 2^53 − 1. It bounds the input plus output tokens of every token
 * counter (a key's and an account's, today and this month) and of every token-rate window; each
 * of those only grows by bookings, and every booking checks all of them before its first write (a
 * record that would take one past the bound is refused, nothing written). One input or output
 * total alone is at most their sum, so every number read back is an exact integer. At 10^12 per
 * count, the bound is reached only after about 4,500 records of the largest counts in one month.
 */
export const MAX_TOKEN_TOTAL = Number.MAX_SAFE_INTEGER;

/** A usage record's request id, a credit's reference: the ids routers and payment systems use. */
export const BOOK_ID_PATTERN = /^[A-Za-z0-9._:@=+/-]{1,128}$/;
/** `BOOK_ID_PATTERN` as errors and the API document say it. */
export const BOOK_ID_RULE = '1-128 of [A-Za-z0-9._:@=+/-]';

export const LIMIT_PERIODS = ['day', 'week', 'month', 'total'] as const;
export type LimitPeriod = (typeof LIMIT_PERIODS)[number];

/** Gate record fields: `wallet` = open | empty (absent: no wallet); `limit:{keyId}` = epoch ms the block ends, or `never`. */
export const GateField = {
  wallet: 'wallet',
  limitPrefix: 'limit:',
} as const;
export const GATE_FOREVER = 'never';

export const WalletField = { balance: 'balance', createdAt: 'created_at', updatedAt: 'updated_at' } as const;

export const KeyUseField = {
  lastUsed: 'last_used',
  dayStart: 'day_start',
  day: 'day',
  monthStart: 'month_start',
  month: 'month',
  /** Requests of the key the endpoint rule refused (all time; `src/store/refusal-count.ts`). */
  refusedEndpoint: 'refused_endpoint',
} as const;

/**
 * Booked token counters (`tokens:{acct}:{keyId}` of a key, `tokens:{acct}` of an account), written
 * by the usage-record script with every booking that carries token counts: input and output tokens
 * today and this month (UTC), each period restarting when its `_start` is not the current one.
 */
export const TokenCounterField = {
  dayStart: 'day_start',
  dayIn: 'day_in',
  dayOut: 'day_out',
  monthStart: 'month_start',
  monthIn: 'month_in',
  monthOut: 'month_out',
} as const;

/** Tokens of a key or account as the console shows them. */
export interface TokenTotals {
  readonly today: { readonly input: number; readonly output: number };
  readonly month: { readonly input: number; readonly output: number };
}

/** Decodes a token counter record for `nowMs` (a period that has ended counts 0; malformed fields read as 0). */
export function parseTokenCounters(hash: Record<string, string>, nowMs: number): TokenTotals {
  const n = (v: string | undefined) => (v !== undefined && /^\d{1,16}$/.test(v) ? Number(v) : 0);
  const cur = (period: 'day' | 'month', start: string | undefined) => start !== undefined && n(start) === periodBounds(period, nowMs).start;
  const F = TokenCounterField;
  const day = cur('day', hash[F.dayStart]);
  const month = cur('month', hash[F.monthStart]);
  return {
    today: { input: day ? n(hash[F.dayIn]) : 0, output: day ? n(hash[F.dayOut]) : 0 },
    month: { input: month ? n(hash[F.monthIn]) : 0, output: month ? n(hash[F.monthOut]) : 0 },
  };
}

// ── Amounts ────────────────────────────────────────────────────────────────────────────────

const AMOUNT_TEXT = /^(\d{1,10})(?:\.(\d{1,6}))?$/;

/** `12.50` → 12500000. Positive, at most 6 decimals, no sign, exponent or leading dot; null if not. */
export function parseAmount(text: string): number | null {
  const m = AMOUNT_TEXT.exec(text);
  if (!m) return null;
  const micros = Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
  return micros > 0 && micros <= MAX_AMOUNT_MICROS ? micros : null;
}

/** 12500000 → `12.5`; −1 → `-0.000001`. */
export function formatAmount(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const units = Math.floor(abs / 1_000_000);
  const frac = String(abs % 1_000_000).padStart(6, '0').replace(/0+$/, '');
  return `${sign}${units}${frac ? `.${frac}` : ''}`;
}

/** A positive integer amount in micro-units (number or decimal-digit string), or null. */
export function amountMicrosOf(v: unknown): number | null {
  const n = typeof v === 'string' && /^\d{1,16}$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 && n <= MAX_AMOUNT_MICROS ? n : null;
}

// ── Periods (UTC) ──────────────────────────────────────────────────────────────────────────

const DAY_MS = 86_400_000;

export interface PeriodBounds {
  readonly start: number;
  /** Exclusive end; Infinity for `total`. */
  readonly end: number;
}

/** The period containing `nowMs`: UTC day, Monday-to-Sunday week, calendar month, or all time. */
export function periodBounds(period: LimitPeriod, nowMs: number): PeriodBounds {
  const day = Math.floor(nowMs / DAY_MS);
  switch (period) {
    case 'day':
      return { start: day * DAY_MS, end: (day + 1) * DAY_MS };
    case 'week': {
      // 1970-01-01 was a Thursday: Monday-based weekday = (day + 3) mod 7.
      const start = (day - ((day + 3) % 7)) * DAY_MS;
      return { start, end: start + 7 * DAY_MS };
    }
    case 'month': {
      const d = new Date(nowMs);
      return { start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) };
    }
    case 'total':
      return { start: 0, end: Infinity };
  }
}

/**
 * The same period arithmetic in Lua for the scripts (`now` = epoch ms from `TIME`). Defines
 * `period_bounds(period, now)` → start, end (end = -1 for total). Month uses the days-from-civil
 * algorithm (proleptic Gregorian, UTC).
 */
export const LUA_PERIODS = `
local DAY = 86400000
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
local function civil_from_days(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  if m <= 2 then y = y + 1 end
  return y, m
end
local function period_bounds(period, now)
  local day = math.floor(now / DAY)
  if period == 'day' then return day * DAY, (day + 1) * DAY end
  if period == 'week' then
    local s = (day - ((day + 3) % 7)) * DAY
    return s, s + 7 * DAY
  end
  if period == 'month' then
    local y, m = civil_from_days(day)
    local ny, nm = y, m + 1
    if nm == 13 then ny, nm = y + 1, 1 end
    return days_from_civil(y, m, 1) * DAY, days_from_civil(ny, nm, 1) * DAY
  end
  return 0, -1
end
`;

// ── Gate record (the sidecar's read) ───────────────────────────────────────────────────────

/** Decodes an HGETALL of the gate record; a string naming the problem when it does not follow the schema. */
export function parseGate(hash: Record<string, string>): Gate | string {
  let wallet: Gate['wallet'] = 'none';
  let limits: Map<string, number> | null = null;
  for (const [field, value] of Object.entries(hash)) {
    if (field === GateField.wallet) {
      if (value !== 'open' && value !== 'empty') return 'wallet: not open|empty';
      wallet = value;
    } else if (field.startsWith(GateField.limitPrefix)) {
      const keyId = field.slice(GateField.limitPrefix.length);
      if (!KEY_ID_PATTERN.test(keyId)) return `${field}: not a key id`;
      let until: number;
      if (value === GATE_FOREVER) until = Infinity;
      else if (/^\d{1,16}$/.test(value)) until = Number(value);
      else return `${field}: not epoch ms or ${GATE_FOREVER}`;
      (limits ??= new Map()).set(keyId, until);
    }
    // other fields: ignored (compatible additions)
  }
  return wallet === 'none' && limits === null ? NO_GATE : { wallet, limits };
}

// ── Console-side decoders ──────────────────────────────────────────────────────────────────

const int = z.string().regex(/^-?\d{1,17}$/).transform(Number);

export interface KeyLimit {
  readonly amountMicros: number;
  readonly period: LimitPeriod;
}

export interface KeySpend {
  readonly limit: KeyLimit | null;
  /** Spend in the current day, week and month (0 when nothing was recorded in it), and all time. */
  readonly day: number;
  readonly week: number;
  readonly month: number;
  readonly total: number;
}

const spendRecord = z.object({
  limit: int.optional(),
  period: z.enum(LIMIT_PERIODS).optional(),
  day_start: int.optional(),
  day: int.optional(),
  week_start: int.optional(),
  week: int.optional(),
  month_start: int.optional(),
  month: int.optional(),
  total: int.optional(),
});

/** Decodes the spend record of a key for `nowMs` (spend of a period that has ended counts as 0). */
export function parseKeySpend(hash: Record<string, string>, nowMs: number): KeySpend | string {
  const r = spendRecord.safeParse(hash);
  if (!r.success) return r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
  const d = r.data;
  const inPeriod = (period: LimitPeriod, start: number | undefined, v: number | undefined) =>
    start !== undefined && start === periodBounds(period, nowMs).start ? (v ?? 0) : 0;
  return {
    limit: d.limit !== undefined && d.period !== undefined ? { amountMicros: d.limit, period: d.period } : null,
    day: inPeriod('day', d.day_start, d.day),
    week: inPeriod('week', d.week_start, d.week),
    month: inPeriod('month', d.month_start, d.month),
    total: d.total ?? 0,
  };
}

/** Spend in a limit's period. */
export function spendIn(s: KeySpend, period: LimitPeriod): number {
  return period === 'total' ? s.total : s[period];
}

export interface KeyUse {
  readonly lastUsedAt: number | null;
  readonly today: number;
  readonly month: number;
  /** Requests the endpoint rule refused (all time). */
  readonly refusedEndpoint: number;
}

/** Decodes the counter record of a key for `nowMs`. Malformed fields read as absent (counters are advisory). */
export function parseKeyUse(hash: Record<string, string>, nowMs: number): KeyUse {
  const n = (v: string | undefined) => (v !== undefined && /^\d{1,16}$/.test(v) ? Number(v) : null);
  const cur = (period: LimitPeriod, start: string | undefined, v: string | undefined) =>
    n(start) === periodBounds(period, nowMs).start ? (n(v) ?? 0) : 0;
  return {
    lastUsedAt: n(hash[KeyUseField.lastUsed]),
    today: cur('day', hash[KeyUseField.dayStart], hash[KeyUseField.day]),
    month: cur('month', hash[KeyUseField.monthStart], hash[KeyUseField.month]),
    refusedEndpoint: n(hash[KeyUseField.refusedEndpoint]) ?? 0,
  };
}

/**
 * One usage-log entry (stream fields `key`, `req` (the request id label), `amount`, `booking_id`
 * (the id it is idempotent on; absent in entries written before it), `model`?, `in`?, `out`?, `cached_in`?,
 * `cache_write`?, `reasoning`?, `src`? (`meter` | `record`; absent = record), `est`? and
 * `unpriced`? (`1` when set), `price`? (why this price: JSON text, src/prices/basis.ts)).
 */
export interface UsageEntry {
  /** Stream id `{ms}-{seq}`: the Redis time of the record. */
  readonly id: string;
  readonly time: number;
  readonly account: string;
  readonly keyId: string;
  readonly requestId: string;
  /** The id the entry was booked under (metering: keygate's booking id; a usage record: its request id). */
  readonly bookingId: string;
  readonly amountMicros: number;
  readonly model: string | null;
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
  readonly cachedInputTokens: number | null;
  readonly cacheWriteTokens: number | null;
  readonly reasoningTokens: number | null;
  /** `meter`: booked by the sidecar from the response; `record`: posted to the usage API. */
  readonly source: 'meter' | 'record';
  /** A count was estimated (not read from the response). */
  readonly estimated: boolean;
  /** No price matched the model: booked at 0. */
  readonly unpriced: boolean;
  /** Why this price (src/prices/basis.ts), from the entry's `price` field (JSON text); null when it has none or it does not parse. */
  readonly price: Record<string, unknown> | null;
}

/** The `price` field of a usage-log entry, parsed (a JSON object), or null. */
export function parsePriceField(v: string | undefined): Record<string, unknown> | null {
  if (v === undefined || v === '' || v.length > 16_384) return null;
  try {
    const o: unknown = JSON.parse(v);
    return typeof o === 'object' && o !== null && !Array.isArray(o) ? (o as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export function parseUsageEntry(account: string, id: string, flat: readonly string[]): UsageEntry {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]!] = flat[i + 1]!;
  const num = (v: string | undefined) => (v === undefined || v === '' ? null : Number(v));
  return {
    id,
    time: Number(id.split('-')[0]),
    account,
    keyId: f.key ?? '',
    requestId: f.req ?? '',
    bookingId: f.booking_id ?? f.req ?? '',
    amountMicros: Number(f.amount ?? 0),
    model: f.model || null,
    inputTokens: num(f.in),
    outputTokens: num(f.out),
    cachedInputTokens: num(f.cached_in),
    cacheWriteTokens: num(f.cache_write),
    reasoningTokens: num(f.reasoning),
    source: f.src === 'meter' ? 'meter' : 'record',
    estimated: f.est === '1',
    unpriced: f.unpriced === '1',
    price: parsePriceField(f.price),
  };
}
