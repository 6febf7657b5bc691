/**
 * The README's metric list and docs/operations.md's metric table name every metric keygate exports:
 * a running sidecar (metering on, the default; per-account counters on) and a running console are
 * scraped, and each `# TYPE` name must appear in both documents. The console's process metrics
 * (prom-client defaults under `keygate_console_`) are named as a family, as the sidecar's
 * `process_*`/`nodejs_*` are.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestConsole, type TestConsole } from './helpers/console-api.ts';
import { startPostgres, type PostgresServer } from './helpers/postgres.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startTestSidecar, type TestSidecar } from './helpers/sidecars.ts';

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const OPERATIONS = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8');
const typeNames = (text: string) => [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
const defaults = (n: string) => /^(keygate_console_)?(process|nodejs)_/.test(n);

describe('every exported metric is documented', () => {
  let redis: RedisServer;
  let pgs: PostgresServer | undefined;
  let sc: TestSidecar;
  let con: TestConsole;
  let names: string[];

  beforeAll(async () => {
    redis = await startRedis();
    sc = await startTestSidecar(redis.url, { metricsAccountLabels: true });
    pgs = await startPostgres(); // the console with the usage ledger: its metrics are listed too
    con = await startTestConsole(redis.url, 'acct-docs', { KEYGATE_LEDGER_URL: pgs.url });
    const sidecar = await (await fetch(`http://127.0.0.1:${sc.sidecar.adminPort}/metrics`)).text();
    const console = await (await fetch(`${con.base}/metrics`)).text();
    names = [...new Set([...typeNames(sidecar), ...typeNames(console)])].filter((n) => !defaults(n)).sort();
  }, 60_000);

  afterAll(async () => {
    await sc?.close();
    await con?.srv.close();
    await pgs?.destroy();
    if (redis) await destroyRedis(redis);
  });

  it('scrapes the metering, per-account and console metrics (the check is not vacuous)', () => {
    expect(names).toEqual(expect.arrayContaining(['keygate_decisions_total', 'keygate_metering_bookings_total', 'keygate_account_decisions_total', 'keygate_console_requests_total', 'keygate_ledger_lag_seconds']));
    expect(names.length).toBeGreaterThan(25);
  });

  it.each([
    ['README.md', README],
    ['docs/operations.md', OPERATIONS],
  ])('%s names each of them', (_doc, text) => {
    const missing = names.filter((n) => !new RegExp(`\\b${n}\\b`).test(text));
    expect(missing).toEqual([]);
    // the defaults as families
    expect(text).toMatch(/process_\*/);
  });
});
