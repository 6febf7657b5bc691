/**
 * The endpoint catalog's vocabulary (docs/endpoints.md): every request path under a model entry has
 * exactly one class, and the catalog row says where its model is and which usage reader meters it.
 * Pure data types; each family's rows are in `<family>-endpoints.ts` (its module's `catalog`), and
 * src/core/endpoints/catalog.ts compiles them into a lookup.
 */
import type { Family } from './index.ts';

export const ENDPOINT_CLASSES = ['metered', 'free', 'owned', 'stateful', 'unbillable'] as const;
/**
 * - `metered`: model work whose usage keygate reads from the response: open.
 * - `free`: no model work and no provider-side state (model listings, token counting): open.
 * - `owned`: an object this account created through keygate, by id: open to the owning account only.
 * - `stateful`: provider-side objects not tracked as owned: open only with the account's own credential.
 * - `unbillable`: model work whose usage keygate never sees: open only to accounts billed `external`.
 */
export type EndpointClass = (typeof ENDPOINT_CLASSES)[number];

export const MODEL_PLACES = ['body', 'path', 'none'] as const;
/** Where the request names its model: the JSON or multipart body, a path segment, or nowhere. */
export type ModelFrom = (typeof MODEL_PLACES)[number];

/**
 * The usage readers of metering, by name (src/metering/usage.ts `EndpointKind`, and the readers the
 * metering side adds for images and transcriptions). null: the meter reads nothing.
 */
export const USAGE_READERS = ['chat', 'completions', 'embeddings', 'responses', 'messages', 'generate', 'stream-generate', 'images', 'transcription'] as const;
export type UsageReader = (typeof USAGE_READERS)[number];

/** What a request body may name that belongs to the provider (checked at the Check: `references.ts`). */
export type BodyRefs = Family;

export const ENDPOINT_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type EndpointMethod = (typeof ENDPOINT_METHODS)[number];

/**
 * One catalog row. `path` is a template of `/`-separated segments:
 * - a literal (`files`, `files:register`);
 * - `{id}`: one segment, an object id; `{model}`: one segment, the model; `{version}`: `v1`, `v1beta`, …;
 * - `{id}:verb` / `{model}:verb`: a Google custom method (`models/{model}:generateContent`);
 * - `{**}` (last only): any further segments, none included — a whole subtree of one class.
 */
export interface EndpointRow {
  readonly method: EndpointMethod;
  readonly path: string;
  readonly class: EndpointClass;
  readonly model: ModelFrom;
  readonly usage: UsageReader | null;
  /** `owned` rows: the provider whose owned records hold the `{id}` (`Schema.owned(provider, id)`). */
  readonly owner?: string;
  /** The body names provider objects by id (`previous_response_id`, file ids): checked for every key. */
  readonly refs?: BodyRefs;
}

export interface FamilyCatalog {
  readonly family: Family;
  /** Where the rows come from (SDK resource files, API references), for the docs. */
  readonly sources: readonly string[];
  readonly rows: readonly EndpointRow[];
}

/** Row builders, to keep the family tables one line per path. */
export function row(method: EndpointMethod, path: string, cls: EndpointClass, model: ModelFrom = 'none', usage: UsageReader | null = null, extra: Partial<Pick<EndpointRow, 'owner' | 'refs'>> = {}): EndpointRow {
  return Object.freeze({ method, path, class: cls, model, usage, ...extra });
}

/** The same class for each method of a path. */
export function rows(methods: readonly EndpointMethod[], path: string, cls: EndpointClass, model: ModelFrom = 'none'): EndpointRow[] {
  return methods.map((m) => row(m, path, cls, model));
}

export const CRUD: readonly EndpointMethod[] = ['GET', 'POST', 'DELETE'];
export const ALL_METHODS: readonly EndpointMethod[] = ENDPOINT_METHODS;

/**
 * Subtrees of one class appended after the explicit rows: `/{tree}` (GET, POST) and `/{tree}/{**}`
 * (every method), leaving out a method and template an explicit row already has.
 */
export function withTrees(explicit: readonly EndpointRow[], prefix: string, trees: readonly string[], cls: EndpointClass): EndpointRow[] {
  const seen = new Set(explicit.map((r) => `${r.method} ${r.path}`));
  const out = [...explicit];
  for (const t of trees) {
    for (const r of [...rows(['GET', 'POST'], `${prefix}/${t}`, cls), ...rows(ALL_METHODS, `${prefix}/${t}/{**}`, cls)]) {
      if (!seen.has(`${r.method} ${r.path}`)) out.push(r);
    }
  }
  return out;
}
