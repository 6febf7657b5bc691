/**
 * A running sink with its own Redis connection and PostgreSQL pool: what `keygate console` (with
 * `KEYGATE_LEDGER_URL`) and `keygate ledger` start. Settings from the environment (docs/ledger.md):
 * KEYGATE_LEDGER_CLAIM_IDLE_MS (default 30000), KEYGATE_LEDGER_BATCH (default 1000) and the test
 * hook KEYGATE_LEDGER_TEST_PAUSE_AFTER_COMMIT_MS.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { schema } from '../schema/redis-schema.ts';
import { connectRedis } from '../store/redis.ts';
import { openLedger, type Ledger } from './index.ts';
import { LedgerMetrics } from './metrics.ts';
import { LedgerSink } from './sink.ts';

export interface RunningLedger {
  readonly ledger: Ledger;
  readonly sink: LedgerSink | null;
  close(): Promise<void>;
}

function envInt(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new Error(`invalid setting ${name}: must be an integer from ${min} to ${max}`);
  return n;
}

/** Opens (and migrates) the ledger; with `sink`, starts the sink on Redis. */
export async function runLedger(o: { ledgerUrl: string; redisUrl: string; namespace: string; log: Logger; registry?: Registry; sink: boolean; env?: NodeJS.ProcessEnv }): Promise<RunningLedger> {
  const env = o.env ?? process.env;
  const claimIdleMs = envInt(env, 'KEYGATE_LEDGER_CLAIM_IDLE_MS', 100, 3_600_000);
  const batch = envInt(env, 'KEYGATE_LEDGER_BATCH', 1, 10_000);
  const pauseAfterCommitMs = envInt(env, 'KEYGATE_LEDGER_TEST_PAUSE_AFTER_COMMIT_MS', 0, 600_000);
  const ledger = await openLedger(o.ledgerUrl, o.log, { max: 6 });
  if (!o.sink) return { ledger, sink: null, close: () => ledger.close() };
  const redis = connectRedis(o.redisUrl, { commandTimeoutMs: 10_000, connectionName: 'keygate-ledger', queueWhileOffline: false });
  redis.on('error', (err: Error) => o.log.debug({ err: { message: err.message } }, 'ledger: Redis connection error'));
  const sink = new LedgerSink(redis, ledger.pool, schema(o.namespace), o.log, {
    claimIdleMs,
    batch,
    pauseAfterCommitMs,
    metrics: o.registry ? new LedgerMetrics(o.registry) : undefined,
  });
  sink.start();
  o.log.info({ consumer: sink.consumer }, 'ledger sink started');
  return {
    ledger,
    sink,
    async close() {
      await sink.stop();
      redis.disconnect();
      await ledger.close();
    },
  };
}
