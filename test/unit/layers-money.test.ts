/**
 * The money path's layers (#32, "One booking write"): the booking write has one home, the ledger's
 * `src/ledger/book.ts`, which both the console's usage recording and the sidecar's metering call;
 * the sidecar's runtime loads no console, API, page, CLI or dev module, and no PostgreSQL module.
 * Read from the source text, like test/unit/layers.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const text = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const VALUE_IMPORT = /^(?:import|export) (?!type )[^;]*?from '([^']+)'/gms;

/** Every module reached from `entry` by static value imports and re-exports, with the modules that import it. */
function runtimeImports(entry: string): { files: Map<string, Set<string>>; packages: Set<string> } {
  const files = new Map<string, Set<string>>([[entry, new Set()]]);
  const packages = new Set<string>();
  const walk = (file: string) => {
    for (const m of text(file).matchAll(VALUE_IMPORT)) {
      const spec = m[1]!;
      if (!spec.startsWith('.')) {
        packages.add(spec);
        continue;
      }
      const to = join(file, '..', spec);
      const by = files.get(to);
      if (by !== undefined) {
        by.add(file);
        continue;
      }
      files.set(to, new Set([file]));
      walk(to);
    }
  };
  walk(entry);
  return { files, packages };
}

/** `file: module` for every import and re-export (type-only included) of the files under the folder. */
function importsOf(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => [...text(`${dir}/${f}`).matchAll(/^(?:import|export) (?:type )?[^;]*?from '([^']+)'/gms)].map((m) => `${dir}/${f}: ${m[1]}`));
}

const srcFiles = (): string[] =>
  readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `src/${f}`);

describe('layers: the money path', () => {
  it('the sidecar\'s runtime loads no console, API, page, CLI or dev module, nor pg', () => {
    const { files, packages } = runtimeImports('src/main.ts');
    expect(files.size).toBeGreaterThan(50); // the control: the walk follows the imports
    expect(files.has('src/ledger/book.ts')).toBe(true); // the control: the booking write is the sidecar's too
    expect([...packages]).toContain('ioredis'); // the control: packages are seen
    expect([...packages].filter((p) => p === 'pg' || p.startsWith('pg/'))).toEqual([]);
    const above = [...files.keys()].filter((f) => /^src\/(console|console-api|console-web|cli|dev)\//.test(f));
    expect(above.map((f) => `${f} <- ${[...files.get(f)!].join(', ')}`)).toEqual([]);
  });

  it('the ledger imports neither the console nor the metering, and the API nor the page', () => {
    const imports = importsOf('src/ledger');
    expect(imports.length).toBeGreaterThan(10); // the control
    expect(imports.filter((l) => /: \.\.\/(console|console-api|console-web|cli|dev|metering|transport|telemetry|pipeline)\//.test(l))).toEqual([]);
  });

  it('one booking write: only src/ledger/book.ts calls the usage-record script; the console and the meter call it', () => {
    const files = srcFiles();
    expect(files.length).toBeGreaterThan(100); // the control
    // The script, its KEYS and its ARGV are imported by the booking write alone.
    expect(files.filter((f) => /from '[^']*\bbook-script\.ts'/.test(text(f)))).toEqual(['src/ledger/book.ts']);
    // No other module runs it (by name or by its own EVAL).
    expect(files.filter((f) => f !== 'src/ledger/book.ts' && f !== 'src/ledger/book-script.ts' && /\bRECORD_USAGE\b|kgRecordUsage/.test(text(f).replace(/^\s*(?:\/\*|\*|\/\/).*$/gm, '')))).toEqual([]);
    // Both callers go through it.
    const callers = files.filter((f) => /^import (?!type )[^;]*\bUsageBook\b[^;]*from '[^']*ledger\/book\.ts'/ms.test(text(f)));
    expect(callers.sort()).toEqual(['src/console/wallet.ts', 'src/metering/booker.ts']);
  });

  it('the money defaults have one home, below the console', () => {
    const defs = srcFiles().filter((f) => /^export const MONEY_DEFAULTS\b/m.test(text(f)));
    expect(defs).toEqual(['src/core/money.ts']);
  });
});
