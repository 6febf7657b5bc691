/**
 * The price table in Redis (docs/metering.md, "Prices"): one hash per namespace,
 *
 *   {ns}:v1:prices   HASH  field = model name, lower case (`gpt-4o-mini`, `openai/gpt-4o`,
 *                          `openai/*`, `*`); value = the price record, JSON:
 *                          {"input":150000,"output":600000,"cached_input":75000,"cache_write":…,"updated_at":…}
 *
 * Prices are integer micro-units per million tokens (0 allowed: a free model), at most
 * MAX_PRICE_MICROS. `cached_input` and `cache_write` are optional and default to `input`;
 * reasoning tokens are priced as output. Section 16's classes, all optional, each defaulting to
 * the price it is a part of (src/prices/price.ts): `cache_write_1h` (→ cache_write),
 * `input_audio`, `input_image` (→ input), `output_audio`, `output_image` (→ output), `web_search`
 * (per thousand calls; → 0); `tiers`: `[{"above": 200000, "input": …, …}]` (whole-request tiers,
 * ascending, at most 8; a class a tier leaves out keeps its base price); `service_tiers`:
 * `{"flex": "0.5"}` (decimal multipliers, at most 6 decimals, 0 to 1000). One key (one Cluster slot): the sidecar reads it whole
 * (HGETALL) and keeps it in memory; the console writes one field per model.
 */
import { z } from 'zod';
import { decimalToScaled } from '../prices/decimal.ts';
import type { ClassPrices, PriceSpec } from '../prices/price.ts';
import type { TableLookup } from '../prices/resolve.ts';
import { SCHEMA_VERSION } from './redis-schema.ts';

/** The largest price: 10^12 micro-units (one million currency units) per million tokens. */
export const MAX_PRICE_MICROS = 1_000_000_000_000;

/** The most models the price table holds (the sidecar keeps it whole in memory). */
export const MAX_PRICES = 10_000;

/**
 * A model name as a price table field: 1-256 printable ASCII characters without spaces (a bare
 * name, `provider/name`, `provider/*` or `*`) — the names metering takes from a response.
 */
export const PRICE_MODEL_PATTERN = /^[\x21-\x7e]{1,256}$/;

export const PriceField = {
  input: 'input',
  output: 'output',
  cachedInput: 'cached_input',
  cacheWrite: 'cache_write',
  updatedAt: 'updated_at',
} as const;

/** The key of the price table. */
export function pricesKey(namespace: string): string {
  return `${namespace}:v${SCHEMA_VERSION}:prices`;
}

/** A model's price, micro-units per million tokens (defaults applied). */
export interface Price {
  readonly input: number;
  readonly output: number;
  readonly cachedInput: number;
  readonly cacheWrite: number;
}

/** Section 16's optional classes of a price record (snake case as stored). */
export const EXTRA_CLASSES = ['cache_write_1h', 'input_audio', 'output_audio', 'input_image', 'output_image', 'web_search'] as const;
export type ExtraClass = (typeof EXTRA_CLASSES)[number];

/** A whole-request tier as stored: applies above `above` input tokens; the classes it prices. */
export type TierRecord = { readonly above: number } & Partial<Record<'input' | 'output' | 'cached_input' | 'cache_write' | ExtraClass, number>>;

export interface PriceRecord {
  readonly input: number;
  readonly output: number;
  readonly cachedInput?: number;
  readonly cacheWrite?: number;
  /** Section 16's classes (micro-units per million tokens; web_search: per thousand calls). */
  readonly extra?: Partial<Record<ExtraClass, number>>;
  readonly tiers?: readonly TierRecord[];
  /** Service tier → decimal multiplier text ("0.5"). */
  readonly serviceTiers?: Readonly<Record<string, string>>;
  readonly updatedAt?: number;
}

/** The most tiers and service tiers a price holds. */
export const MAX_PRICE_TIERS = 8;
export const MAX_SERVICE_TIERS = 8;
/** The largest multiplier (a service tier's, an account's). */
export const MAX_MULTIPLIER = 1000;
/** A multiplier: decimal text, at most 6 decimals, 0 to MAX_MULTIPLIER. */
export const MULTIPLIER_PATTERN = /^\d{1,4}(\.\d{1,6})?$/;
export const SERVICE_TIER_PATTERN = /^[a-z0-9_-]{1,32}$/;

const priceMicros = z.number().int().min(0).max(MAX_PRICE_MICROS);
const multiplier = z.string().regex(MULTIPLIER_PATTERN).refine((v) => Number(v) <= MAX_MULTIPLIER, `at most ${MAX_MULTIPLIER}`);
const tierRecord = z
  .object({
    above: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    input: priceMicros.optional(),
    output: priceMicros.optional(),
    cached_input: priceMicros.optional(),
    cache_write: priceMicros.optional(),
    ...Object.fromEntries(EXTRA_CLASSES.map((c) => [c, priceMicros.optional()])),
  })
  .strict();

const record = z
  .object({
    input: priceMicros,
    output: priceMicros,
    cached_input: priceMicros.optional(),
    cache_write: priceMicros.optional(),
    ...Object.fromEntries(EXTRA_CLASSES.map((c) => [c, priceMicros.optional()])),
    tiers: z
      .array(tierRecord)
      .max(MAX_PRICE_TIERS)
      .refine((t) => t.every((x, i) => i === 0 || x.above > t[i - 1]!.above), 'tiers ascend by above, each once')
      .optional(),
    service_tiers: z
      .record(z.string().regex(SERVICE_TIER_PATTERN), multiplier)
      .refine((o) => Object.keys(o).length <= MAX_SERVICE_TIERS, `at most ${MAX_SERVICE_TIERS} service tiers`)
      .optional(),
    updated_at: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .strict();

/** The hash field of a model (model names compare case-insensitively). */
export function priceField(model: string): string {
  return model.toLowerCase();
}

/** A price record as its hash value. */
export function encodePrice(p: PriceRecord): string {
  const o: Record<string, unknown> = { [PriceField.input]: p.input, [PriceField.output]: p.output };
  if (p.cachedInput !== undefined) o[PriceField.cachedInput] = p.cachedInput;
  if (p.cacheWrite !== undefined) o[PriceField.cacheWrite] = p.cacheWrite;
  for (const c of EXTRA_CLASSES) if (p.extra?.[c] !== undefined) o[c] = p.extra[c];
  if (p.tiers !== undefined && p.tiers.length > 0) o.tiers = p.tiers;
  if (p.serviceTiers !== undefined && Object.keys(p.serviceTiers).length > 0) o.service_tiers = p.serviceTiers;
  if (p.updatedAt !== undefined) o[PriceField.updatedAt] = p.updatedAt;
  record.parse(o);
  return JSON.stringify(o);
}

/** A hash value as a price record, or a string naming the problem. */
export function decodePrice(text: string): PriceRecord | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return 'price: not JSON';
  }
  const r = record.safeParse(parsed);
  if (!r.success) return r.error.issues.map((i) => `price ${i.path.join('.') || 'record'}: ${i.message}`).join('; ');
  const d = r.data as z.infer<typeof record> & Partial<Record<ExtraClass, number>>;
  const extra: Partial<Record<ExtraClass, number>> = {};
  for (const c of EXTRA_CLASSES) if (d[c] !== undefined) extra[c] = d[c];
  return {
    input: d.input,
    output: d.output,
    ...(d.cached_input !== undefined ? { cachedInput: d.cached_input } : {}),
    ...(d.cache_write !== undefined ? { cacheWrite: d.cache_write } : {}),
    ...(Object.keys(extra).length > 0 ? { extra } : {}),
    ...(d.tiers !== undefined && d.tiers.length > 0 ? { tiers: d.tiers as TierRecord[] } : {}),
    ...(d.service_tiers !== undefined && Object.keys(d.service_tiers).length > 0 ? { serviceTiers: d.service_tiers } : {}),
    ...(d.updated_at !== undefined ? { updatedAt: d.updated_at } : {}),
  };
}

/** A multiplier's decimal text as 10^-6 units (500000n = 0.5); null when it is not one. */
export function multiplierScaled(text: string): bigint | null {
  if (!MULTIPLIER_PATTERN.test(text)) return null;
  const v = decimalToScaled(text, 6);
  return v !== null && v <= BigInt(MAX_MULTIPLIER) * 1_000_000n ? v : null;
}

/** A price record as the pricing code's price (src/prices/price.ts): defaults are the parent classes. */
export function specOf(r: PriceRecord): PriceSpec {
  const classes = (o: Partial<Record<string, number>>): ClassPrices => {
    const c: ClassPrices = {};
    for (const [k, v] of Object.entries(o)) if (v !== undefined && k !== 'above') (c as Record<string, bigint>)[k] = BigInt(v);
    return c;
  };
  const base = classes({ cached_input: r.cachedInput, cache_write: r.cacheWrite, ...r.extra });
  const serviceTiers: Record<string, bigint> = {};
  for (const [k, v] of Object.entries(r.serviceTiers ?? {})) {
    const m = multiplierScaled(v);
    if (m !== null) serviceTiers[k] = m;
  }
  return {
    base: { ...base, input: BigInt(r.input), output: BigInt(r.output) },
    tiers: (r.tiers ?? []).map((t) => ({ above: t.above, prices: classes(t) })),
    serviceTiers,
  };
}

/** The price a record sets (defaults applied). */
export function priceOf(r: PriceRecord): Price {
  return { input: r.input, output: r.output, cachedInput: r.cachedInput ?? r.input, cacheWrite: r.cacheWrite ?? r.input };
}

/** The price table in memory: lower-case model field → price. */
export class PriceTable implements TableLookup {
  private readonly prices = new Map<string, PriceSpec>();
  /** Fields that did not decode (skipped), with the reason. */
  readonly corrupt: { field: string; reason: string }[] = [];

  /** From an HGETALL of the prices key. */
  static fromHash(hash: Record<string, string>): PriceTable {
    const t = new PriceTable();
    for (const [field, value] of Object.entries(hash)) {
      const r = decodePrice(value);
      if (typeof r === 'string') t.corrupt.push({ field, reason: r });
      else t.set(field, r);
    }
    return t;
  }

  /** Grows with every `set` (a resolution remembered for this table is good while it stays). */
  version = 0;

  set(model: string, p: PriceRecord): void {
    this.prices.set(priceField(model), specOf(p));
    this.version++;
  }

  get(field: string): PriceSpec | undefined {
    return this.prices.get(field);
  }

  fields(): Iterable<string> {
    return this.prices.keys();
  }

  get size(): number {
    return this.prices.size;
  }
}
