/**
 * Start and stop mechanics for the sidecar's servers: listening on a port, and the shutdown (drain,
 * then close transports, admin port and store, all bounded by one deadline). `src/main.ts` only
 * says what there is to start and close.
 */
import type { Server } from 'node:net';
import type { Logger } from 'pino';

/** Listens on `host:port` (0 = a free port); resolves with the port bound, rejects on a listen error. */
export async function listenOn(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  return typeof addr === 'object' && addr ? addr.port : port;
}

/** A transport or server the shutdown closes; `close` lets in-flight work finish within `timeoutMs`. */
export interface Closable {
  readonly name: string;
  close(timeoutMs: number): Promise<void>;
}

/** Time kept back from the drain delay for the closes themselves when the deadline is near. */
const CLOSE_RESERVE_MS = 1000;

/**
 * Closes every entry at once, each given the time left until `deadline` (ms since the epoch). A
 * failing close is logged with its name, never thrown: the others still close.
 */
export async function closeAll(list: readonly Closable[], deadline: number, log: Logger): Promise<void> {
  await Promise.all(
    list.map((c) =>
      c.close(Math.max(0, deadline - Date.now())).catch((err: unknown) => {
        log.error({ err: { message: (err as Error)?.message }, closable: c.name }, 'close failed');
      }),
    ),
  );
}

export interface ShutdownPlan {
  /** Bound on the whole sequence, from the first call. */
  readonly shutdownTimeoutMs: number;
  /** Runs first, at once: readiness false, gRPC health NOT_SERVING. */
  readonly drain: () => void;
  /** Closed together once the drain delay is over (in-flight checks finish). */
  readonly transports: readonly Closable[];
  /** Closed after the transports, so `/readyz` keeps answering during the drain. */
  readonly admin: Closable;
  /** Closed last; a failure here rejects the shutdown. */
  readonly store: { close(): Promise<void> };
}

/**
 * The graceful stop: returns `stop(drainDelayMs)`, which drains, keeps serving for the drain delay
 * (cut short so that at least 1 s of `shutdownTimeoutMs` is left for the closes), then closes
 * transports, admin port and store. Runs once; later calls get the same promise.
 */
export function shutdownSequence(plan: ShutdownPlan, log: Logger): (drainDelayMs: number) => Promise<void> {
  let stopping: Promise<void> | undefined;
  return (drainDelayMs) =>
    (stopping ??= (async () => {
      const deadline = Date.now() + plan.shutdownTimeoutMs;
      plan.drain();
      log.info({ drainDelayMs, shutdownTimeoutMs: plan.shutdownTimeoutMs }, 'draining: not ready, still serving');
      if (drainDelayMs > 0) await sleep(Math.min(drainDelayMs, Math.max(0, deadline - Date.now() - CLOSE_RESERVE_MS)));
      await closeAll(plan.transports, deadline, log);
      await closeAll([plan.admin], deadline, log);
      await plan.store.close();
      log.info('stopped');
    })());
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
