/**
 * `keygate ledger`: the usage ledger's sink as a process of its own (docs/ledger.md), with
 * `/metrics`, `/healthz` on KEYGATE_LEDGER_ADMIN_PORT (default 9005, loopback unless
 * KEYGATE_LEDGER_ADMIN_HOST); `keygate ledger migrate` applies the migrations and exits.
 */
import { createServer } from 'node:http';
import type { Command } from 'commander';
import { ConfigError, loadConsoleConfig } from '../config.ts';
import { ledgerUrlOf } from '../console-api/config.ts';
import type { ConsoleService } from '../console/service.ts';
import { stopOnSignals } from './signals.ts';

/** With KEYGATE_LEDGER_URL set, `fn` runs with the console's usage reads on the ledger (no migration from a CLI read). */
export async function withLedgerReads<T>(kc: ConsoleService, fn: () => Promise<T>): Promise<T> {
  const url = ledgerUrlOf(process.env);
  if (url === undefined) return fn();
  const [{ openLedger }, { createLogger }] = await Promise.all([import('../ledger/index.ts'), import('../telemetry/logger.ts')]);
  const l = await openLedger(url, createLogger(process.env.KEYGATE_LOG_LEVEL ?? 'warn'), { max: 1, migrate: false });
  kc.useUsageHistory(l.reads);
  try {
    return await fn();
  } finally {
    kc.useUsageHistory(null);
    await l.close();
  }
}

export function registerLedgerCommands(program: Command): void {
  const ledger = program
    .command('ledger')
    .description('copy every usage-log entry into PostgreSQL (KEYGATE_LEDGER_URL), exactly once; see docs/ledger.md')
    .option('--redis <url>', 'Redis URL (env REDIS_URL; default redis://127.0.0.1:6379)')
    .action(async (o: { redis?: string }) => {
      const [{ runLedger }, { createLogger }, { Registry, collectDefaultMetrics }] = await Promise.all([import('../ledger/run.ts'), import('../telemetry/logger.ts'), import('prom-client')]);
      const config = loadConsoleConfig({ redisUrl: o.redis });
      const url = ledgerUrlOf(process.env);
      if (url === undefined) throw new ConfigError('keygate ledger needs KEYGATE_LEDGER_URL (postgres://…)');
      const log = createLogger(process.env.KEYGATE_LOG_LEVEL ?? 'info', undefined, { keyPrefix: config.keyPrefix });
      const registry = new Registry();
      collectDefaultMetrics({ register: registry, prefix: 'keygate_ledger_process_' });
      const running = await runLedger({ ledgerUrl: url, redisUrl: config.redisUrl, namespace: config.redisNamespace, log, registry, sink: true });
      const port = Number(process.env.KEYGATE_LEDGER_ADMIN_PORT ?? 9005);
      const admin = createServer((req, res) => {
        if (req.url === '/metrics') {
          void registry.metrics().then((m) => res.writeHead(200, { 'content-type': registry.contentType }).end(m));
        } else if (req.url === '/healthz') res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
        else res.writeHead(404).end();
      });
      await new Promise<void>((resolve, reject) => admin.once('error', reject).listen(port, process.env.KEYGATE_LEDGER_ADMIN_HOST ?? '127.0.0.1', resolve));
      log.info({ port: (admin.address() as { port: number }).port }, 'keygate ledger: metrics listening');
      stopOnSignals(log, 10_000, async () => {
        admin.close();
        await running.close();
      });
    });
  ledger
    .command('migrate')
    .description('apply the ledger\'s migrations to KEYGATE_LEDGER_URL and exit')
    .action(async () => {
      const [{ openLedger, appliedVersions }, { createLogger }] = await Promise.all([import('../ledger/index.ts'), import('../telemetry/logger.ts')]);
      const url = ledgerUrlOf(process.env);
      if (url === undefined) throw new ConfigError('keygate ledger migrate needs KEYGATE_LEDGER_URL (postgres://…)');
      const log = createLogger(process.env.KEYGATE_LOG_LEVEL ?? 'info');
      const l = await openLedger(url, log, { max: 1 });
      try {
        process.stdout.write(`ledger schema at version ${(await appliedVersions(l.pool)).at(-1) ?? 0}\n`);
      } finally {
        await l.close();
      }
    });
}
