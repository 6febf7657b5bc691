/**
 * Pricing one booking and saying why (docs/metering.md, "Why this price"): the resolution
 * (`resolve.ts`), the whole-request tier, the service tier's multiplier, the account's multiplier
 * and the exact cost (`price.ts`), as the `price` basis every usage-log entry carries:
 *
 *   {rule, model, source, catalog_version, tier, service_tier, multiplier, parts: {class: micros},
 *    service_tier_multiplier, account_multiplier, counts: {class: n}, prices: {class: micros}}
 *
 * `parts` are exact decimal micro-units that sum to the amount before its one ceiling; `multiplier`
 * is the service tier's times the account's (decimal text). Service-tier multipliers: the priced
 * entry's own, else the table's `*` entry's, else keygate's default (OpenAI `flex` 0.5); a tier
 * named by the response with none of these is priced at the standard rate (`unknown_service_tier`).
 */
import type { PriceCatalog } from './catalog.ts';
import { ONE_SCALED, scaledToDecimal } from './decimal.ts';
import { costOf, DEFAULT_SERVICE_TIERS, STANDARD_TIERS, type PricedUsage } from './price.ts';
import { resolvePrice, type PriceRule, type TableLookup } from './resolve.ts';

export interface PriceBasis {
  readonly rule: PriceRule | 'unpriced' | 'recorded';
  readonly model: string | null;
  readonly source: 'table' | 'catalog' | 'record' | null;
  readonly catalog_version: string | null;
  /** The tier applied: input tokens above this many; null: the base price. */
  readonly tier: number | null;
  readonly service_tier: string | null;
  readonly multiplier: string;
  readonly parts: Record<string, string>;
  readonly service_tier_multiplier?: string;
  readonly account_multiplier?: string;
  /** The catalog model the name resolved to (`provider/id`), when it did. */
  readonly catalog_model?: string | null;
  readonly counts?: Record<string, number>;
  readonly prices?: Record<string, number>;
  /** The response named a service tier no multiplier covers: priced at the standard rate. */
  readonly unknown_service_tier?: true;
}

export interface PricedResult {
  /** Micro-units (BigInt: the caller clamps to what the books take). */
  readonly amount: bigint;
  readonly unpriced: boolean;
  readonly basis: PriceBasis;
}

const mult = (v: bigint) => (v === ONE_SCALED ? '1' : scaledToDecimal(v, 6));

/** Prices a usage: what the response named (`model`), what was asked (`requested`), at `at` (epoch ms). */
export function priceUsage(o: {
  table: TableLookup;
  catalog: PriceCatalog | null;
  provider: string;
  model: string | null;
  requested: string | null;
  usage: PricedUsage;
  at: number;
  /** The account's price multiplier, 10^-6 units (default 1). */
  accountMultiplier?: bigint;
}): PricedResult {
  const st = o.usage.service_tier ?? null;
  const am = o.accountMultiplier ?? ONE_SCALED;
  const version = o.catalog?.version ?? null;
  const r = resolvePrice(o.table, o.catalog, o.provider, o.model, o.requested, o.at);
  if (r === null) {
    return { amount: 0n, unpriced: true, basis: { rule: 'unpriced', model: null, source: null, catalog_version: version, tier: null, service_tier: st, multiplier: '0', parts: {} } };
  }
  let sm = ONE_SCALED;
  let unknownTier = false;
  if (st !== null && !STANDARD_TIERS.has(st)) {
    const found = r.spec.serviceTiers[st] ?? o.table.get('*')?.serviceTiers[st] ?? DEFAULT_SERVICE_TIERS[o.provider]?.[st];
    if (found !== undefined) sm = found;
    else unknownTier = true;
  }
  const c = costOf(r.spec, o.usage, sm, am);
  return {
    amount: c.amount,
    unpriced: false,
    basis: {
      rule: r.rule,
      model: r.model,
      source: r.source,
      catalog_version: version,
      tier: c.tier,
      service_tier: st,
      multiplier: sm === ONE_SCALED && am === ONE_SCALED ? '1' : scaledToDecimal(sm * am, 12),
      parts: c.parts,
      service_tier_multiplier: mult(sm),
      account_multiplier: mult(am),
      catalog_model: r.catalogModel,
      counts: c.counts,
      prices: c.prices,
      ...(unknownTier ? { unknown_service_tier: true as const } : {}),
    },
  };
}

/** The basis of an amount a router recorded (POST /v1/usage): keygate did not price it. */
export function recordedBasis(model: string | null, amountMicros: number): PriceBasis {
  return { rule: 'recorded', model, source: 'record', catalog_version: null, tier: null, service_tier: null, multiplier: '1', parts: { recorded: String(amountMicros) } };
}
