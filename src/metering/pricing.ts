/**
 * Pricing a booking: the operator's price table in memory and, under it, the price catalog
 * (src/prices/). Which price a name takes, in order (src/prices/resolve.ts): the table as named
 * (the name, then `provider/name` for a bare one); the catalog's model for that name, the table's
 * entry for that model winning; `provider/*`, then `*`; the requested model; else unpriced (cost 0,
 * marked). Model names compare case-insensitively.
 *
 * Cost (src/prices/price.ts): each class of usage at its own price, the whole-request tier, the
 * service tier's and the account's multipliers, in BigInt, one ceiling. A cost above
 * MAX_AMOUNT_MICROS (the largest usage amount the books take) is clamped to it and reported.
 */
import type { PriceCatalog } from '../prices/catalog.ts';
import { priceUsage, type PriceBasis } from '../prices/basis.ts';
import type { PricedUsage, PriceSpec } from '../prices/price.ts';
import type { TableLookup } from '../prices/resolve.ts';
import { MAX_AMOUNT_MICROS } from '../schema/money.ts';
import { decodePrice, priceField, priceOf as flatPriceOf, specOf, type Price, type PriceRecord } from '../schema/prices.ts';
import type { Family } from '../core/families/index.ts';
import { costOf } from '../prices/price.ts';

/** The price table in memory: lower-case model field → price. */
export class PriceTable implements TableLookup {
  private readonly prices = new Map<string, PriceSpec>();
  private readonly flat = new Map<string, Price>();
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

  set(model: string, p: PriceRecord): void {
    this.prices.set(priceField(model), specOf(p));
    this.flat.set(priceField(model), flatPriceOf(p));
  }

  /** The table alone (section 12's order, no catalog): the flat price and the field it was found under; null when none. */
  lookup(model: string | null, provider: Family): { price: Price; matched: string } | null {
    const tries: string[] = [];
    if (model !== null && model !== '') {
      const m = model.toLowerCase();
      tries.push(m);
      if (!m.includes('/')) tries.push(`${provider}/${m}`);
    }
    tries.push(`${provider}/*`, '*');
    for (const t of tries) {
      const p = this.flat.get(t);
      if (p !== undefined) return { price: p, matched: t };
    }
    return null;
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

/** The prices a booking is priced with: the table, and the catalog (null: turned off). */
export interface PriceSources {
  readonly table: PriceTable;
  readonly catalog: PriceCatalog | null;
}

/** The cost of section 12's four classes at a flat price (the table's first form), clamped to the books' largest. */
export function costMicros(c: PricedUsage, p: Price): { amount: number; clamped: boolean } {
  const a = costOf({ base: { input: BigInt(p.input), output: BigInt(p.output), cached_input: BigInt(p.cachedInput), cache_write: BigInt(p.cacheWrite) }, tiers: [], serviceTiers: {} }, c).amount;
  return a > BigInt(MAX_AMOUNT_MICROS) ? { amount: MAX_AMOUNT_MICROS, clamped: true } : { amount: Number(a), clamped: false };
}

/** A booking's price: the amount (clamped to the books' largest), unpriced, clamped, and why. */
export function priceBookingUsage(
  s: PriceSources,
  provider: string,
  model: string | null,
  requested: string | null,
  usage: PricedUsage,
  at: number,
  accountMultiplier?: bigint,
): { amount: number; unpriced: boolean; clamped: boolean; basis: PriceBasis } {
  const r = priceUsage({ table: s.table, catalog: s.catalog, provider, model, requested, usage, at, ...(accountMultiplier !== undefined ? { accountMultiplier } : {}) });
  const clamped = r.amount > BigInt(MAX_AMOUNT_MICROS);
  return { amount: clamped ? MAX_AMOUNT_MICROS : Number(r.amount), unpriced: r.unpriced, clamped, basis: r.basis };
}
