/**
 * Pricing a booking: the operator's price table in memory (src/schema/prices.ts) and, under it, the price catalog
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
import type { PricedUsage } from '../prices/price.ts';
import { MAX_AMOUNT_MICROS } from '../schema/money.ts';
import type { PriceTable } from '../schema/prices.ts';

/** The prices a booking is priced with: the table, and the catalog (null: turned off). */
export interface PriceSources {
  readonly table: PriceTable;
  readonly catalog: PriceCatalog | null;
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
