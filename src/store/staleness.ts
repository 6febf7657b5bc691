/**
 * The cache's staleness rules (pure; `invalidation.ts` applies them on its injected clock): a link is
 * trusted only while its last confirmed heartbeat was sent less than `boundMs` ago, and the heartbeat
 * runs every quarter of the bound (at least every 10 ms), so a healthy link confirms about four times
 * per bound and one slow answer does not lose it.
 */

/** Tracked at `now` when the last confirmation was sent at `confirmedAt`: strictly within the bound. */
export function withinBound(confirmedAt: number, now: number, boundMs: number): boolean {
  return now - confirmedAt < boundMs;
}

/** The heartbeat period for a staleness bound. */
export function heartbeatEvery(boundMs: number): number {
  return Math.max(10, Math.floor(boundMs / 4));
}

/** How long from `now` until a window confirmed at `confirmedAt` lapses (at least 1 ms). */
export function lapseIn(confirmedAt: number, now: number, boundMs: number): number {
  return Math.max(1, confirmedAt + boundMs - now);
}
