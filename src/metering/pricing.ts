/**
 * Pricing a booking: the lookup in the price table and the exact cost.
 *
 * Lookup, model names compared case-insensitively: the model as named; then, for a bare name
 * (no `/`), `provider/name` with the entry's provider (`openai`, `anthropic`, `google`); then
 * `provider/*`; then `*`. No match: unpriced (cost 0, marked).
 *
 * Cost in micro-units = ceil(((input − cached − cache_write) × input price + cached × cached_input
 * price + cache_write × cache_write price + output × output price) / 1,000,000), computed in BigInt
 * (exact for any counts and prices). A cost above MAX_AMOUNT_MICROS (the largest usage amount the
 * books take) is clamped to it and reported (`clamped`).
 */
import type { Family } from '../core/family.ts';
import { MAX_AMOUNT_MICROS } from '../schema/money.ts';
import { decodePrice, priceField, priceOf, type Price } from '../schema/prices.ts';
import type { TokenCounts } from './usage.ts';

/** The price table in memory: lower-case model field → price. */
export class PriceTable {
  private readonly prices = new Map<string, Price>();
  /** Fields that did not decode (skipped), with the reason. */
  readonly corrupt: { field: string; reason: string }[] = [];

  /** From an HGETALL of the prices key. */
  static fromHash(hash: Record<string, string>): PriceTable {
    const t = new PriceTable();
    for (const [field, value] of Object.entries(hash)) {
      const r = decodePrice(value);
      if (typeof r === 'string') t.corrupt.push({ field, reason: r });
      else t.prices.set(field.toLowerCase(), priceOf(r));
    }
    return t;
  }

  set(model: string, p: Price): void {
    this.prices.set(priceField(model), p);
  }

  get size(): number {
    return this.prices.size;
  }

  /** The price of a model served by a provider's entry, and the field it was found under; null when unpriced. */
  lookup(model: string | null, provider: Family): { price: Price; matched: string } | null {
    const tries: string[] = [];
    if (model !== null && model !== '') {
      const m = model.toLowerCase();
      tries.push(m);
      if (!m.includes('/')) tries.push(`${provider}/${m}`);
    }
    tries.push(`${provider}/*`, '*');
    for (const t of tries) {
      const p = this.prices.get(t);
      if (p !== undefined) return { price: p, matched: t };
    }
    return null;
  }
}

const MILLION = 1_000_000n;

/** The exact cost in micro-units of normalised counts at a price, and whether it was clamped. */
export function costMicros(c: TokenCounts, p: Price): { amount: number; clamped: boolean } {
  const input = BigInt(c.input_tokens);
  const cached = BigInt(c.cached_input_tokens);
  const cw = BigInt(c.cache_write_tokens);
  const fresh = input - cached - cw;
  const total =
    (fresh > 0n ? fresh : 0n) * BigInt(p.input) + cached * BigInt(p.cachedInput) + cw * BigInt(p.cacheWrite) + BigInt(c.output_tokens) * BigInt(p.output);
  const micros = (total + MILLION - 1n) / MILLION;
  if (micros > BigInt(MAX_AMOUNT_MICROS)) return { amount: MAX_AMOUNT_MICROS, clamped: true };
  return { amount: Number(micros), clamped: false };
}
