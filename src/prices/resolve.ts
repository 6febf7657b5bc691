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
import { CATALOG_PROVIDERS, specAt, type CatalogModel, type PriceCatalog } from './catalog.ts';
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
}

/** Per table and catalog: catalog model (`provider/id`) → the first table name (sorted) that resolves to it. */
const aliases = new WeakMap<TableLookup, { catalog: PriceCatalog; map: Map<string, string> }>();

function aliasOf(table: TableLookup, catalog: PriceCatalog, cm: CatalogModel): string | null {
  let a = aliases.get(table);
  if (a === undefined || a.catalog !== catalog) {
    const map = new Map<string, string>();
    for (const f of [...table.fields()].sort()) {
      if (f === '*' || f.endsWith('/*')) continue;
      const slash = f.indexOf('/');
      const tries: [string, string][] = slash > 0 ? [[f.slice(0, slash), f.slice(slash + 1)]] : CATALOG_PROVIDERS.map((p) => [p, f]);
      for (const [p, n] of tries) {
        const m = catalog.match(p, n);
        if (m !== null && !map.has(`${m.provider}/${m.id}`)) map.set(`${m.provider}/${m.id}`, f);
      }
    }
    aliases.set(table, (a = { catalog, map }));
  }
  return a.map.get(`${cm.provider}/${cm.id}`) ?? null;
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
  return { spec: specAt(cm, at), rule: requested ? 'requested-catalog' : 'catalog', model: cmName!, source: 'catalog', catalogModel: cmName };
}

/**
 * The price of a booking: `model` as the response named it (null: unknown), `requested` the model
 * the request asked for (null: not seen), `provider` the entry's family, `at` the booking time.
 */
export function resolvePrice(table: TableLookup, catalog: PriceCatalog | null, provider: string, model: string | null, requested: string | null, at: number): Resolution | null {
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
