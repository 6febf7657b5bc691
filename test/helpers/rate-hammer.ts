/**
 * Drives rate limiters the way sidecars would: many requests of one key at once, counting what each
 * limiter allowed, refused and could not decide. `rate-child.ts` runs the same in a child process.
 */
import type { TakeResult, RateLimiter, RateRequest } from '../../src/store/rate-limiter.ts';

export interface Tally {
  allowed: number;
  refused: number;
  unavailable: number;
  /** Scopes named by refusals. */
  refusedBy: Record<string, number>;
}

export function tally(): Tally {
  return { allowed: 0, refused: 0, unavailable: 0, refusedBy: {} };
}

export function count(t: Tally, r: TakeResult): void {
  if (r.kind === 'allow') t.allowed++;
  else if (r.kind === 'refuse') {
    t.refused++;
    t.refusedBy[r.scope] = (t.refusedBy[r.scope] ?? 0) + 1;
  } else t.unavailable++;
}

/** `attempts` requests through `limiter`, `concurrency` at a time (a new one as each is decided). */
export async function hammer(limiter: RateLimiter, req: RateRequest, attempts: number, concurrency: number): Promise<Tally> {
  const t = tally();
  let next = 0;
  const worker = async () => {
    while (next < attempts) {
      next++;
      count(t, await limiter.take(req));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return t;
}
