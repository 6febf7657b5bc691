/** Small pieces every bench script shares. */
import { execFileSync } from 'node:child_process';

/** Envoy sends the ext_authz filter's timeout as grpc-timeout, and its own user agent. */
export const ENVOY_HEADERS = { 'grpc-timeout': '250m', 'user-agent': 'envoy/1.34.1' };

export function median(xs: readonly number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2;
}

/** The tree's commit (and "+changes" when its work tree differs), or "a tree without git". */
export function treeCommit(dir: string): string {
  try {
    const head = execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', dir, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
    return dirty ? `${head}+changes` : head;
  } catch {
    return 'a tree without git';
  }
}

/**
 * Waits until `read()` (a booked total: a wallet's balance, a key's spend) has not changed for
 * `quietMs` (default 750 ms: three of the booker's 250 ms intervals), or `maxMs` passed; returns
 * the seconds waited until the last change. A metered run at saturation leaves bookings queued in
 * the sidecar's booker: they land after h2load stops, and their CPU belongs to the run.
 */
export async function bookingsLanded(read: () => Promise<number>, quietMs = 750, maxMs = 60_000): Promise<number> {
  const t0 = Date.now();
  let last = await read();
  let still = Date.now();
  while (Date.now() - still < quietMs && Date.now() - t0 < maxMs) {
    await new Promise((r) => setTimeout(r, 50));
    const v = await read();
    if (v !== last) {
      last = v;
      still = Date.now();
    }
  }
  return (still - t0) / 1000;
}
