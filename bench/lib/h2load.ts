/**
 * Drives a target with h2load (nghttp2-client) and reads requests/s from its summary and latency
 * percentiles from its per-request log (`--log-file`). h2load counts HTTP status only; the runner
 * checks grpc-status and the decision separately on decoded samples.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { CHECK_PATH } from './bodies.ts';
import { percentile } from './loadgen.ts';

export interface H2loadSpec {
  port: number;
  bodyFile: string;
  connections: number;
  streams: number;
  durationSec: number;
  warmupSec: number;
  /** Fixed offered load, requests/s in total (split over the connections). */
  rps?: number;
  logFile: string;
  /** The gRPC method's path (default: ext_authz Check). */
  path?: string;
  /** Extra request headers (Envoy sends `grpc-timeout` from the filter's timeout). */
  headers?: Record<string, string>;
}

export interface H2loadResult {
  rps: number;
  done: number;
  succeeded: number;
  non2xx: number;
  p50us: number;
  p99us: number;
  p999us: number;
  maxus: number;
  /** Requests answered in the whole run, warm-up included (for CPU per request). */
  allRequests: number;
}

/** Finds h2load, installing Debian's nghttp2-client when possible; otherwise a clear error. */
export function ensureH2load(): string {
  const which = () => {
    try {
      return execFileSync('sh', ['-c', 'command -v h2load'], { encoding: 'utf8' }).trim();
    } catch {
      return '';
    }
  };
  let path = which();
  if (path) return path;
  const root = process.getuid?.() === 0;
  const hasApt = (() => {
    try {
      execFileSync('sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  if (root && hasApt) {
    process.stderr.write('bench: h2load not found; installing Debian package nghttp2-client\n');
    execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    path = which();
    if (path) return path;
  }
  throw new Error('h2load not found: install it (Debian/Ubuntu: apt-get install nghttp2-client; macOS: brew install nghttp2) and run again');
}

function num(re: RegExp, text: string): number {
  const m = re.exec(text);
  if (!m) throw new Error(`h2load output lacks ${re}: ${text.slice(0, 800)}`);
  return Number(m[1]);
}

export async function runH2load(spec: H2loadSpec): Promise<H2loadResult> {
  const headers = {
    'content-type': 'application/grpc',
    te: 'trailers',
    ...spec.headers,
  };
  const args = [
    `http://127.0.0.1:${spec.port}${spec.path ?? CHECK_PATH}`,
    '-d',
    spec.bodyFile,
    '-c',
    String(spec.connections),
    '-m',
    String(spec.streams),
    '-t',
    '1',
    '-D',
    `${Math.round(spec.durationSec * 1000)}ms`,
    '--warm-up-time',
    `${Math.round(spec.warmupSec * 1000)}ms`,
    '--log-file',
    spec.logFile,
    ...Object.entries(headers).map(([k, v]) => `--header=${k}: ${v}`),
  ];
  if (spec.rps !== undefined) args.push(`--rps=${Math.max(1, Math.round(spec.rps / spec.connections))}`);
  const out = await new Promise<string>((resolve, reject) => {
    const p = spawn('h2load', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    p.stdout.on('data', (c) => (text += c));
    p.stderr.on('data', (c) => (text += c));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`h2load exited ${code}: ${text.slice(-800)}`))));
  });
  const done = num(/requests: \d+ total, \d+ started, (\d+) done/, out);
  const succeeded = num(/(\d+) succeeded/, out);
  const non2xx = num(/status codes: \d+ 2xx, (\d+) 3xx/, out) + num(/(\d+) 4xx/, out) + num(/(\d+) 5xx/, out);
  const rps = num(/finished in [\d.]+\w+, ([\d.]+) req\/s/, out);
  // The log holds every request, warm-up included: keep those that started after the warm-up.
  const lines = readFileSync(spec.logFile, 'utf8').split('\n').filter(Boolean);
  rmSync(spec.logFile, { force: true });
  const rows = lines.map((l) => l.split('\t').map(Number) as [number, number, number]);
  const t0 = rows.reduce((m, r) => Math.min(m, r[0]), Infinity);
  const cut = t0 + spec.warmupSec * 1e6;
  // A run so slow that none of its logged requests started after the warm-up (a loaded machine, a
  // sub-second smoke run): its latencies are those of every request, not none (NaN in a table).
  const measured = rows.filter((r) => r[0] >= cut);
  const lat = Float64Array.from((measured.length > 0 ? measured : rows).map((r) => r[2])).sort();
  return {
    rps,
    done,
    succeeded,
    non2xx,
    p50us: percentile(lat, 50),
    p99us: percentile(lat, 99),
    p999us: percentile(lat, 99.9),
    maxus: lat.length ? lat[lat.length - 1]! : NaN,
    allRequests: rows.length,
  };
}
