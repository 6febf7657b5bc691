/**
 * Dependencies point one way: the decision pipeline (the authorizer's loop, the phases) and the
 * store depend on nothing above them — not on telemetry, transports, the console or the wiring.
 * Observers (metrics, logs, usage counting) are attached from outside.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** `file: module` for every import and re-export (type-only included) of the files under `path` (a file or a folder). */
function importsOf(path: string): string[] {
  const abs = join(ROOT, path);
  const files = path.endsWith('.ts') ? [''] : readdirSync(abs, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  return files.flatMap((f) => [...readFileSync(join(abs, f), 'utf8').matchAll(/^(?:import|export) (?:type )?[^;]*?from '([^']+)'/gms)].map((m) => `${path}/${f}: ${m[1]}`));
}

const ABOVE = /\/(telemetry|transport|console|console-api|console-web|cli|admin|dev|main\.ts|config\.ts)\b/;

describe('layers', () => {
  it('the pipeline and the authorizer import nothing above them', () => {
    const imports = [...importsOf('src/authorizer.ts'), ...importsOf('src/pipeline')];
    expect(imports.length).toBeGreaterThan(10); // the control: the reader finds the imports
    expect(imports.filter((l) => ABOVE.test(l))).toEqual([]);
  });

  it('the store and the schema import nothing above them, nor the pipeline', () => {
    const imports = [...importsOf('src/store'), ...importsOf('src/schema')];
    // The store is built from the sidecar's settings (`index.ts` reads the `Config` type): the one exception.
    expect(imports.filter((l) => (ABOVE.test(l) && !l.endsWith('/config.ts')) || /\/(pipeline|authorizer)/.test(l))).toEqual([]);
  });

  it('the console is one service: the CLI, the API and the library reach the same class, with no layer between', async () => {
    const src = (f: string) => readFileSync(join(ROOT, f), 'utf8');
    const consoleFiles = readdirSync(join(ROOT, 'src/console')).filter((f) => f.endsWith('.ts'));
    // One class of operations: ConsoleService; the library's KeyConsole is the same class (an alias), no wrapper.
    const classes = consoleFiles.flatMap((f) => [...src(`src/console/${f}`).matchAll(/^export class (\w+)/gm)].map((m) => `${f}: ${m[1]}`));
    expect(classes).toContain('service.ts: ConsoleService');
    expect(classes.filter((c) => /Console\b/.test(c.split(': ')[1]!) && c !== 'service.ts: ConsoleService')).toEqual([]);
    const lib = await import('../../src/console/index.ts');
    const { ConsoleService } = await import('../../src/console/service.ts');
    expect(lib.KeyConsole).toBe(ConsoleService);
    // The shared context is built in one place, and the resource modules take it (they hold no client of their own).
    const builders = consoleFiles.filter((f) => src(`src/console/${f}`).includes('new ConsoleContext('));
    expect(builders).toEqual(['service.ts']);
    for (const f of ['keys.ts', 'accounts.ts', 'management.ts']) {
      const ops = [...src(`src/console/${f}`).matchAll(/^export async function (\w+)\((\w+)/gm)];
      expect(ops.length, f).toBeGreaterThan(2);
      expect(ops.filter((m) => m[2] !== 'ctx' && m[1] !== 'appendAudit').map((m) => m[1]), f).toEqual([]);
    }
    // The CLI, the API and the other console users call the service; of the resource modules they import types only.
    const users = [...importsOf('src/cli'), ...importsOf('src/console-api'), ...importsOf('src/events'), ...importsOf('src/console-web'), ...importsOf('src/dev')];
    expect(users.some((l) => l.endsWith('console/service.ts'))).toBe(true);
    const valueImports = ['src/cli', 'src/console-api', 'src/events', 'src/console-web', 'src/dev'].flatMap((d) => {
      const abs = join(ROOT, d);
      return readdirSync(abs, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts'))
        .flatMap((f) => [...readFileSync(join(abs, f), 'utf8').matchAll(/^import (?!type )[^;]*?from '([^']*console\/(?:keys|accounts|context)\.ts)'/gms)].map((m) => `${d}/${f}: ${m[1]}`));
    });
    expect(valueImports).toEqual([]);
    expect(users.filter((l) => /key-console|ManagementConsole/.test(l))).toEqual([]);
  });

  it('the price catalog\'s room (src/prices) imports nothing of keygate outside it', () => {
    const imports = importsOf('src/prices');
    expect(imports.length).toBeGreaterThan(5); // the control
    expect(imports.filter((l) => /: \.\.\//.test(l))).toEqual([]);
  });

  it('the ledger imports nothing above it but the schema, the store, the core, the price basis and the events\' publishing; the sidecar loads its booking write, never its PostgreSQL part', () => {
    const imports = importsOf('src/ledger');
    expect(imports.length).toBeGreaterThan(10); // the control
    const allowed = /: (node:\w+|pg|pino|prom-client|ioredis|\.\/[\w-]+\.ts|\.\.\/schema\/[\w-]+\.ts|\.\.\/store\/redis\.ts|\.\.\/core\/(?:money|clock)\.ts|\.\.\/prices\/basis\.ts|\.\.\/events\/(?:lua|publish)\.ts)$/;
    expect(imports.filter((l) => !allowed.test(l))).toEqual([]);
    // Every module the sidecar's runtime loads (static value imports and re-exports from src/main.ts, transitively): of src/ledger, the booking write only.
    const seen = new Set<string>();
    const walk = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const m of text.matchAll(/^(?:import|export) (?!type )[^;]*?from '(\.{1,2}\/[^']+\.ts)'/gms)) walk(join(file, '..', m[1]!));
    };
    walk('src/main.ts');
    expect(seen.size).toBeGreaterThan(50); // the control: the walk follows the imports
    const booking = ['src/ledger/book.ts', 'src/ledger/book-script.ts', 'src/ledger/scripts.ts'];
    expect([...seen].filter((f) => f.startsWith('src/ledger/')).sort()).toEqual(booking.sort());
    // The booking write's modules import no PostgreSQL module, and no module the sidecar loads imports `pg`.
    expect([...seen].filter((f) => /^(?:import|export) [^;]*?from 'pg'/ms.test(readFileSync(join(ROOT, f), 'utf8')))).toEqual([]);
    // The console and `keygate ledger` do load the rest.
    expect(readFileSync(join(ROOT, 'src/console-api/main.ts'), 'utf8')).toContain("'../ledger/run.ts'");
    expect(readFileSync(join(ROOT, 'src/cli/ledger-commands.ts'), 'utf8')).toContain("'../ledger/run.ts'");
  });

  it('the pure core imports no I/O module, store or pipeline', () => {
    const imports = importsOf('src/core');
    expect(imports.length).toBeGreaterThan(20); // the control: the reader finds the imports
    // Lines read `src/core/file.ts: module`; node:buffer (bytes), node:crypto and node:zlib (the key format's digest,
    // randomness and checksum; no I/O) are the node modules the core may use.
    expect(imports.filter((l) => /: node:(?!(?:buffer|crypto|zlib)$)|ioredis|pino|\/store\/|\/pipeline\/|\/authorizer/.test(l))).toEqual([]);
  });
});
