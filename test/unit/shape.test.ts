/**
 * The shape the code keeps: the production path loads no gRPC library, the transports depend on the
 * shared Envoy mapping and not on each other, and the benchmark does not reach into the tests.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** Whether importing `module` (from a fresh process) loads @grpc/grpc-js or @grpc/proto-loader. */
function loadsGrpcLibrary(module: string): boolean {
  const script = `
    await import(${JSON.stringify(join(ROOT, module))});
    const { createRequire } = await import('node:module');
    const cache = Object.keys(createRequire(import.meta.url).cache);
    process.stdout.write(String(cache.some((k) => k.includes('@grpc/grpc-js') || k.includes('@grpc/proto-loader'))));`;
  return execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' }) === 'true';
}

/** `file: module` for every import in `dir` (with `values`, type-only imports are left out: they load nothing). */
function importsOf(dir: string, values = false): string[] {
  const out: string[] = [];
  for (const f of readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })) {
    if (!f.endsWith('.ts')) continue;
    for (const m of readFileSync(join(ROOT, dir, f), 'utf8').matchAll(/^import (type )?[^;]*?from '([^']+)'/gms)) {
      if (!(values && m[1])) out.push(`${f}: ${m[2]}`);
    }
  }
  return out;
}

describe('code shape', () => {
  it('the sidecar (h2 by default) loads no gRPC library; the grpc-js fallback does (the control)', () => {
    expect(loadsGrpcLibrary('src/main.ts')).toBe(false);
    expect(loadsGrpcLibrary('src/transport/grpc-js/server.ts')).toBe(true);
  });

  it('the h2 and HTTP transports import no other transport folder', () => {
    expect(importsOf('src/transport/h2').filter((l) => /\/(grpc-js|http)\//.test(l))).toEqual([]);
    expect(importsOf('src/transport/http').filter((l) => /\/(grpc-js|h2|envoy)\//.test(l))).toEqual([]);
    expect(importsOf('src/transport/envoy').filter((l) => /\/(grpc-js|h2|http)\//.test(l))).toEqual([]);
    expect(importsOf('src/transport/grpc-js').filter((l) => /\/(h2|http)\//.test(l))).toEqual([]);
    // the plumbing both gRPC servers share (wire codec, deadlines, timers, the early reset)
    expect(importsOf('src/transport/grpc').filter((l) => /\/(grpc-js|h2|http)\//.test(l))).toEqual([]);
  });

  it('the pure core loads no I/O module and the benchmark does not import the tests', () => {
    expect(importsOf('src/core').filter((l) => /'node:|ioredis|pino|\/store\/|\/transport\//.test(l))).toEqual([]);
    expect(importsOf('bench').filter((l) => /\.\.\/test\//.test(l))).toEqual([]);
  });
});
