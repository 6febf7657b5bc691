/**
 * The Envoy services' rooms: ext_proc is registered like Check (its mapping and codec under
 * src/transport/envoy/, its method listed in the registry), metering gets typed messages and knows
 * no transport, the gRPC servers are handed a service set (no authorizer), and there is one
 * Envoy-side ext_proc encoder that the dev gateway, the benches and the tests share — never loaded
 * by the sidecar. Read from the source text, like layers.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const IMPORT = /^(?:import|export) (?:type )?[^;]*?from '([^']+)'/gms;
const VALUE_IMPORT = /^(?:import|export) (?!type )[^;]*?from '([^']+)'/gms;

function tsFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.includes('node_modules'))
    .map((f) => `${dir}/${f}`);
}

const text = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** `file: module` (resolved to a repository path when relative) for every import of the files under `dir`. */
function importsOf(dir: string): string[] {
  const files = dir.endsWith('.ts') ? [dir] : tsFiles(dir);
  return files.flatMap((f) => [...text(f).matchAll(IMPORT)].map((m) => `${f}: ${m[1]!.startsWith('.') ? relative(ROOT, join(ROOT, dirname(f), m[1]!)) : m[1]}`));
}

/** Every repository file the sidecar's runtime loads from `src/main.ts` through value imports. */
function runtimeClosure(): Set<string> {
  const seen = new Set<string>();
  const todo = ['src/main.ts'];
  while (todo.length > 0) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    for (const m of text(f).matchAll(VALUE_IMPORT)) {
      if (m[1]!.startsWith('.')) todo.push(normalize(relative(ROOT, join(ROOT, dirname(f), m[1]!))));
    }
  }
  return seen;
}

describe('layers: the Envoy services', () => {
  it('metering imports nothing under src/transport (the transport decodes; the meter gets typed messages)', () => {
    const imports = importsOf('src/metering');
    expect(imports.length).toBeGreaterThan(20); // the control: the reader finds the imports
    expect(imports.filter((l) => / src\/transport\//.test(l) || /grpc|proto/.test(l.split(': ')[1]!))).toEqual([]);
  });

  it('the h2 and grpc-js servers take a service set: they import no authorizer, no registry, no service', () => {
    const imports = [...importsOf('src/transport/h2'), ...importsOf('src/transport/grpc-js')];
    expect(imports.some((l) => l.endsWith('src/transport/service.ts'))).toBe(true); // the control
    expect(imports.filter((l) => /authorizer|\/envoy\/services\/|\/metering\//.test(l))).toEqual([]);
  });

  it('ext_proc is registered like Check: its method is listed by the registry, its mapping lives beside check.ts', () => {
    const registry = importsOf('src/transport/envoy/services/registry.ts');
    expect(registry).toContain('src/transport/envoy/services/registry.ts: src/transport/envoy/services/check.ts');
    expect(registry).toContain('src/transport/envoy/services/registry.ts: src/transport/envoy/services/ext-proc.ts');
    expect(text('src/transport/envoy/services/registry.ts')).not.toMatch(/\bextra\b/);
    expect(importsOf('src/transport/envoy/services/ext-proc.ts')).toContain('src/transport/envoy/services/ext-proc.ts: src/transport/envoy/ext-proc.ts');
    // main wires: the service set comes from the registry, no method is built beside it
    expect(importsOf('src/main.ts').filter((l) => /envoy\/services\//.test(l))).toEqual(['src/main.ts: src/transport/envoy/services/registry.ts']);
  });

  it('one module builds Envoy-side ProcessingRequests; dev, bench and the tests share it; the sidecar never loads it', () => {
    const ENCODER = 'src/transport/envoy/ext-proc-envoy.ts';
    // hand-encoded: metadata_context (8) → filter_metadata entry (1) → its key (1), the ext_authz namespace
    const handEncoded = /\[\s*8\s*,\s*\[\s*\[\s*1\s*,\s*\[\s*\[\s*1\s*,/;
    // or as objects for a protobuf library, written to a Process stream the module opens
    const objectEncoded = (s: string) => /metadata_context\s*:/.test(s) && /\.Process\(|PROCESS_PATH|ExternalProcessor\/Process/.test(s);
    const files = [...tsFiles('src'), ...tsFiles('bench'), ...tsFiles('test')];
    const builders = files.filter((f) => {
      const s = text(f);
      return handEncoded.test(s) || objectEncoded(s);
    });
    expect(builders).toEqual([ENCODER]);
    const users = files.filter((f) => f !== ENCODER && [...text(f).matchAll(IMPORT)].some((m) => m[1]!.endsWith('/ext-proc-envoy.ts')));
    for (const where of ['src/dev/', 'bench/', 'test/helpers/']) expect(users.some((f) => f.startsWith(where)), where).toBe(true);
    const runtime = runtimeClosure();
    expect(runtime.has('src/transport/envoy/services/ext-proc.ts')).toBe(true); // the control
    expect(runtime.has(ENCODER)).toBe(false);
  });
});
