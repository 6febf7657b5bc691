/** Shared by the metering unit tests: a session fed one fixture the way Envoy would, in given chunks. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ProcessingRequest } from '../../src/transport/envoy/ext-proc.ts';
import { DEFAULT_METER_OPTIONS, MeterSession, type MeterOptions, type MeterOutcome, type MeterStep } from '../../src/metering/session.ts';

export const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'metering');
export const fixture = (name: string): Buffer => readFileSync(join(FIXTURES, name));

export const KEY_ID = 'key_0123456789abcdefABCD';
export const ACCOUNT = 'acct-demo';

let ids = 0;
export function meterOptions(over: Partial<MeterOptions> = {}): MeterOptions {
  return { ...DEFAULT_METER_OPTIONS, newRequestId: () => `m:test-${++ids}`, ...over };
}

const msg = (m: Partial<ProcessingRequest>): ProcessingRequest => ({ phase: null, headers: null, body: null, endOfStream: false, metadata: null, observabilityMode: false, ...m });

export interface Exchange {
  path: string;
  requestBody?: string | Buffer;
  /** The request body message carries end_of_stream (false: Envoy's BUFFERED_PARTIAL sent only its first part). */
  requestBodyEnd?: boolean;
  requestHeaders?: Record<string, string>;
  identity?: 'headers' | 'metadata' | 'none';
  status?: number;
  contentType: string;
  contentEncoding?: string;
  /** The response body as sent (already encoded). */
  chunks: readonly Uint8Array[];
  /** The last chunk carries end_of_stream (false: the stream is cut). */
  complete?: boolean;
  observability?: boolean;
}

export interface Run {
  steps: MeterStep[];
  outcome: MeterOutcome;
}

export async function run(x: Exchange, opts: MeterOptions = meterOptions()): Promise<Run> {
  const s = new MeterSession(opts);
  const steps: MeterStep[] = [];
  const obs = x.observability ?? false;
  const identity = x.identity ?? 'headers';
  const headers: string[] = [':path', x.path, ':method', 'POST', 'x-request-id', 'req-1'];
  if (identity === 'headers') headers.push('x-keygate-key-id', KEY_ID, 'x-keygate-account-id', ACCOUNT);
  for (const [k, v] of Object.entries(x.requestHeaders ?? {})) headers.push(k, v);
  const metadata = identity === 'metadata' ? { keyId: KEY_ID, accountId: ACCOUNT } : null;
  steps.push(s.handle(msg({ phase: 'request_headers', headers, metadata, observabilityMode: obs, endOfStream: x.requestBody === undefined })));
  if (x.requestBody !== undefined) {
    steps.push(s.handle(msg({ phase: 'request_body', body: Buffer.from(x.requestBody), endOfStream: x.requestBodyEnd ?? true, metadata, observabilityMode: obs })));
  }
  const rh = [':status', String(x.status ?? 200), 'content-type', x.contentType];
  if (x.contentEncoding) rh.push('content-encoding', x.contentEncoding);
  steps.push(s.handle(msg({ phase: 'response_headers', headers: rh, metadata, observabilityMode: obs })));
  const complete = x.complete ?? true;
  x.chunks.forEach((c, i) => {
    steps.push(s.handle(msg({ phase: 'response_body', body: Buffer.from(c), endOfStream: complete && i === x.chunks.length - 1, metadata, observabilityMode: obs })));
  });
  if (complete && x.chunks.length === 0) steps.push(s.handle(msg({ phase: 'response_body', body: Buffer.alloc(0), endOfStream: true, observabilityMode: obs })));
  return { steps, outcome: await s.end() };
}

/** `b` cut at the given offsets (sorted, unique, inside). */
export function splitAt(b: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const c of cuts) {
    out.push(b.subarray(prev, c));
    prev = c;
  }
  out.push(b.subarray(prev));
  return out;
}

/** A deterministic pseudo-random generator (tests repeat exactly). */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomCuts(len: number, count: number, r: () => number): number[] {
  const set = new Set<number>();
  for (let i = 0; i < count; i++) set.add(1 + Math.floor(r() * Math.max(1, len - 1)));
  return [...set].filter((c) => c > 0 && c < len).sort((a, b) => a - b);
}
