/**
 * The prices as the console shows them beside the operator's table (docs/metering.md, "The price
 * catalog"): the catalog's models converted (`prices list --source catalog`), the catalog in use
 * (`prices catalog`), and how one name resolves and what it costs (`prices show MODEL`). Pure: the
 * table and the catalog are given.
 */
import { FAMILIES, type Family } from '../core/families/index.ts';
import { matches, specAt, type CatalogModel, type PriceCatalog } from '../prices/catalog.ts';
import { scaledToDecimal } from '../prices/decimal.ts';
import { classPrice, DEFAULT_SERVICE_TIERS, PRICE_CLASSES, type PriceSpec } from '../prices/price.ts';
import { resolvePrice } from '../prices/resolve.ts';
import { findProvider } from '@pydantic/genai-prices';
import { ConsoleError } from './errors.ts';
import type { PriceEntry } from './prices.ts';
import { encodePrice, PriceTable } from '../schema/prices.ts';

/** A price's every class (its own or its parent's: what is charged), micro-units; web_search per thousand calls. */
export function effectivePrices(spec: PriceSpec, tier: PriceSpec['tiers'][number] | null = null): Record<string, number> {
  return Object.fromEntries(PRICE_CLASSES.map((c) => [c, Number(classPrice(spec, tier, c))]));
}

export interface SpecJson {
  /** Every class at what it is charged (micro-units per million tokens; web_search per thousand calls). */
  prices: Record<string, number>;
  tiers: { above: number; prices: Record<string, number> }[];
  service_tiers: Record<string, string>;
}

export function specJson(spec: PriceSpec, provider: string | null): SpecJson {
  const st: Record<string, string> = {};
  for (const [k, v] of Object.entries(provider !== null ? (DEFAULT_SERVICE_TIERS[provider] ?? {}) : {})) st[k] = scaledToDecimal(v, 6);
  for (const [k, v] of Object.entries(spec.serviceTiers)) st[k] = scaledToDecimal(v, 6);
  return { prices: effectivePrices(spec), tiers: spec.tiers.map((t) => ({ above: t.above, prices: effectivePrices(spec, t) })), service_tiers: st };
}

export interface CatalogEntryJson extends SpecJson {
  model: string;
  name: string | null;
  source: 'catalog';
  /** Catalog price keys keygate does not read (their tokens take the parent class's price). */
  ignored: string[];
}

/** Every catalog model of keygate's providers, priced now. */
export function catalogEntries(catalog: PriceCatalog, at = Date.now()): CatalogEntryJson[] {
  return catalog.models().map((m) => ({ model: `${m.provider}/${m.id}`, name: m.name, source: 'catalog' as const, ignored: [...m.ignored], ...specJson(specAt(m, at), m.provider) }));
}

export interface CatalogInfo {
  enabled: boolean;
  version: string | null;
  providers: string[];
  models: number;
}

export function catalogInfo(catalog: PriceCatalog | null): CatalogInfo {
  return { enabled: catalog !== null, version: catalog?.version ?? null, providers: catalog === null ? [] : [...FAMILIES], models: catalog?.models().length ?? 0 };
}

export interface PriceExplanation {
  /** The name asked about. */
  model: string;
  provider: string;
  /** null: unpriced (books 0). */
  rule: string | null;
  /** The name that prices it (table field, or provider/id of the catalog model). */
  priced_by: string | null;
  source: 'table' | 'catalog' | null;
  /** The catalog model the name resolves to (provider/id), or null. */
  catalog_model: string | null;
  catalog_version: string | null;
  price: SpecJson | null;
}

/** The providers a name is tried under: the one given, a `provider/` prefix, the catalog's provider rules, else all. */
function providersOf(model: string, provider: string | undefined): Family[] {
  if (provider !== undefined) {
    if (!(FAMILIES as readonly string[]).includes(provider)) throw new ConsoleError('INVALID_INPUT', `provider must be one of ${FAMILIES.join(', ')}`);
    return [provider as Family];
  }
  const slash = model.indexOf('/');
  if (slash > 0 && (FAMILIES as readonly string[]).includes(model.slice(0, slash).toLowerCase())) return [model.slice(0, slash).toLowerCase() as Family];
  const n = model.toLowerCase();
  const by = FAMILIES.filter((f) => {
    const m = findProvider({ providerId: f })?.model_match;
    return m !== undefined && matches(m, n);
  });
  return by.length > 0 ? by : [...FAMILIES];
}

/** How `model` resolves (section 16's order) and its price now. */
export function explainPrice(entries: readonly PriceEntry[], catalog: PriceCatalog | null, model: string, provider?: string, at = Date.now()): PriceExplanation {
  if (typeof model !== 'string' || model.length === 0 || model.length > 256 || !/^[\x21-\x7e]+$/.test(model)) throw new ConsoleError('INVALID_INPUT', 'model must be 1-256 printable characters without spaces');
  const table = PriceTable.fromHash(Object.fromEntries(entries.map((e) => [e.model, encodePrice(e)])));
  const tries = providersOf(model, provider);
  let found: PriceExplanation | null = null;
  for (const p of tries) {
    const bare = model.toLowerCase().startsWith(`${p}/`) ? model.slice(p.length + 1) : model;
    const r = resolvePrice(table, catalog, p, bare, null, at);
    const cm: CatalogModel | null = catalog?.match(p, bare) ?? null;
    const e: PriceExplanation = {
      model,
      provider: p,
      rule: r?.rule ?? null,
      priced_by: r?.model ?? null,
      source: r?.source ?? null,
      catalog_model: cm === null ? null : `${cm.provider}/${cm.id}`,
      catalog_version: catalog?.version ?? null,
      price: r === null ? null : specJson(r.spec, p),
    };
    if (r !== null) return e;
    found ??= e;
  }
  return found!;
}
