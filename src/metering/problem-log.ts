/**
 * Bounded warnings for responses read with a problem (a model other than the one checked, a cut
 * stream, an identity mismatch): at most `perWindow` lines in a window of `windowMs`; the rest are
 * counted and told in one line when the next problem arrives after the window (the metrics count
 * every one: `keygate_metering_anomalies_total`, `keygate_metering_failures_total`). An upstream
 * that answers every response with another model must not turn each response into a log line.
 */
import { systemClock, type Clock } from '../core/clock.ts';

export class ProblemLog {
  readonly #perWindow: number;
  readonly #windowMs: number;
  readonly #now: () => number;
  #windowStart = -Infinity;
  #told = 0;
  #held = 0;

  constructor(o: { perWindow?: number; windowMs?: number; clock?: Clock } = {}) {
    this.#perWindow = o.perWindow ?? 10;
    this.#windowMs = o.windowMs ?? 1000;
    this.#now = (o.clock ?? systemClock).now;
  }

  /**
   * Whether this problem gets its own line; `held` (when above 0) is how many were held back in
   * the window that just ended, to be told in one line first.
   */
  take(): { readonly tell: boolean; readonly held: number } {
    const now = this.#now();
    let held = 0;
    if (now - this.#windowStart >= this.#windowMs) {
      held = this.#held;
      this.#windowStart = now;
      this.#told = 0;
      this.#held = 0;
    }
    if (this.#told < this.#perWindow) {
      this.#told++;
      return { tell: true, held };
    }
    this.#held++;
    return { tell: false, held };
  }
}
