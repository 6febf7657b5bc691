/**
 * The floor and the folder order of src/ (issue #32): the pure rules (`src/core`) import nothing of
 * keygate outside them; `src/schema` (Redis key names, field names, codecs) stands on the floor and
 * the price room (`src/prices`, which imports nothing of keygate); every top-level entry of src/ has
 * a rank, and an import only goes down (or sideways within its own entry). Imports are read from
 * the source text (value and type imports, re-exports and dynamic imports alike), as in layers.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..', '..', 'src');

interface Import {
  /** The importing file, relative to src/. */
  readonly file: string;
  /** The module as written. */
  readonly module: string;
  /** For a relative import: the imported file, relative to src/ (`../x` when outside it). */
  readonly target: string | null;
}

/** Every import and re-export (type-only included) and every dynamic `import('…')` of a literal path, of every .ts file under src/. */
function allImports(): Import[] {
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  return files.flatMap((file) =>
    [...readFileSync(join(SRC, file), 'utf8').matchAll(/^(?:import|export) (?:type )?[^;]*?from '([^']+)'|\bimport\('([^']+)'\)/gms)].map((m) => {
      const module = (m[1] ?? m[2])!;
      const target = module.startsWith('.') ? relative(SRC, resolve(SRC, dirname(file), module)) : null;
      return { file, module, target };
    }),
  );
}

/** The top-level entry of src/ a path (relative to src/) is in: its first folder, or the file's name without `.ts`. */
const entryOf = (path: string): string => (path.includes('/') ? path.split('/')[0]! : path.replace(/\.ts$/, ''));

/** `file: module` for the imports from files under `folder` (relative to src/). */
const importsUnder = (imports: Import[], folder: string) => imports.filter((i) => i.file.startsWith(`${folder}/`));
const line = (i: Import) => `${i.file}: ${i.module}`;

/**
 * The rank of every top-level entry of src/ (a folder, or a .ts file directly in src/): an entry
 * may import only entries of a lower rank (and itself). Entries of the same rank do not import
 * each other. A new top-level entry must be added here, at the rank its imports allow.
 */
const RANK: Readonly<Record<string, number>> = {
  core: 0, // the floor: pure rules, node builtins only
  prices: 1, // the price catalog's room: imports nothing of keygate
  schema: 2, // Redis key names, field names, codecs; Lua of the records
  keys: 3, // the reveal envelope and the credential envelope (crypto)
  'redis-url': 3, // parsing a Redis URL
  lifecycle: 3, // start/stop of a listener
  config: 4, // the sidecar's settings
  store: 5, // Redis links, the record source, the limiter, the cache
  events: 6, // events as a library: publish, the worker, webhooks
  ledger: 7, // the PostgreSQL ledger
  pipeline: 8, // the decision phases
  authorizer: 9, // the Check's loop over the phases
  telemetry: 10, // logs, metrics, traces: the observers' hubs the authorizer's and the meter's reports go to
  metering: 11, // ext_proc metering: sessions, the meter, its metrics, pricing a booking, the booker
  transport: 12, // h2, grpc-js, HTTP; the Envoy services
  console: 13, // ConsoleService and its resources
  'console-web': 14, // the web page's server side (its plugin, sessions, sign-in), mounted by the API
  'console-api': 15, // the console's HTTP API
  admin: 16, // the sidecar's admin listener
  main: 17, // the sidecar's wiring
  dev: 18, // the development stack (runs the sidecar's main)
  cli: 19, // the `keygate` command
};

/** Every top-level entry of src/: its folders and its .ts files (without `.ts`). */
function topLevelEntries(): string[] {
  return readdirSync(SRC, { withFileTypes: true })
    .filter((d) => d.isDirectory() || d.name.endsWith('.ts'))
    .map((d) => (d.isDirectory() ? d.name : d.name.replace(/\.ts$/, '')))
    .sort();
}

/** Edges between top-level entries: `from -> to` with an example import each. */
function folderEdges(imports: Import[]): Map<string, string[]> {
  const edges = new Map<string, string[]>();
  for (const i of imports) {
    if (i.target === null || i.target.startsWith('..')) continue;
    const from = entryOf(i.file);
    const to = entryOf(i.target);
    if (from === to) continue;
    const k = `${from} -> ${to}`;
    edges.set(k, [...(edges.get(k) ?? []), line(i)]);
  }
  return edges;
}

/** The strongly connected groups of more than one entry (Tarjan), each sorted. */
function cycles(edges: Iterable<string>): string[][] {
  const graph = new Map<string, string[]>();
  for (const e of edges) {
    const [a, b] = e.split(' -> ') as [string, string];
    graph.set(a, [...(graph.get(a) ?? []), b]);
    if (!graph.has(b)) graph.set(b, []);
  }
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) found.push(group.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

describe('layers: the floor', () => {
  const imports = allImports();

  it('src/core imports nothing of keygate outside src/core, and no I/O package', () => {
    const core = importsUnder(imports, 'core');
    expect(core.length).toBeGreaterThan(20); // the control: the reader finds the core's imports
    expect(core.filter((i) => i.target !== null && !i.target.startsWith('core/')).map(line)).toEqual([]);
    // Outside packages: computation only (no I/O, no Redis, no logger): bytes, digests and checksums, zod, YAML text.
    const pure = /^(node:(buffer|crypto|zlib)|zod|yaml)$/;
    expect(core.filter((i) => i.target === null && !pure.test(i.module)).map(line)).toEqual([]);
  });

  it('src/schema imports only the floor, the price room and itself (and zod)', () => {
    const schema = importsUnder(imports, 'schema');
    expect(schema.length).toBeGreaterThan(20); // the control
    const outside = schema.filter((i) => (i.target !== null ? !/^(core|prices|schema)\//.test(i.target) : i.module !== 'zod'));
    expect(outside.map(line)).toEqual([]);
  });

  it('the rank table names every top-level entry of src/, and nothing else', () => {
    const entries = topLevelEntries();
    expect(entries).toContain('core'); // the control
    expect(entries).toEqual(Object.keys(RANK).sort());
  });

  it('no import circle between the top-level entries of src/', () => {
    const edges = folderEdges(imports);
    expect(edges.size).toBeGreaterThan(50); // the control: the reader finds the edges
    const knots = cycles(edges.keys()).map((group) => ({ group, edges: [...edges].filter(([k]) => group.includes(k.split(' -> ')[0]!) && group.includes(k.split(' -> ')[1]!)).map(([k, v]) => `${k} (${v[0]})`) }));
    expect(knots).toEqual([]);
  });

  it('every import goes down the rank table', () => {
    const edges = folderEdges(imports);
    expect(edges.size).toBeGreaterThan(50); // the control
    const upward = [...edges].filter(([k]) => {
      const [a, b] = k.split(' -> ') as [string, string];
      return !(RANK[a]! > RANK[b]!);
    });
    expect(upward.map(([k, v]) => `${k}: ${v.join(', ')}`)).toEqual([]);
  });

  it('the cycle finder finds a circle, and an upward import is one (the tests above can fail)', () => {
    expect(cycles(['a -> b', 'b -> c', 'c -> a', 'c -> d'])).toEqual([['a', 'b', 'c']]);
    expect(cycles(['a -> b', 'b -> c'])).toEqual([]);
    expect(RANK.core! < RANK.schema! && RANK.schema! < RANK.store! && RANK.authorizer! < RANK.transport!).toBe(true);
  });
});
