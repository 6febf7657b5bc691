/**
 * The ledger's schema in PostgreSQL, as versioned migrations (docs/ledger.md, "Schema"). Applied in
 * order at start (`keygate console`, `keygate ledger`) and by `keygate ledger migrate`, each in its
 * own transaction, under a transaction-level advisory lock so that processes starting together
 * apply each version once; `keygate_ledger_migrations` lists the versions applied. A migration is
 * never edited once released: a change is a new version.
 */
import type pg from 'pg';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'keygate_usage',
    sql: `
CREATE TABLE keygate_usage (
  id bigserial PRIMARY KEY,
  booking_id text NOT NULL,
  account text NOT NULL,
  key_id text NOT NULL,
  request_id text NOT NULL,
  model text,
  amount_micros bigint NOT NULL CHECK (amount_micros >= 0),
  input_tokens bigint,
  output_tokens bigint,
  cached_input_tokens bigint,
  cache_write_tokens bigint,
  reasoning_tokens bigint,
  source text NOT NULL CHECK (source IN ('meter', 'record')),
  estimated boolean NOT NULL DEFAULT false,
  unpriced boolean NOT NULL DEFAULT false,
  price jsonb,
  booked_at timestamptz NOT NULL,
  entry_id text NOT NULL,
  entry_seq bigint NOT NULL,
  extra jsonb,
  written_at timestamptz NOT NULL DEFAULT now()
);
-- one row per booking: idempotency is per account, as in Redis (usagereq:{account}:{id})
CREATE UNIQUE INDEX keygate_usage_booking ON keygate_usage (account, booking_id);
-- an account's usage in time order: the export of one account, the summary, the page's ledger
CREATE INDEX keygate_usage_account_time ON keygate_usage (account, booked_at, entry_seq, id);
-- every account's usage in time order: the export of all accounts
CREATE INDEX keygate_usage_time ON keygate_usage (booked_at, entry_seq, account, id);
-- one key's usage in time order
CREATE INDEX keygate_usage_key_time ON keygate_usage (key_id, booked_at);
`,
  },
];

/** Arbitrary but fixed: the advisory lock every keygate process takes to migrate. */
const MIGRATION_LOCK = 7_242_037_001;

/** Applies the versions not yet applied, in order; returns those it applied. Safe to run from several processes at once. */
export async function migrate(pool: pg.Pool, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  const applied: number[] = [];
  const client = await pool.connect();
  let broken: Error | undefined;
  const lost = (err: Error) => {
    broken = err; // the server went away between statements: the next one fails, and the process lives
  };
  client.on('error', lost);
  try {
    await client.query('CREATE TABLE IF NOT EXISTS keygate_ledger_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())').catch(async (err: unknown) => {
      // two processes creating the table at once: one wins, the other sees a unique violation
      if ((err as { code?: string }).code !== '23505' && (err as { code?: string }).code !== '42P07') throw err;
    });
    for (const m of migrations) {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
        const done = await client.query('SELECT 1 FROM keygate_ledger_migrations WHERE version = $1', [m.version]);
        if (done.rowCount === 0) {
          await client.query(m.sql);
          await client.query('INSERT INTO keygate_ledger_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
          applied.push(m.version);
        }
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    }
  } finally {
    client.off('error', lost);
    client.release(broken);
  }
  return applied;
}

/** The versions applied, ascending (empty before the first migration). */
export async function appliedVersions(pool: pg.Pool): Promise<number[]> {
  const r = await pool.query<{ version: number }>("SELECT version FROM keygate_ledger_migrations ORDER BY version").catch((err: unknown) => {
    if ((err as { code?: string }).code === '42P01') return { rows: [] as { version: number }[] };
    throw err;
  });
  return r.rows.map((x) => x.version);
}
