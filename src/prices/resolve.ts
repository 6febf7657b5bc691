/**
 * Which price a booking takes (docs/metering.md, "Which price"), in order:
 *   1. `table`: the operator's table as named: the name, then (bare) `provider/name`;
 *   2. the catalog's model for that name (its match rules): the table's entry for that model wins
 *      (`table-catalog-model`): the model's id (`id`, then `provider/id`), else a table name that
 *      itself resolves to that model (`claude-3-5-sonnet-latest` set, `claude-3-5-sonnet-20241022`
 *      answered; the first such name in sorted order); else the catalog's price (`catalog`);
 *   3. `provider-wildcard` (`provider/*`), then `wildcard` (`*`) of the table;
 *   4. the requested model (when the response's name found nothing in 1–2): 1 and 2 again with it
 *      (`requested-table`, `requested-table-catalog-model`, `requested-catalog`);
 *   5. unpriced.
 * With the catalog turned off, step 2 and its requested form are skipped.
 */
import { dashedDates, matches, specAt, type CatalogModel, type PriceCatalog } from './catalog.ts';
import type { PriceSpec } from './price.ts';

export type PriceRule =
  | 'table'
  | 'table-catalog-model'
  | 'catalog'
  | 'provider-wildcard'
  | 'wildcard'
  | 'requested-table'
  | 'requested-table-catalog-model'
  | 'requested-catalog';

/** The operator's table, by lower-case field. */
export interface TableLookup {
  get(field: string): PriceSpec | undefined;
  /** Every field (lower case). */
  fields(): Iterable<string>;
  /** Changes whenever an entry does; absent: resolutions are not remembered for this table. */
  readonly version?: number;
}

/** Per table and catalog: its fields sorted, and catalog model (`provider/id`) → the first table name that resolves to it (or none). */
const aliases = new WeakMap<TableLookup, { catalog: PriceCatalog; fields: string[]; map: Map<string, string | null> }>();

/**
 * The first table name (sorted) that itself resolves to catalog model `cm`, or null. Only names
 * that pass `cm`'s own match rule are resolved (one rule per name, not the whole catalog), and the
 * answer is kept per table and model: a table of 10 000 names costs one pass per catalog model seen.
 */
function aliasOf(table: TableLookup, catalog: PriceCatalog, cm: CatalogModel): string | null {
  let a = aliases.get(table);
  if (a === undefined || a.catalog !== catalog) {
    const fields = [...table.fields()].filter((f) => f !== '*' && !f.endsWith('/*')).sort();
    aliases.set(table, (a = { catalog, fields, map: new Map() }));
  }
  const key = `${cm.provider}/${cm.id}`;
  const hit = a.map.get(key);
  if (hit !== undefined) return hit;
  let found: string | null = null;
  for (const f of a.fields) {
    const slash = f.indexOf('/');
    const p = slash > 0 ? f.slice(0, slash) : cm.provider;
    if (p !== cm.provider) continue;
    let n = slash > 0 ? f.slice(slash + 1) : f;
    if (n.startsWith('models/')) n = n.slice(7);
    if (!matches(cm.match, n) && !matches(cm.match, dashedDates(n))) continue;
    if (catalog.match(p, n) === cm) {
      found = f;
      break;
    }
  }
  a.map.set(key, found);
  return found;
}

export interface Resolution {
  readonly spec: PriceSpec;
  readonly rule: PriceRule;
  /** The name that priced it: the table's field, or `provider/id` of the catalog model. */
  readonly model: string;
  readonly source: 'table' | 'catalog';
  /** The catalog model the name resolved to, when it did. */
  readonly catalogModel: string | null;
}

function named(table: TableLookup, provider: string, name: string): { spec: PriceSpec; field: string } | null {
  const m = name.toLowerCase();
  const tries = m.includes('/') ? [m] : [m, `${provider}/${m}`];
  for (const t of tries) {
    const s = table.get(t);
    if (s !== undefined) return { spec: s, field: t };
  }
  return null;
}

function byName(table: TableLookup, catalog: PriceCatalog | null, provider: string, name: string, at: number, requested: boolean): Resolution | null {
  const t = named(table, provider, name);
  const cm: CatalogModel | null = catalog?.match(provider, name) ?? null;
  const cmName = cm === null ? null : `${cm.provider}/${cm.id}`;
  if (t !== null) return { spec: t.spec, rule: requested ? 'requested-table' : 'table', model: t.field, source: 'table', catalogModel: cmName };
  if (cm === null) return null;
  let tc = named(table, cm.provider, cm.id);
  if (tc === null && catalog !== null) {
    const alias = aliasOf(table, catalog, cm);
    if (alias !== null) tc = { spec: table.get(alias)!, field: alias };
  }
  if (tc !== null) return { spec: tc.spec, rule: requested ? 'requested-table-catalog-model' : 'table-catalog-model', model: tc.field, source: 'table', catalogModel: cmName };
  const r: Resolution = { spec: specAt(cm, at), rule: requested ? 'requested-catalog' : 'catalog', model: cmName!, source: 'catalog', catalogModel: cmName };
  if (cm.variants.length > 1) timed.add(r);
  return r;
}

/** Resolutions whose price depends on the time (a catalog model with dated or time-of-day variants): never remembered. */
const timed = new WeakSet<Resolution>();

/** The most (provider, model, requested) resolutions remembered per table (then the memory starts again). */
const MAX_RESOLVED = 10_000;

/** Per table: its version and catalog when remembered, and (provider, model, requested) → the resolution. */
const resolved = new WeakMap<TableLookup, { version: number; catalog: PriceCatalog | null; map: Map<string, Resolution | null> }>();

/**
 * The price of a booking: `model` as the response named it (null: unknown), `requested` the model
 * the request asked for (null: not seen), `provider` the entry's family, `at` the booking time.
 */
export function resolvePrice(table: TableLookup, catalog: PriceCatalog | null, provider: string, model: string | null, requested: string | null, at: number): Resolution | null {
  const version = table.version;
  if (version === undefined) return resolveNow(table, catalog, provider, model, requested, at);
  let c = resolved.get(table);
  if (c === undefined || c.version !== version || c.catalog !== catalog) resolved.set(table, (c = { version, catalog, map: new Map() }));
  const key = `${provider}\u0000${nameKey(model)}${nameKey(requested)}`;
  const hit = c.map.get(key);
  if (hit !== undefined) return hit;
  const r = resolveNow(table, catalog, provider, model, requested, at);
  if (r === null || !timed.has(r)) {
    if (c.map.size >= MAX_RESOLVED) c.map.clear();
    c.map.set(key, r);
  }
  return r;
}

/** A name in a resolution's key: its length first, so that no two (model, requested) pairs share a key; null: `-`. */
const nameKey = (n: string | null) => (n === null ? '-' : `${n.length}:${n}`);

function resolveNow(table: TableLookup, catalog: PriceCatalog | null, provider: string, model: string | null, requested: string | null, at: number): Resolution | null {
  if (model !== null && model !== '') {
    const r = byName(table, catalog, provider, model, at, false);
    if (r !== null) return r;
  }
  for (const [field, rule] of [[`${provider}/*`, 'provider-wildcard'], ['*', 'wildcard']] as const) {
    const s = table.get(field);
    if (s !== undefined) return { spec: s, rule, model: field, source: 'table', catalogModel: null };
  }
  if (requested !== null && requested !== '' && requested.toLowerCase() !== model?.toLowerCase()) return byName(table, catalog, provider, requested, at, true);
  return null;
}
