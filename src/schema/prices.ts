/**
 * The price table in Redis (docs/metering.md, "Prices"): one hash per namespace,
 *
 *   {ns}:v1:prices   HASH  field = model name, lower case (`gpt-4o-mini`, `openai/gpt-4o`,
 *                          `openai/*`, `*`); value = the price record, JSON:
 *                          {"input":150000,"output":600000,"cached_input":75000,"cache_write":…,"updated_at":…}
 *
 * Prices are integer micro-units per million tokens (0 allowed: a free model), at most
 * MAX_PRICE_MICROS. `cached_input` and `cache_write` are optional and default to `input`;
 * reasoning tokens are priced as output. One key (one Cluster slot): the sidecar reads it whole
 * (HGETALL) and keeps it in memory; the console writes one field per model.
 */
import { z } from 'zod';
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

export interface PriceRecord {
  readonly input: number;
  readonly output: number;
  readonly cachedInput?: number;
  readonly cacheWrite?: number;
  readonly updatedAt?: number;
}

const priceMicros = z.number().int().min(0).max(MAX_PRICE_MICROS);

const record = z
  .object({
    input: priceMicros,
    output: priceMicros,
    cached_input: priceMicros.optional(),
    cache_write: priceMicros.optional(),
    updated_at: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .strict();

/** The hash field of a model (model names compare case-insensitively). */
export function priceField(model: string): string {
  return model.toLowerCase();
}

/** A price record as its hash value. */
export function encodePrice(p: PriceRecord): string {
  const o: Record<string, number> = { [PriceField.input]: p.input, [PriceField.output]: p.output };
  if (p.cachedInput !== undefined) o[PriceField.cachedInput] = p.cachedInput;
  if (p.cacheWrite !== undefined) o[PriceField.cacheWrite] = p.cacheWrite;
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
  const d = r.data;
  return {
    input: d.input,
    output: d.output,
    ...(d.cached_input !== undefined ? { cachedInput: d.cached_input } : {}),
    ...(d.cache_write !== undefined ? { cacheWrite: d.cache_write } : {}),
    ...(d.updated_at !== undefined ? { updatedAt: d.updated_at } : {}),
  };
}

/** The price a record sets (defaults applied). */
export function priceOf(r: PriceRecord): Price {
  return { input: r.input, output: r.output, cachedInput: r.cachedInput ?? r.input, cacheWrite: r.cacheWrite ?? r.input };
}
