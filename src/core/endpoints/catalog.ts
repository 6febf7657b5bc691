/**
 * The endpoint catalog compiled for the Check (docs/endpoints.md): the family modules' rows
 * (src/core/families/<family>-endpoints.ts) and the
 * operator's (`KEYGATE_ENDPOINTS`) in one trie of path segments per family, so classifying a request
 * is one walk down its path (a map lookup per segment; a parameter, `{version}`, `{x}:verb` or `{**}`
 * child tried only when the literal does not lead to a row) — never a scan of the rows.
 *
 * Paths are matched as Envoy sends them with the shipped envoy.yaml (`/openai/v1/files`: the entry
 * prefix is the family's name as the first segment, or an operator's `KEYGATE_PATH_PREFIXES` prefix)
 * and as bare provider paths (`/v1/files`). A path with an empty, `.` or `..` segment, a character
 * outside a small ASCII set, or a `%` (except in the model of a free model-info path) is unknown.
 */
import { FAMILIES, FAMILY_MODULES, pathOnly, type Family, type PrefixRule } from '../families/index.ts';
import type { EndpointRow, FamilyCatalog } from '../families/endpoint-rows.ts';

/** The family modules' catalogs, in the registry's order. */
export const BUILTIN_CATALOGS: readonly FamilyCatalog[] = FAMILY_MODULES.map((f) => f.catalog);

/** A row the trie holds: the row, and where its `{id}` and `{model}` are among the path's segments. */
export interface CompiledRow {
  readonly family: Family;
  readonly row: EndpointRow;
  /** Index (into the matched segments) of the last `{id}`, or -1. */
  readonly idAt: number;
  /** Index of `{model}`, or -1. */
  readonly modelAt: number;
  /** From the operator's file. */
  readonly operator: boolean;
}

export interface Classified {
  readonly entry: CompiledRow;
  /** The object id (`{id}`) of an `owned` row, else null. */
  readonly id: string | null;
}

interface Node {
  readonly lit: Map<string, Node>;
  version: Node | null;
  param: Node | null;
  /** `{x}:verb` children by verb. */
  verbs: Map<string, Node> | null;
  /** Rows ending here, by method. */
  here: Map<string, CompiledRow> | null;
  /** `{**}` rows ending here, by method. */
  rest: Map<string, CompiledRow> | null;
}

/** Memo bounds: 3 families × 6 methods × 1024 paths of at most 256 characters (under 5 MB). */
const MEMO_PATHS = 1024;
const MEMO_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
const MEMO_MAX_PATH = 256;

const node = (): Node => ({ lit: new Map(), version: null, param: null, verbs: null, here: null, rest: null });

const VERSION = /^v\d+(?:(?:alpha|beta)\d*)?$/;
const RAW_SEGMENT = /^[A-Za-z0-9._~:@+=,%-]+$/;
const TEMPLATE_LITERAL = /^[A-Za-z0-9._~:@+=,-]+$/;
const PARAM = /^\{(id|model)\}$/;
const PARAM_VERB = /^\{(id|model)\}:([A-Za-z][A-Za-z0-9]*)$/;

/** Why `template` is not a valid path template, or undefined. */
export function templateError(template: string): string | undefined {
  if (!template.startsWith('/')) return 'must start with "/"';
  const segs = template.slice(1).split('/');
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i]!;
    if (s === '{**}') {
      if (i !== segs.length - 1) return '{**} must be the last segment';
      continue;
    }
    if (s === '{version}' || PARAM.test(s) || PARAM_VERB.test(s)) continue;
    if (s === '' || s === '.' || s === '..') return 'has an empty, "." or ".." segment';
    if (s.includes('{') || !TEMPLATE_LITERAL.test(s)) return `segment "${s}" is not a literal (letters, digits, . _ ~ : @ + = , -) nor {id}, {model}, {version}, {id}:verb, {model}:verb or {**}`;
  }
  return undefined;
}

export class EndpointCatalog {
  readonly #roots = new Map<Family, Node>();
  readonly #rows: CompiledRow[] = [];
  readonly #prefixes: readonly PrefixRule[];
  /** Answers by family, method and path (with query): the hot path's few paths cost one lookup. Bounded. */
  readonly #memo = new Map<Family, Map<string, Map<string, Classified | null>>>();

  /** Builtin rows, then the operator's (which replace a builtin row of the same method and template). Throws on a bad template. */
  constructor(operator: readonly (EndpointRow & { readonly family: Family })[] = [], prefixes: readonly PrefixRule[] = []) {
    this.#prefixes = prefixes;
    for (const f of FAMILIES) this.#roots.set(f, node());
    for (const c of BUILTIN_CATALOGS) for (const r of c.rows) this.#add(c.family, r, false);
    for (const r of operator) this.#add(r.family, r, true);
  }

  /** Every row in force (builtin rows an operator row replaced are left out), for docs and tests. */
  rows(): readonly CompiledRow[] {
    return this.#rows;
  }

  #add(family: Family, r: EndpointRow, operator: boolean): void {
    const err = templateError(r.path);
    if (err !== undefined) throw new Error(`${family} ${r.method} ${r.path}: ${err}`);
    let n = this.#roots.get(family)!;
    let idAt = -1;
    let modelAt = -1;
    const segs = r.path.slice(1).split('/');
    let restRow = false;
    segs.forEach((s, i) => {
      if (s === '{**}') {
        restRow = true;
        return;
      }
      const pv = PARAM_VERB.exec(s);
      const p = pv ?? PARAM.exec(s);
      if (p) {
        if (p[1] === 'id') idAt = i;
        else modelAt = i;
      }
      if (pv) {
        n.verbs ??= new Map();
        let next = n.verbs.get(pv[2]!);
        if (!next) n.verbs.set(pv[2]!, (next = node()));
        n = next;
      } else if (p) n = n.param ??= node();
      else if (s === '{version}') n = n.version ??= node();
      else {
        let next = n.lit.get(s);
        if (!next) n.lit.set(s, (next = node()));
        n = next;
      }
    });
    const table = restRow ? (n.rest ??= new Map()) : (n.here ??= new Map());
    const compiled: CompiledRow = Object.freeze({ family, row: r, idAt, modelAt, operator });
    const before = table.get(r.method);
    if (before !== undefined) {
      if (!operator) throw new Error(`${family} ${r.method} ${r.path}: listed twice in the builtin catalog`);
      this.#rows.splice(this.#rows.indexOf(before), 1);
    }
    table.set(r.method, compiled);
    this.#rows.push(compiled);
  }

  /**
   * The row for a request of `method` to `path` (with query) at an entry of `family`, or null
   * (unknown: refused). The object id of an `owned` row comes with it.
   */
  classify(family: Family, method: string, path: string): Classified | null {
    let byMethod = this.#memo.get(family);
    if (byMethod === undefined) this.#memo.set(family, (byMethod = new Map()));
    let byPath = byMethod.get(method);
    if (byPath === undefined) {
      if (!MEMO_METHODS.has(method)) return this.#classify(family, method, path);
      byMethod.set(method, (byPath = new Map()));
    }
    const hit = byPath.get(path);
    if (hit !== undefined) return hit;
    const c = this.#classify(family, method, path);
    // Paths with ids (`/v1/responses/{id}`) are many: the memo starts over rather than grow.
    if (byPath.size >= MEMO_PATHS) byPath.clear();
    if (path.length <= MEMO_MAX_PATH) byPath.set(path, c);
    return c;
  }

  #classify(family: Family, method: string, path: string): Classified | null {
    const p = pathOnly(path);
    if (p.length < 2 || p.charCodeAt(0) !== 0x2f) return null;
    const segs = p.slice(1).split('/');
    for (const s of segs) if (s === '' || s === '.' || s === '..' || !RAW_SEGMENT.test(s)) return null;
    const m = method === 'HEAD' ? 'GET' : method.toUpperCase();
    const root = this.#roots.get(family)!;
    const hit = found(root, segs, 0, m);
    if (hit !== null) return result(hit, segs, 0);
    const skip = this.#entrySegments(family, p, segs);
    if (skip > 0 && skip < segs.length) {
      const h = found(root, segs, skip, m);
      if (h !== null) return result(h, segs, skip);
    }
    return null;
  }

  /** How many leading segments are the entry's prefix: the family's name, or an operator's prefix rule of this family. */
  #entrySegments(family: Family, p: string, segs: readonly string[]): number {
    if (segs[0] === family) return 1;
    for (const r of this.#prefixes) {
      if (r.family === family && p.startsWith(r.prefix)) {
        const n = r.prefix.split('/').filter(Boolean).length;
        if (n > 0) return n;
      }
    }
    return 0;
  }
}

function found(n: Node, segs: readonly string[], i: number, method: string): CompiledRow | null {
  if (i === segs.length) {
    const h = n.here?.get(method) ?? n.rest?.get(method);
    return h ?? null;
  }
  const s = segs[i]!;
  const lit = n.lit.get(s);
  if (lit !== undefined) {
    const h = found(lit, segs, i + 1, method);
    if (h !== null) return h;
  }
  if (n.verbs !== null) {
    const colon = s.lastIndexOf(':');
    if (colon > 0) {
      const v = n.verbs.get(s.slice(colon + 1));
      if (v !== undefined) {
        const h = found(v, segs, i + 1, method);
        if (h !== null) return h;
      }
    }
  }
  if (n.version !== null && VERSION.test(s)) {
    const h = found(n.version, segs, i + 1, method);
    if (h !== null) return h;
  }
  if (n.param !== null) {
    const h = found(n.param, segs, i + 1, method);
    if (h !== null) return h;
  }
  return n.rest?.get(method) ?? null;
}

function result(entry: CompiledRow, segs: readonly string[], skip: number): Classified | null {
  // A `%` is read differently by different servers: only in the model of a free model-info path.
  const pctOk = entry.row.class === 'free' && entry.row.model === 'path' && entry.modelAt >= 0 ? skip + entry.modelAt : Infinity;
  for (let i = skip; i < segs.length; i++) if (i < pctOk && segs[i]!.includes('%')) return null;
  if (entry.idAt < 0) return { entry, id: null };
  const s = segs[skip + entry.idAt]!;
  const colon = s.lastIndexOf(':');
  return { entry, id: colon > 0 && entry.row.path.split('/')[entry.idAt + 1]!.includes(':') ? s.slice(0, colon) : s };
}
