/**
 * The usage ledger (docs/ledger.md): PostgreSQL behind `KEYGATE_LEDGER_URL`. Imported by the
 * console (`keygate console`) and by `keygate ledger`; never by the sidecar's runtime (which loads
 * only the booking write, ./book.ts, and what it imports: no PostgreSQL module).
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { migrate } from './migrations.ts';
import { LedgerReads } from './reads.ts';

export { migrate, MIGRATIONS, appliedVersions } from './migrations.ts';
export { LedgerReads, type UsageHistory } from './reads.ts';
export { LedgerSink, type SinkOptions } from './sink.ts';
export { LedgerMetrics } from './metrics.ts';
export { usageRow } from './row.ts';

export interface Ledger {
  readonly pool: pg.Pool;
  readonly reads: LedgerReads;
  close(): Promise<void>;
}

/** The URL without its password, for logs and errors. */
export function shownLedgerUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

/**
 * A pool on the ledger's database, migrated. A connection lost while idle (PostgreSQL restarted)
 * is logged and replaced on next use; it never ends the process.
 */
export async function openLedger(url: string, log: Logger, o: { max?: number; migrate?: boolean } = {}): Promise<Ledger> {
  const pool = new pg.Pool({ connectionString: url, max: o.max ?? 4, connectionTimeoutMillis: 5000, idleTimeoutMillis: 30_000, query_timeout: 60_000, application_name: 'keygate-ledger' });
  pool.on('error', (err) => log.warn({ err: { message: err.message } }, 'ledger: an idle PostgreSQL connection failed'));
  try {
    if (o.migrate !== false) {
      const applied = await migrate(pool);
      if (applied.length > 0) log.info({ applied, db: shownLedgerUrl(url) }, 'ledger: migrations applied');
    }
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  return { pool, reads: new LedgerReads(pool), close: () => pool.end() };
}
