/**
 * Wiring of `keygate console`: config → console library → management API server. `startConsole`
 * returns a handle that the CLI and the tests use, with the same graceful stop as the sidecar
 * (readiness false at once, keep serving for the drain delay, then close in-flight requests and
 * the store, all bounded by the shutdown timeout).
 */
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ConsoleService } from '../console/service.ts';
import { shutdownSequence } from '../lifecycle.ts';
import type { ConsoleApiConfig } from './config.ts';
import { buildConsoleApp, type ServedRoute } from './server.ts';
import { startEventDelivery, type EventDelivery } from '../events/service.ts';
import type { RunningLedger } from '../ledger/run.ts';

export interface ConsoleServer {
  readonly port: number;
  readonly app: FastifyInstance;
  readonly console: ConsoleService;
  /** Every method and path served (HEAD twins left out). */
  readonly routes: readonly ServedRoute[];
  ready(): boolean;
  /** Graceful stop (SIGTERM): drain delay, then close. */
  shutdown(): Promise<void>;
  /** `shutdown` without the drain delay. */
  close(): Promise<void>;
}

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** `oidcClockSkewSeconds`: tests only, a clock this far off for the ID token's time checks. */
export async function startConsole(config: ConsoleApiConfig, log: Logger, opts: { revealKey?: string; credentialKey?: string; oidcClockSkewSeconds?: number } = {}): Promise<ConsoleServer> {
  // `wallet.enforced` is what the live sidecars publish; this console's own setting only when none has.
  const mc = new ConsoleService({ redis: config.redisUrl, namespace: config.redisNamespace, keyPrefix: config.keyPrefix, revealKey: opts.revealKey, credentialKey: opts.credentialKey, requireWallet: config.requireWallet, usageLogMaxEntries: config.usageLogMax });
  let draining = false;
  const ready = () => !draining && mc.redis.status === 'ready';
  let events: EventDelivery | undefined;
  let ledger: RunningLedger | undefined;
  try {
    const { app, routes, registry } = await buildConsoleApp(mc, { config, version, ready, oidcClockSkewSeconds: opts.oidcClockSkewSeconds }, log);
    if (config.ledgerUrl !== undefined) {
      // the usage ledger (docs/ledger.md): migrated at start, its sink run here unless KEYGATE_LEDGER_SINK=false, the usage reads from it
      const { runLedger } = await import('../ledger/run.ts');
      ledger = await runLedger({ ledgerUrl: config.ledgerUrl, redisUrl: config.redisUrl, namespace: config.redisNamespace, log, registry, sink: process.env.KEYGATE_LEDGER_SINK !== 'false' });
      mc.useUsageHistory(ledger.ledger.reads);
    }
    events = startEventDelivery({ redis: mc.redis, namespace: mc.schema.ns }, log, { revealKey: opts.revealKey }); // webhook delivery (docs/events.md)
    await app.listen({ port: config.port, host: config.host });
    const addr = app.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.port;
    log.info({ port }, 'keygate console listening');
    const stop = shutdownSequence(
      {
        shutdownTimeoutMs: config.shutdownTimeoutMs,
        drain: () => {
          draining = true;
        },
        transports: [
          { name: 'events', close: (timeoutMs) => events!.stop(timeoutMs) },
          { name: 'ledger', close: async () => ledger?.close() },
          {
            name: 'console',
            close: async (timeoutMs) => {
              const cut = setTimeout(() => app.server.closeAllConnections(), timeoutMs);
              try {
                await app.close();
              } finally {
                clearTimeout(cut);
              }
            },
          },
        ],
        admin: { name: 'none', close: async () => {} },
        store: mc,
      },
      log,
    );
    return { port, app, console: mc, routes, ready, shutdown: () => stop(config.drainDelayMs), close: () => stop(0) };
  } catch (err) {
    await events?.stop();
    await ledger?.close();
    await mc.close();
    throw err;
  }
}
