/**
 * Gateway configuration problems seen while checking requests (a proxy that sends no body to the
 * key check, so restricted keys cannot be served on a route): logged for the operator once per
 * interval per problem, with how many were suppressed in between, never once per request.
 */
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../core/clock.ts';

export class GatewayProblemLog {
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #now: () => number;
  readonly #seen = new Map<string, { at: number; suppressed: number }>();

  constructor(log: Logger, intervalMs = 60_000, clock: Clock = systemClock) {
    this.#log = log;
    this.#intervalMs = intervalMs;
    this.#now = clock.now;
  }

  /** Logs `problem` (a fixed sentence) with `fields`, unless it was logged less than an interval ago. */
  note(problem: string, fields: Record<string, unknown>): void {
    const t = this.#now();
    const last = this.#seen.get(problem);
    if (last !== undefined && t - last.at < this.#intervalMs) {
      last.suppressed++;
      return;
    }
    this.#seen.set(problem, { at: t, suppressed: 0 });
    this.#log.warn({ ...fields, configProblem: true, suppressedSinceLast: last?.suppressed ?? 0 }, problem);
  }
}
