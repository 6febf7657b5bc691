/**
 * What `main` starts and stops: a server that listens, reports whether it serves (gRPC health;
 * a no-op where there is none), counts checks in flight and closes gracefully.
 */
import type { Closable } from '../lifecycle.ts';

export interface Transport extends Closable {
  /** Resolves with the port bound (a configured 0 picks a free one). */
  listen(): Promise<number>;
  setServing(serving: boolean): void;
  readonly inFlight: number;
}
