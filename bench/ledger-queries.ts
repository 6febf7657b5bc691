/**
 * The usage ledger's served queries at millions of rows (docs/ledger.md, "Reads"):
 *
 *   scripts/node bench/ledger-queries.ts [--rows 2000000] [--out bench/results/…-ledger-queries.md]
 *
 * Starts its own PostgreSQL (initdb in a temporary directory, as the tests do), migrates, inserts
 * ROWS bookings with generate_series (1,000 accounts, one of them, `acct-hot`, holding a fifth of
 * the rows; 90 days of bookings), ANALYZEs, then runs EXPLAIN (ANALYZE, BUFFERS) on each query the
 * console serves (src/ledger/reads.ts: LEDGER_SQL) at its first page and at a deep cursor, and
 * prints (and writes) a markdown report: execution time and the plan's first lines.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { migrate } from '../src/ledger/migrations.ts';
import { LEDGER_SQL } from '../src/ledger/reads.ts';
import { startPostgres } from './lib/postgres.ts';

const { values } = parseArgs({ options: { rows: { type: 'string', default: '2000000' }, out: { type: 'string' } } });
const ROWS = Number(values.rows);
const DAY = 86_400_000;
const END = Date.UTC(2026, 11, 1);
const START = END - 90 * DAY;

const pgs = await startPostgres();
try {
  const pool = pgs.pool();
  await migrate(pool);
  const t0 = Date.now();
  // Row i: account acct-hot for every fifth, else acct-(i mod 999); booked at an even spread over 90 days.
  for (let from = 0; from < ROWS; from += 500_000) {
    const to = Math.min(ROWS, from + 500_000) - 1;
    await pool.query(
      `INSERT INTO keygate_usage (booking_id, account, key_id, request_id, model, amount_micros, input_tokens, output_tokens, cached_input_tokens,
         cache_write_tokens, reasoning_tokens, source, estimated, unpriced, price, booked_at, entry_id, entry_seq)
       SELECT 'b-' || g, CASE WHEN g % 5 = 0 THEN 'acct-hot' ELSE 'acct-' || (g % 999) END, 'key_' || (g % 50), 'req-' || g,
         (ARRAY['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4', 'gemini-2.5-pro'])[1 + g % 4], 1000 + g % 5000, 500 + g % 300, 100 + g % 50, g % 100, 0, g % 20,
         'meter', false, false, NULL, timestamptz 'epoch' + ($3::bigint + (g::bigint * $4::bigint / $5::bigint)) * interval '1 millisecond',
         ($3::bigint + (g::bigint * $4::bigint / $5::bigint))::text || '-0', 0
       FROM generate_series($1::bigint, $2::bigint) g`,
      [from, to, START, END - START, ROWS],
    );
  }
  await pool.query('VACUUM ANALYZE keygate_usage');
  const loadSeconds = (Date.now() - t0) / 1000;
  const size = (await pool.query("SELECT pg_size_pretty(pg_total_relation_size('keygate_usage')) AS total, pg_size_pretty(pg_relation_size('keygate_usage')) AS heap")).rows[0];
  const hot = Number((await pool.query("SELECT count(*) AS n FROM keygate_usage WHERE account = 'acct-hot'")).rows[0].n);
  const mid = START + 45 * DAY;
  const cases: [string, string, unknown[]][] = [
    ['export, one account, first page (1,000 rows)', LEDGER_SQL.exportAccount, [START, END, START - 1, '9223372036854775807', 'acct-hot', 1000, 0]],
    ['export, one account, a page 45 days in', LEDGER_SQL.exportAccount, [START, END, mid, 0, 'acct-hot', 1000, 0]],
    ['export, every account, first page', LEDGER_SQL.exportAll, [START, END, START - 1, '9223372036854775807', '', 1000, 0]],
    ['export, every account, a page 45 days in', LEDGER_SQL.exportAll, [START, END, mid, 0, '', 1000, 0]],
    ['page ledger: newest charges of one account (51 rows)', LEDGER_SQL.charges, ['acct-hot', END + DAY, '9223372036854775807', 51]],
    ['page ledger: charges 45 days back', LEDGER_SQL.charges, ['acct-hot', mid, 0, 51]],
    ['summary by day, 30 days, the hot account', LEDGER_SQL.sums('day'), ['acct-hot', END - 30 * DAY, END]],
    ['summary by model, 30 days, the hot account', LEDGER_SQL.sums('model'), ['acct-hot', END - 30 * DAY, END]],
    ['summary by key, 93 days, the hot account (every row of it)', LEDGER_SQL.sums('key'), ['acct-hot', START, END + 3 * DAY]],
    ['summary by day, 30 days, a small account', LEDGER_SQL.sums('day'), ['acct-7', END - 30 * DAY, END]],
  ];
  const lines: string[] = [
    `# Usage ledger queries at ${ROWS.toLocaleString('en-US')} rows`,
    '',
    `PostgreSQL ${(await pool.query('SHOW server_version')).rows[0].server_version} from \`initdb\` (fsync off, shared_buffers 64MB), \`keygate_usage\` of migration 1 with its indexes; ${ROWS.toLocaleString('en-US')} rows over 90 days and 1,000 accounts (\`acct-hot\`: ${hot.toLocaleString('en-US')} rows), loaded in ${loadSeconds.toFixed(1)} s; table ${size.total} (heap ${size.heap}). Each query run three times, the last measured (warm cache). The machine was shared and loaded while this ran: times are upper bounds.`,
    '',
    '| query | execution | plan |',
    '|---|---|---|',
  ];
  const details: string[] = [];
  for (const [name, sql, params] of cases) {
    let plan: string[] = [];
    for (let i = 0; i < 3; i++) plan = (await pool.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params)).rows.map((r) => r['QUERY PLAN'] as string);
    const exec = plan.find((l) => l.startsWith('Execution Time'))?.replace('Execution Time: ', '') ?? '?';
    const scan = plan.find((l) => /Index|Seq Scan|Bitmap/.test(l))?.trim().replace(/^->\s*/, '').replace(/\s+\(cost.*$/, '') ?? '?';
    lines.push(`| ${name} | ${exec} | ${scan.replace(/\|/g, '\\|')} |`);
    details.push(`### ${name}`, '', '```', ...plan, '```', '');
  }
  lines.push('', '## Plans', '', ...details);
  const report = lines.join('\n');
  process.stdout.write(`${report}\n`);
  if (values.out) writeFileSync(values.out, `${report}\n`);
} finally {
  await pgs.destroy();
}
