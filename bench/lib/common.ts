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
