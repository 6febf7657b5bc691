/**
 * A price, the usage it prices, and the exact cost (docs/metering.md, "Prices").
 *
 * Token classes are priced in integer micro-units per million tokens, call classes per thousand
 * calls. A class without its own price takes its parent's (the price it is a part of):
 *   cached_input, cache_write, input_audio, input_image → input; cache_write_1h → cache_write;
 *   output_audio, output_image → output. Reasoning tokens are output.
 * A tier (input tokens above a threshold, cached and cache-write input counted) replaces the
 * prices it names for the whole request, every class; the highest tier passed applies.
 *
 * The usage is split into disjoint parts, each at its class's price:
 *   input        = input − cached − cache writes − audio in − image in (text input, tool-use prompt included)
 *   cached_input = cache reads;   cache_write = cache writes − 1 h writes;   cache_write_1h = 1 h writes
 *   input_audio, input_image      (audio and image input tokens)
 *   output       = output − audio out − image out (reasoning included)
 *   output_audio, output_image;   web_search = web-search calls (per thousand)
 * cost = ceil(Σ part × price × service-tier multiplier × account multiplier / 10^6), in BigInt, one ceiling.
 */
import { ONE_SCALED, scaledToDecimal } from './decimal.ts';

export const TOKEN_CLASSES = ['input', 'cached_input', 'cache_write', 'cache_write_1h', 'output', 'input_audio', 'output_audio', 'input_image', 'output_image'] as const;
export const CALL_CLASSES = ['web_search'] as const;
export const PRICE_CLASSES = [...TOKEN_CLASSES, ...CALL_CLASSES] as const;
export type TokenClass = (typeof TOKEN_CLASSES)[number];
export type CallClass = (typeof CALL_CLASSES)[number];
export type PriceClass = (typeof PRICE_CLASSES)[number];

/** The price a class without its own takes. */
export const PARENT: Readonly<Partial<Record<PriceClass, PriceClass>>> = {
  cached_input: 'input',
  cache_write: 'input',
  cache_write_1h: 'cache_write',
  input_audio: 'input',
  input_image: 'input',
  output_audio: 'output',
  output_image: 'output',
};

/** Prices of classes: micro-units per million tokens (token classes), per thousand calls (web_search). */
export type ClassPrices = Partial<Record<PriceClass, bigint>>;

export interface PriceTier {
  /** Applies when the request's input tokens are above this many. */
  readonly above: number;
  /** The classes it prices (others: the base price). */
  readonly prices: ClassPrices;
}

/** A model's price. `base` always has `input` and `output`. */
export interface PriceSpec {
  readonly base: ClassPrices & { input: bigint; output: bigint };
  /** Ascending by `above`. */
  readonly tiers: readonly PriceTier[];
  /** Service tier → multiplier (10^-6 units: 500000n = 0.5). */
  readonly serviceTiers: Readonly<Record<string, bigint>>;
}

/** The usage one booking prices (normalised counts, section 12 and 16). */
export interface PricedUsage {
  readonly input_tokens: number;
  readonly cached_input_tokens: number;
  readonly cache_write_tokens: number;
  readonly cache_write_1h_tokens?: number;
  readonly output_tokens: number;
  readonly input_audio_tokens?: number;
  readonly output_audio_tokens?: number;
  readonly input_image_tokens?: number;
  readonly output_image_tokens?: number;
  readonly web_search_requests?: number;
  readonly service_tier?: string | null;
}

/** The price of a class in a tier (its own, else its parent's, in the tier, else in the base). */
export function classPrice(spec: PriceSpec, tier: PriceTier | null, c: PriceClass): bigint {
  let k: PriceClass | undefined = c;
  while (k !== undefined) {
    const v = tier?.prices[k] ?? spec.base[k];
    if (v !== undefined) return v;
    k = PARENT[k];
  }
  return 0n; // web_search without a price: free
}

/** The highest tier the request's input passes, or null (the base). */
export function tierOf(spec: PriceSpec, inputTokens: number): PriceTier | null {
  let t: PriceTier | null = null;
  for (const x of spec.tiers) if (inputTokens > x.above) t = x;
  return t;
}

/** The disjoint parts of a usage, by class (zero parts left out). */
export function usageParts(u: PricedUsage): Partial<Record<PriceClass, number>> {
  const n = (v: number | undefined) => (v !== undefined && v > 0 ? v : 0);
  const cw1h = Math.min(n(u.cache_write_1h_tokens), n(u.cache_write_tokens));
  const parts: Partial<Record<PriceClass, number>> = {};
  // in this order, only the non-zero ones (no `delete`: it turns the object into a slow dictionary)
  const put = (k: PriceClass, v: number) => {
    if (v !== 0) parts[k] = v;
  };
  put('input', Math.max(0, n(u.input_tokens) - n(u.cached_input_tokens) - n(u.cache_write_tokens) - n(u.input_audio_tokens) - n(u.input_image_tokens)));
  put('cached_input', n(u.cached_input_tokens));
  put('cache_write', n(u.cache_write_tokens) - cw1h);
  put('cache_write_1h', cw1h);
  put('input_audio', n(u.input_audio_tokens));
  put('input_image', n(u.input_image_tokens));
  put('output', Math.max(0, n(u.output_tokens) - n(u.output_audio_tokens) - n(u.output_image_tokens)));
  put('output_audio', n(u.output_audio_tokens));
  put('output_image', n(u.output_image_tokens));
  put('web_search', n(u.web_search_requests));
  return parts;
}

/** The default multipliers of service tiers by provider, where the operator set none: OpenAI flex 0.5. */
export const DEFAULT_SERVICE_TIERS: Readonly<Record<string, Readonly<Record<string, bigint>>>> = {
  openai: { flex: 500_000n },
};
/** Service tiers that are the standard rate (never counted as a tier without a multiplier). */
export const STANDARD_TIERS: ReadonlySet<string> = new Set(['default', 'standard', 'auto', 'on_demand']);

export interface Cost {
  /** Micro-units, after the one ceiling. */
  readonly amount: bigint;
  /** The tier applied: its threshold ("above 200000"), or null (the base). */
  readonly tier: number | null;
  /** The service tier's multiplier and the account's, 10^-6 units. */
  readonly serviceMultiplier: bigint;
  readonly accountMultiplier: bigint;
  /** Each class's part in micro-units, exact decimal text (they sum to the amount before its ceiling). */
  readonly parts: Record<string, string>;
  /** Each class's count (tokens or calls) and its price. */
  readonly counts: Record<string, number>;
  /** Each class's price in micro-units (per million tokens; web_search: per thousand calls). */
  readonly prices: Record<string, number>;
}

const SCALE = 10n ** 18n; // per million tokens (10^6) × two multipliers (10^6 each)

/**
 * The exact cost of a usage at a price: each part × its class's price (per thousand calls: × 1000),
 * × the service tier's multiplier, × the account's, / 10^18, one ceiling.
 */
export function costOf(spec: PriceSpec, u: PricedUsage, serviceMultiplier: bigint = ONE_SCALED, accountMultiplier: bigint = ONE_SCALED): Cost {
  const tier = tierOf(spec, u.input_tokens);
  const parts = usageParts(u);
  // At both multipliers 1 (the usual booking) the parts are summed in safe integers, in units of
  // 10^-6 micro-units (BigInt arithmetic was most of a booking's pricing); past
  // Number.MAX_SAFE_INTEGER the sum so far moves to the BigInt scale (× 10^12) and goes on there.
  // The same amount and the same texts either way.
  let unit = serviceMultiplier === ONE_SCALED && accountMultiplier === ONE_SCALED;
  let small = 0;
  let total = 0n;
  const out: Record<string, string> = {};
  const counts: Record<string, number> = {};
  const prices: Record<string, number> = {};
  for (const c of PRICE_CLASSES) {
    const k = parts[c];
    if (k === undefined) continue;
    const price = classPrice(spec, tier, c);
    counts[c] = k;
    prices[c] = Number(price);
    if (unit && price <= MAX_SAFE) {
      const p = Number(price);
      const v = c === 'web_search' ? k * p * 1000 : k * p;
      if (Number.isSafeInteger(v) && Number.isSafeInteger(small + v)) {
        small += v;
        out[c] = millionthsText(v);
        continue;
      }
    }
    if (unit) {
      unit = false;
      total = BigInt(small) * UNIT_TO_SCALE;
    }
    const perMillionUnits = c === 'web_search' ? BigInt(k) * price * 1000n : BigInt(k) * price;
    const v = perMillionUnits * serviceMultiplier * accountMultiplier;
    total += v;
    out[c] = scaledToDecimal(v, 18);
  }
  let amount: bigint;
  if (unit) {
    const rest = small % 1_000_000;
    amount = BigInt((small - rest) / 1_000_000 + (rest > 0 ? 1 : 0));
  } else amount = (total + SCALE - 1n) / SCALE;
  return { amount, tier: tier?.above ?? null, serviceMultiplier, accountMultiplier, parts: out, counts, prices };
}

/** From the safe-integer sum's unit (10^-6 micro-units) to the BigInt scale's (10^-18): both multipliers' 10^6. */
const UNIT_TO_SCALE = 10n ** 12n;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** `scaledToDecimal(BigInt(v), 6)` of a safe non-negative integer. */
function millionthsText(v: number): string {
  const frac = v % 1_000_000;
  const int = (v - frac) / 1_000_000;
  if (frac === 0) return String(int);
  let f = String(frac).padStart(6, '0');
  let end = f.length;
  while (f.charCodeAt(end - 1) === 48) end--;
  f = f.slice(0, end);
  return `${int}.${f}`;
}
