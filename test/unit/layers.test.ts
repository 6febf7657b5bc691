/**
 * Dependencies point one way: the decision pipeline (the authorizer's loop, the phases) and the
 * store depend on nothing above them — not on telemetry, transports, the console or the wiring.
 * Observers (metrics, logs, usage counting) are attached from outside.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** `file: module` for every import (type-only included) of the files under `path` (a file or a folder). */
function importsOf(path: string): string[] {
  const abs = join(ROOT, path);
  const files = path.endsWith('.ts') ? [''] : readdirSync(abs, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  return files.flatMap((f) => [...readFileSync(join(abs, f), 'utf8').matchAll(/^import (?:type )?[^;]*?from '([^']+)'/gms)].map((m) => `${path}/${f}: ${m[1]}`));
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

  it('the pure core imports no I/O module, store or pipeline', () => {
    expect(importsOf('src/core').filter((l) => /'node:|ioredis|pino|\/store\/|\/pipeline\/|\/authorizer/.test(l))).toEqual([]);
  });
});
