/**
 * Known endpoints for restricted keys (docs/models.md, "Known endpoints"): the positive rule.
 *
 * A restricted key passes only on an endpoint of its entry's table, with the model read from where
 * that endpoint carries it. Each table row is a path template matched against the end of the
 * request path; the segments before it (an operator prefix such as `/gemini` or `/v1`) must be
 * plain and must not be a segment that names a model or a model-less API (`models`, `deployments`,
 * `engines`, `publishers`, `files`, `batches`, …). Operators add rows with KEYGATE_MODEL_ENDPOINTS
 * (`compileModelEndpoints`); theirs are tried first.
 *
 * Template segments: a literal; `{model}` (optionally `{model}:literal`): the model, one segment;
 * `{model+}`: the model as one or more segments (OpenAI/Anthropic model resources, `%2F` decoded);
 * `{version}`: `v1`, `v1beta`, …; `{*}`: any plain segment (an id).
 */
import { FAMILIES, FAMILY_MODULES, isFamily, type Family } from '../families/index.ts';
import type { ModelPlace } from '../families/types.ts';

export type { ModelPlace } from '../families/types.ts';

type Seg =
  | { readonly t: 'lit'; readonly v: string }
  | { readonly t: 'model'; readonly suffix: string | null }
  | { readonly t: 'rest' }
  | { readonly t: 'version' }
  | { readonly t: 'any' };

export interface Endpoint {
  readonly family: Family;
  readonly methods: ReadonlySet<string>;
  readonly segs: readonly Seg[];
  readonly place: ModelPlace;
  /** The template as written (for docs and errors). */
  readonly template: string;
}

/** A compiled set of operator rows (KEYGATE_MODEL_ENDPOINTS). */
export type EndpointTable = readonly Endpoint[] & {
  /**
   * The operator's meaning of a bare model name (no `provider/`) per entry family
   * (KEYGATE_BARE_MODEL_PROVIDER, off by default): at an entry of a listed family, `gpt-4o-mini`
   * is also read as `{provider}/gpt-4o-mini`. Carried with the endpoint table because both are the
   * operator's rules for reading a request's model.
   */
  readonly bareProviders?: ReadonlyMap<Family, string>;
};

/** The endpoint table with the operator's bare-name providers (a new array; the table is unchanged). */
export function withBareProviders(table: EndpointTable, providers: ReadonlyMap<Family, string>): EndpointTable {
  if (providers.size === 0) return table;
  return Object.assign([...table], { bareProviders: providers });
}

const PROVIDER_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/**
 * `openai=openai,google=vertex`: entry family = provider. An empty string is none (the default:
 * a router behind the OpenAI entry may send a bare name to any provider, so only the operator may say).
 */
export function parseBareProviders(spec: string): Map<Family, string> {
  const out = new Map<Family, string>();
  for (const item of spec.split(',').map((x) => x.trim()).filter(Boolean)) {
    const eq = item.indexOf('=');
    const family = item.slice(0, eq).trim();
    const provider = item.slice(eq + 1).trim().toLowerCase();
    if (eq <= 0 || !(FAMILIES as readonly string[]).includes(family) || !PROVIDER_NAME.test(provider)) {
      throw new Error(`"${item}" is not family=provider (family: openai, anthropic or google; provider: letters, digits, . _ -)`);
    }
    if (out.has(family as Family)) throw new Error(`"${family}" is given twice`);
    out.set(family as Family, provider);
  }
  return out;
}

/** The canonical form of a bare-name mapping: `family=provider` in FAMILIES order, comma-separated ('' = none). */
export function formatBareProviders(providers: ReadonlyMap<Family, string>): string {
  return FAMILIES.filter((f) => providers.has(f)).map((f) => `${f}=${providers.get(f)!}`).join(',');
}

export type EndpointMatch =
  | { readonly kind: 'endpoint'; readonly endpoint: Endpoint; /** the `{model}` segment, for `path` */ readonly model: string | null }
  | { readonly kind: 'no-model' }
  | { readonly kind: 'unknown' };

const VERSION = /^v\d+(?:(?:alpha|beta)\d*)?$/;
/** A prefix segment or template literal: plain characters only (no `:`, `@`, `%`, `,`). */
const PLAIN = /^[A-Za-z0-9._~-]+$/;
/** Segments that name a model in some router's path: never part of an operator prefix. */
const MODEL_WORDS = new Set(['models', 'deployments', 'engines', 'publishers', 'tunedmodels']);
/** Segments of APIs that take no model (files, batches, fine-tuning, assistants, …). */
const NO_MODEL_WORDS = new Set([
  'files',
  'batches',
  'fine_tuning',
  'fine-tunes',
  'uploads',
  'vector_stores',
  'assistants',
  'threads',
  'containers',
  'cachedcontents',
]);

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);

function compileSeg(s: string, builtin: boolean): Seg | string {
  if (s === '{model}') return { t: 'model', suffix: null };
  if (s.startsWith('{model}:')) {
    const suffix = s.slice('{model}:'.length);
    return suffix === '{*}' || /^[A-Za-z][A-Za-z0-9]*$/.test(suffix) ? { t: 'model', suffix } : `"${s}" must be {model}:method with a plain method name or {*}`;
  }
  if (s === '{model+}') return { t: 'rest' };
  if (s === '{version}') return { t: 'version' };
  if (s === '{*}') return { t: 'any' };
  if (s === '' || s === '.' || s === '..') return 'has an empty, "." or ".." segment';
  if (!PLAIN.test(s)) return `segment "${s}" may only have letters, digits and . _ ~ - (or be {model}, {version}, {*})`;
  const lower = s.toLowerCase();
  if (builtin) return { t: 'lit', v: s };
  if (MODEL_WORDS.has(lower)) return `segment "${s}" names a model in a form keygate reads itself`;
  if (NO_MODEL_WORDS.has(lower)) return `segment "${s}" belongs to an API that takes no model`;
  return { t: 'lit', v: s };
}

/** One row; throws Error with a reason. `template` starts with `/`; `place` is given for built-in rows only. */
function endpoint(family: Family, methods: readonly string[], template: string, place?: ModelPlace): Endpoint {
  const builtin = place !== undefined;
  if (!template.startsWith('/')) throw new Error(`"${template}" must start with "/"`);
  const segs: Seg[] = [];
  for (const raw of template.slice(1).split('/')) {
    const s = compileSeg(raw, builtin);
    if (typeof s === 'string') throw new Error(`"${template}" ${s}`);
    segs.push(s);
  }
  const models = segs.filter((s) => s.t === 'model' || s.t === 'rest').length;
  if (models > 1) throw new Error(`"${template}" names {model} more than once`);
  if (segs.some((s, i) => s.t === 'rest' && i !== segs.length - 1)) throw new Error(`"${template}": {model+} must be last`);
  return { family, methods: new Set(methods), segs, place: place ?? (models === 1 ? 'path' : 'body'), template };
}

/** Built-in tables: each family's known endpoints (its module's `model.endpoints`, in match order: path forms before body forms). */
export const BUILTIN_ENDPOINTS: readonly Endpoint[] = Object.freeze(FAMILY_MODULES.flatMap((f) => f.model.endpoints.map((e) => endpoint(f.name, e.methods, e.template, e.place))));

/**
 * The operator's rows: `family:METHOD:/template`, comma-separated, e.g.
 * `openai:POST:/custom/{model}/run,anthropic:POST:/v1/messages/stream`. Throws Error with a reason.
 */
export function compileModelEndpoints(spec: string): EndpointTable {
  const out: Endpoint[] = [];
  for (const item of spec.split(',').map((x) => x.trim()).filter(Boolean)) {
    const first = item.indexOf(':');
    const second = item.indexOf(':', first + 1);
    if (first <= 0 || second <= first) throw new Error(`"${item}" is not family:METHOD:/path`);
    const family = item.slice(0, first);
    const method = item.slice(first + 1, second).toUpperCase();
    const template = item.slice(second + 1);
    if (!isFamily(family)) throw new Error(`"${item}": family must be openai, anthropic or google`);
    if (!METHODS.has(method)) throw new Error(`"${item}": method must be one of ${[...METHODS].join(', ')}`);
    out.push(endpoint(family, [method], template));
  }
  return Object.freeze(out);
}

function segMatches(seg: Seg, s: string): boolean {
  switch (seg.t) {
    case 'lit':
      return seg.v === s;
    case 'version':
      return VERSION.test(s);
    case 'any':
      return PLAIN.test(s);
    case 'model': {
      if (seg.suffix === null) return true;
      if (seg.suffix === '{*}') return s.includes(':'); // `{model}:{*}`: the model and any method
      return s.endsWith(`:${seg.suffix}`);
    }
    case 'rest':
      return true;
  }
}

function plainPrefix(segs: readonly string[], end: number): boolean {
  for (let i = 0; i < end; i++) {
    const s = segs[i]!;
    if (!PLAIN.test(s) || s === '.' || s === '..') return false;
    const lower = s.toLowerCase();
    if (MODEL_WORDS.has(lower) || NO_MODEL_WORDS.has(lower)) return false;
  }
  return true;
}

function matchAt(e: Endpoint, segs: readonly string[], start: number): string | null | false {
  let model: string | null = null;
  for (let j = 0; j < e.segs.length; j++) {
    const seg = e.segs[j]!;
    if (seg.t === 'rest') return start + j < segs.length ? segs.slice(start + j).join('/') : false;
    const s = segs[start + j];
    if (s === undefined || !segMatches(seg, s)) return false;
    if (seg.t === 'model') model = seg.suffix === null ? s : s.slice(0, s.lastIndexOf(':'));
  }
  return start + e.segs.length === segs.length ? model : false;
}

function tryRow(e: Endpoint, segs: readonly string[]): EndpointMatch | null {
  const rest = e.segs[e.segs.length - 1]!.t === 'rest';
  const starts = rest ? Array.from({ length: segs.length }, (_, i) => i) : [segs.length - e.segs.length];
  for (const start of starts) {
    if (start < 0 || !plainPrefix(segs, start)) continue;
    const m = matchAt(e, segs, start);
    if (m !== false) return { kind: 'endpoint', endpoint: e, model: m };
  }
  return null;
}

/**
 * Which endpoint `pathOnly` (no query, starting with `/`, already checked to have no empty, `.`
 * or `..` segments) is for a request of `method` at an entry of `family`.
 */
export function matchEndpoint(family: Family, method: string, path: string, extra: EndpointTable = []): EndpointMatch {
  const segs = path.split('/').slice(1);
  const m = method.toUpperCase();
  for (const table of [extra, BUILTIN_ENDPOINTS]) {
    for (const e of table) {
      if (e.family !== family || !e.methods.has(m)) continue;
      const hit = tryRow(e, segs);
      if (hit !== null) return hit;
    }
  }
  const last = segs[segs.length - 1]?.toLowerCase();
  if (last === 'models' || segs.some((s) => NO_MODEL_WORDS.has(s.toLowerCase()))) return { kind: 'no-model' };
  return { kind: 'unknown' };
}
