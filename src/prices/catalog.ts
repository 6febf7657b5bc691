/**
 * The price catalog: `@pydantic/genai-prices` (the version pinned in package.json; its data ships
 * inside the package, nothing is fetched at run time), converted exactly into keygate's prices.
 *
 * Conversion: each catalog number (US dollars per million tokens, or per thousand calls) is taken
 * as the decimal text it was written with and turned into integer micro-units by string arithmetic
 * (`decimal.ts`); a number with more than six decimals would not be exact and stops the load.
 * Price keys → classes: input_mtok → input, cache_read_mtok → cached_input, cache_write_mtok →
 * cache_write, cache_write_1h_mtok → cache_write_1h, output_mtok → output, input_audio_mtok →
 * input_audio, output_audio_mtok → output_audio, input_image_mtok → input_image, output_image_mtok
 * → output_image, web_searches_kcount → web_search. Other keys (audio hours, video tokens, cached
 * audio or image reads, file-search calls) are not read by keygate's meter: they are listed as
 * `ignored` per model, and those tokens are priced by their parent class. A model priced only by
 * keys keygate does not read (e.g. audio hours) is left out; a model with no prices is free.
 * Tiered prices (`{base, tiers: [{start, price}]}`) become whole-request tiers; prices that change
 * on a date (`start_date` constraints) or by time of day are chosen at the time of the booking.
 *
 * Names: the catalog's own match rules per provider (`equals`, `starts_with`, `ends_with`,
 * `contains`, `regex`, `and`, `or`, case-insensitive but for `regex`), then the same name with a
 * compact date (`-20241022`) written `-2024-10-22`, then the provider's fallback providers (Google
 * → Anthropic, for Claude on Vertex). Before matching, a name is lower-cased and a `models/` prefix
 * and a `provider/` prefix of the entry's own provider are removed. Results are cached per name
 * (bounded).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { findProvider, type MatchLogic, type ModelInfo, type ModelPrice, type Provider } from '@pydantic/genai-prices';
import { decimalToScaled, MICRO, numberText } from './decimal.ts';
import type { ClassPrices, PriceClass, PriceSpec, PriceTier } from './price.ts';

/** The providers keygate's families price from. */
export const CATALOG_PROVIDERS = ['openai', 'anthropic', 'google'] as const;
export type CatalogProvider = (typeof CATALOG_PROVIDERS)[number];

export const PRICE_KEYS: Readonly<Record<string, PriceClass>> = {
  input_mtok: 'input',
  cache_read_mtok: 'cached_input',
  cache_write_mtok: 'cache_write',
  cache_write_1h_mtok: 'cache_write_1h',
  output_mtok: 'output',
  input_audio_mtok: 'input_audio',
  output_audio_mtok: 'output_audio',
  input_image_mtok: 'input_image',
  output_image_mtok: 'output_image',
  web_searches_kcount: 'web_search',
};

interface Variant {
  readonly constraint: { type: 'start_date'; from: number } | { type: 'time_of_day'; start: number; end: number } | null;
  readonly spec: PriceSpec;
}

/** One model of the catalog, converted. */
export interface CatalogModel {
  readonly provider: string;
  readonly id: string;
  readonly name: string | null;
  /** Price keys of the catalog keygate does not read (their tokens take the parent class's price). */
  readonly ignored: readonly string[];
  readonly variants: readonly Variant[];
  readonly match: MatchLogic;
}

/** A catalog number as micro-units, exactly. */
export function catalogMicros(v: number, what: string): bigint {
  const m = decimalToScaled(numberText(v), MICRO);
  if (m === null) throw new Error(`price catalog: ${what} = ${v} is not an exact number of micro-units`);
  return m;
}

function convertPrices(p: ModelPrice, what: string): { spec: PriceSpec; ignored: string[]; priced: boolean } {
  const base: ClassPrices = {};
  const starts = new Set<number>();
  const tiered: [PriceClass, { base: number; tiers: { start: number; price: number }[] }][] = [];
  const ignored: string[] = [];
  for (const [key, v] of Object.entries(p)) {
    if (v === undefined) continue;
    const c = PRICE_KEYS[key];
    if (c === undefined) {
      ignored.push(key);
      continue;
    }
    if (typeof v === 'number') base[c] = catalogMicros(v, `${what}.${key}`);
    else {
      base[c] = catalogMicros(v.base, `${what}.${key}.base`);
      const tiers = [...v.tiers].sort((a, b) => a.start - b.start);
      for (const t of tiers) starts.add(t.start);
      tiered.push([c, { base: v.base, tiers }]);
    }
  }
  const priced = Object.keys(base).length > 0 || ignored.length === 0;
  const tiers: PriceTier[] = [...starts]
    .sort((a, b) => a - b)
    .map((above) => {
      const prices: ClassPrices = {};
      for (const [c, t] of tiered) {
        let price: number | null = null;
        for (const x of t.tiers) if (x.start <= above) price = x.price;
        if (price !== null) prices[c] = catalogMicros(price, `${what} tier ${above}`);
      }
      return { above, prices };
    });
  const spec: PriceSpec = { base: { ...base, input: base.input ?? 0n, output: base.output ?? 0n }, tiers, serviceTiers: {} };
  return { spec, ignored: ignored.sort(), priced };
}

function secondsOfDay(t: string): number {
  const m = /^(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|([+-])(\d{2}):(\d{2}))$/.exec(t);
  if (m === null) throw new Error(`price catalog: bad time of day ${t}`);
  const off = m[4] === 'Z' ? 0 : (m[5] === '+' ? 1 : -1) * (Number(m[6]) * 3600 + Number(m[7]) * 60);
  return (Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]) - off + 86400) % 86400;
}

function convertModel(provider: string, m: ModelInfo): CatalogModel | null {
  const list = Array.isArray(m.prices) ? m.prices : [{ prices: m.prices }];
  const variants: Variant[] = [];
  let ignored: string[] = [];
  let priced = false;
  for (const [i, c] of list.entries()) {
    const r = convertPrices(c.prices, `${provider}/${m.id}[${i}]`);
    ignored = r.ignored;
    priced ||= r.priced;
    const k = c.constraint as { type?: string; start_date?: string; start_time?: string; end_time?: string } | undefined;
    let constraint: Variant['constraint'] = null;
    if (k?.start_date !== undefined) constraint = { type: 'start_date', from: Date.parse(`${k.start_date}T00:00:00Z`) };
    else if (k?.start_time !== undefined && k.end_time !== undefined) constraint = { type: 'time_of_day', start: secondsOfDay(k.start_time), end: secondsOfDay(k.end_time) };
    variants.push({ constraint, spec: r.spec });
  }
  if (!priced) return null;
  return { provider, id: m.id, name: m.name ?? null, ignored, variants, match: m.match };
}

/** The price of a catalog model at a time (epoch ms): the last variant whose constraint holds, else the first. */
export function specAt(m: CatalogModel, at: number): PriceSpec {
  for (let i = m.variants.length - 1; i >= 0; i--) {
    const v = m.variants[i]!;
    const c = v.constraint;
    if (c === null) return v.spec;
    if (c.type === 'start_date') {
      if (at >= c.from) return v.spec;
    } else {
      const d = new Date(at);
      const s = d.getUTCHours() * 3600 + d.getUTCMinutes() * 60 + d.getUTCSeconds();
      if (c.end < c.start ? s >= c.start || s < c.end : s >= c.start && s < c.end) return v.spec;
    }
  }
  return m.variants[0]!.spec;
}

const regexes = new Map<string, RegExp>();

/** The catalog's match rule on a (lower-case) name. */
export function matches(l: MatchLogic, name: string): boolean {
  if ('or' in l) return l.or.some((x) => matches(x, name));
  if ('and' in l) return l.and.every((x) => matches(x, name));
  if ('equals' in l) return name === l.equals.toLowerCase();
  if ('starts_with' in l) return name.startsWith(l.starts_with.toLowerCase());
  if ('ends_with' in l) return name.endsWith(l.ends_with.toLowerCase());
  if ('contains' in l) return name.includes(l.contains.toLowerCase());
  if ('regex' in l) {
    let r = regexes.get(l.regex);
    if (r === undefined) regexes.set(l.regex, (r = new RegExp(l.regex)));
    return r.test(name);
  }
  return false;
}

const COMPACT_DATE = /(-)(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?=-|:|$)/g;

/** `-20241022` → `-2024-10-22` (real dates only). */
export function dashedDates(name: string): string {
  return name.replace(COMPACT_DATE, (all, dash: string, y: string, mo: string, d: string) => {
    const t = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d)));
    return t.getUTCFullYear() !== Number(y) || t.getUTCMonth() !== Number(mo) - 1 || t.getUTCDate() !== Number(d) ? all : `${dash}${y}-${mo}-${d}`;
  });
}

/** The most names whose match is remembered (then the memory starts again). */
const MAX_CACHED_NAMES = 10_000;

export class PriceCatalog {
  readonly version: string;
  readonly #models = new Map<string, CatalogModel[]>();
  readonly #fallback = new Map<string, readonly string[]>();
  readonly #cache = new Map<string, CatalogModel | null>();

  constructor(version: string, providers: readonly Provider[]) {
    this.version = version;
    for (const p of providers) {
      this.#models.set(p.id, p.models.map((m) => convertModel(p.id, m)).filter((m): m is CatalogModel => m !== null));
      this.#fallback.set(p.id, p.fallback_model_providers ?? []);
    }
  }

  /** The catalog of the installed `@pydantic/genai-prices` (its three providers keygate serves). */
  static load(): PriceCatalog {
    const providers = CATALOG_PROVIDERS.map((id) => {
      const p = findProvider({ providerId: id });
      if (p === undefined || p.id !== id) throw new Error(`price catalog: provider ${id} missing from @pydantic/genai-prices`);
      return p;
    });
    return new PriceCatalog(catalogVersion(), providers);
  }

  /** Every model of a provider (or of all), in the catalog's order. */
  models(provider?: string): CatalogModel[] {
    if (provider !== undefined) return [...(this.#models.get(provider) ?? [])];
    return [...this.#models.values()].flat();
  }

  /** A catalog model by its id (`gpt-4o`) under a provider. */
  byId(provider: string, id: string): CatalogModel | null {
    return this.#models.get(provider)?.find((m) => m.id === id) ?? null;
  }

  /** The catalog model a name served by a provider's entry resolves to, or null. */
  match(provider: string, name: string): CatalogModel | null {
    const key = `${provider}\u0000${name}`;
    const hit = this.#cache.get(key);
    if (hit !== undefined) return hit;
    let n = name.trim().toLowerCase();
    if (n.startsWith(`${provider}/`)) n = n.slice(provider.length + 1);
    if (n.startsWith('models/')) n = n.slice(7);
    const r = this.#find(provider, n, true) ?? (dashedDates(n) !== n ? this.#find(provider, dashedDates(n), true) : null);
    if (this.#cache.size >= MAX_CACHED_NAMES) this.#cache.clear();
    this.#cache.set(key, r);
    return r;
  }

  #find(provider: string, n: string, withFallback: boolean): CatalogModel | null {
    const found = this.#models.get(provider)?.find((m) => matches(m.match, n));
    if (found !== undefined) return found;
    if (withFallback) for (const f of this.#fallback.get(provider) ?? []) {
      const r = this.#find(f, n, false);
      if (r !== null) return r;
    }
    return null;
  }
}

/** The installed `@pydantic/genai-prices` version (its package.json). */
export function catalogVersion(): string {
  const require = createRequire(import.meta.url);
  const main = require.resolve('@pydantic/genai-prices');
  const pkg = JSON.parse(readFileSync(join(dirname(main), '..', 'package.json'), 'utf8')) as { name?: string; version?: string };
  return `${pkg.name ?? '@pydantic/genai-prices'}@${pkg.version ?? 'unknown'}`;
}
