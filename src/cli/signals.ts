/**
 * The graceful stop of a long-running command (`serve`, `console`): on the first SIGTERM or SIGINT,
 * log it and run `shutdown()` (which bounds itself by `shutdownTimeoutMs`); exit 0 when it finishes,
 * 1 when it fails or hangs past the bound plus 2 s. Later signals are ignored.
 */
import type { Logger } from '../telemetry/logger.ts';

export function stopOnSignals(log: Logger, shutdownTimeoutMs: number, shutdown: () => Promise<void>): void {
  const exit = (code: number) => log.flush(() => process.exit(code));
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    // Backstop: the shutdown bounds itself by shutdownTimeoutMs; this only catches a hang.
    setTimeout(() => {
      log.error('shutdown did not finish in time; exiting');
      exit(1);
    }, shutdownTimeoutMs + 2_000).unref();
    shutdown().then(
      () => exit(0),
      (err: unknown) => {
        log.error({ err: { message: (err as Error)?.message } }, 'shutdown failed');
        exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
