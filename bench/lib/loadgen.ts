/**
 * A small closed-loop gRPC load generator on node:http2, for what h2load cannot do: a different key
 * on every request (cold keys, key floods, cache warm-up). Runs in its own process:
 *   scripts/node bench/lib/loadgen.ts '<json LoadSpec>'   → prints one JSON LoadResult line on stdout
 * Every response's grpc-status is counted; every `sampleEvery`-th body is decoded for allow/deny.
 */
import * as http2 from 'node:http2';
import { readFileSync } from 'node:fs';
import { CHECK_PATH, decodeCheckResponse, fastKeys, type KeyTemplate } from './bodies.ts';

export interface LoadSpec {
  port: number;
  connections: number;
  streams: number;
  requests: number;
  /** Fixed frame (path of a file) … */
  bodyFile?: string;
  /** … or a template (`KeyTemplate` JSON next to a `.bin` frame) with keys from a file, one a line … */
  templateFile?: string;
  keysFile?: string;
  /** … index of the first key to use from keysFile. */
  keysFrom?: number;
  /** … or fresh random well-formed keys (never seeded) with this prefix. */
  randomKeysPrefix?: string;
  sampleEvery?: number;
  headers?: Record<string, string>;
}

export interface LoadResult {
  requests: number;
  elapsedMs: number;
  rps: number;
  p50us: number;
  p99us: number;
  p999us: number;
  httpNon200: number;
  grpcStatus: Record<string, number>;
  sampled: Record<string, number>;
  errors: number;
  firstError?: string;
}

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** allow | deny:<code> | error — what a decoded CheckResponse says. */
export function verdictOf(res: any): string {
  if (res?.ok_response || (res?.status?.code ?? 0) === 0 && !res?.denied_response) return 'allow';
  try {
    return `deny:${JSON.parse(res.denied_response.body).error.code}`;
  } catch {
    return `deny:${res?.denied_response?.status?.code ?? '?'}`;
  }
}

function bodySource(spec: LoadSpec): (i: number) => Buffer {
  if (spec.bodyFile) {
    const b = readFileSync(spec.bodyFile);
    return () => b;
  }
  if (!spec.templateFile) throw new Error('loadgen: bodyFile or templateFile required');
  const meta = JSON.parse(readFileSync(spec.templateFile + '.json', 'utf8')) as Omit<KeyTemplate, 'frame'>;
  const frame = readFileSync(spec.templateFile);
  if (spec.randomKeysPrefix !== undefined) {
    const prefix = spec.randomKeysPrefix;
    let batch: string[] = [];
    let at = 0;
    return () => {
      if (at >= batch.length) {
        batch = fastKeys(prefix, 4096);
        at = 0;
      }
      const out = Buffer.from(frame);
      out.write(batch[at++]!, meta.offset, 'latin1');
      return out;
    };
  }
  if (!spec.keysFile) throw new Error('loadgen: keysFile or randomKeysPrefix required with a template');
  const keys = readFileSync(spec.keysFile, 'latin1');
  const width = meta.keyLength + 1; // one key a line, fixed width
  const n = Math.floor(keys.length / width);
  const from = spec.keysFrom ?? 0;
  return (i) => {
    const out = Buffer.from(frame);
    const k = (from + i) % n;
    out.write(keys.slice(k * width, k * width + meta.keyLength), meta.offset, 'latin1');
    return out;
  };
}

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const next = bodySource(spec);
  const sampleEvery = spec.sampleEvery ?? 997;
  const lat = new Float64Array(spec.requests);
  const grpcStatus: Record<string, number> = {};
  const sampled: Record<string, number> = {};
  let issued = 0;
  let done = 0;
  let httpNon200 = 0;
  let errors = 0;
  let firstError: string | undefined;
  const headers = {
    ':method': 'POST',
    ':path': CHECK_PATH,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...spec.headers,
  };
  const sessions = await Promise.all(
    Array.from({ length: spec.connections }, () => {
      const s = http2.connect(`http://127.0.0.1:${spec.port}`, { settings: { enablePush: false } });
      s.on('error', () => {});
      return new Promise<http2.ClientHttp2Session>((resolve, reject) => {
        s.once('connect', () => resolve(s));
        s.once('error', reject);
      });
    }),
  );
  const started = performance.now();
  await new Promise<void>((finish) => {
    const fire = (session: http2.ClientHttp2Session) => {
      if (issued >= spec.requests) return;
      const i = issued++;
      const t0 = performance.now();
      const req = session.request(headers);
      let status = 0;
      let gs: string | undefined;
      const chunks: Buffer[] = [];
      const sample = i % sampleEvery === 0;
      req.on('response', (h) => {
        status = Number(h[':status']);
        if (h['grpc-status'] !== undefined) gs = String(h['grpc-status']); // trailers-only response
      });
      req.on('trailers', (t) => {
        if (t['grpc-status'] !== undefined) gs = String(t['grpc-status']);
      });
      req.on('data', (c: Buffer) => {
        if (sample) chunks.push(c);
      });
      const end = (err?: Error) => {
        lat[i] = (performance.now() - t0) * 1000;
        if (err) {
          errors++;
          firstError ??= err.message;
        } else {
          if (status !== 200) httpNon200++;
          const g = gs ?? 'missing';
          grpcStatus[g] = (grpcStatus[g] ?? 0) + 1;
          if (sample && chunks.length > 0) {
            let v: string;
            try {
              v = verdictOf(decodeCheckResponse(Buffer.concat(chunks)));
            } catch (e) {
              v = `undecodable:${(e as Error).message}`;
            }
            sampled[v] = (sampled[v] ?? 0) + 1;
          }
        }
        if (++done === spec.requests) finish();
        else fire(session);
      };
      req.on('end', () => end());
      req.on('error', (e) => end(e));
      req.end(next(i));
    };
    for (const s of sessions) for (let k = 0; k < spec.streams; k++) fire(s);
  });
  const elapsedMs = performance.now() - started;
  for (const s of sessions) s.close();
  const sorted = lat.sort();
  return {
    requests: spec.requests,
    elapsedMs,
    rps: (spec.requests / elapsedMs) * 1000,
    p50us: percentile(sorted, 50),
    p99us: percentile(sorted, 99),
    p999us: percentile(sorted, 99.9),
    httpNon200,
    grpcStatus,
    sampled,
    errors,
    ...(firstError ? { firstError } : {}),
  };
}

if (import.meta.main) {
  const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec;
  runLoad(spec).then(
    (r) => process.stdout.write(JSON.stringify(r) + '\n'),
    (e) => {
      process.stderr.write(`loadgen: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
