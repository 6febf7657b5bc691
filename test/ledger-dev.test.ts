/**
 * `keygate dev --ledger URL` end to end: a request through the dev gateway is metered by the
 * sidecar, booked in Redis and copied by the console's sink into PostgreSQL; the console's usage
 * export reads it from there. Without `--ledger`, dev stays Redis-only even with KEYGATE_LEDGER_URL
 * in the environment.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startDev } from '../src/dev/index.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { callApi } from './helpers/console-api.ts';
import { startPostgres, type PostgresServer } from './helpers/postgres.ts';
import { freePort } from './helpers/redis-server.ts';
import { until } from './helpers/until.ts';

let pgs: PostgresServer;
let pool: pg.Pool;
let dir: string;

async function ports(): Promise<number[]> {
  const p: number[] = [];
  while (p.length < 6) {
    const n = await freePort();
    if (!p.includes(n)) p.push(n);
  }
  return p;
}

beforeAll(async () => {
  pgs = await startPostgres();
  pool = pgs.pool();
  dir = mkdtempSync(join(tmpdir(), 'kg-ledger-dev-'));
}, 60_000);

afterAll(async () => {
  await pgs?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('with --ledger, a metered request lands in PostgreSQL and the export reads it there; without, Redis only', async () => {
  const p = await ports();
  const dev = await startDev({ dir, redisPort: p[0]!, grpcPort: p[1]!, httpPort: p[2]!, adminPort: p[3]!, gatewayPort: p[4]!, consolePort: p[5]!, ledger: pgs.url }, createLogger('silent'));
  try {
    const res = await fetch(`http://127.0.0.1:${p[4]}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${dev.ctx.demoKey!.key}`, 'content-type': 'application/json', 'x-request-id': 'dev-ledger-1' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await res.text();
    const row = await until('the metered row', async () => (await pool.query("SELECT * FROM keygate_usage WHERE request_id = 'dev-ledger-1'")).rows[0], 20_000);
    // the stub answers a dated name, as the provider does; the row says why its amount (the catalog's price)
    expect(row).toMatchObject({ account: 'demo', source: 'meter', model: 'gpt-4o-mini-2024-07-18' });
    expect(row.booking_id).toMatch(/^kb:[0-9a-f]{32}$/);
    expect(row.price).toMatchObject({ rule: 'catalog', source: 'catalog', model: 'openai/gpt-4o-mini' });
    expect(Number(row.input_tokens)).toBeGreaterThan(0);
    const exp = await callApi(dev.ctx.console!.url, 'GET', '/v1/usage?since=1970-01-01T00:00:00Z', { token: dev.ctx.console!.token });
    expect(exp.status).toBe(200);
    expect(JSON.stringify(exp.body)).toContain('dev-ledger-1');
  } finally {
    await dev.stop();
  }
  // the same state, started again without --ledger but with the variable set: the console reads Redis (trimmed by the sink)
  const before = process.env.KEYGATE_LEDGER_URL;
  process.env.KEYGATE_LEDGER_URL = pgs.url;
  const q = await ports();
  const plain = await startDev({ dir, redisPort: q[0]!, grpcPort: q[1]!, httpPort: q[2]!, adminPort: q[3]!, gatewayPort: q[4]!, consolePort: q[5]! }, createLogger('silent'));
  try {
    const exp = await callApi(plain.ctx.console!.url, 'GET', '/v1/usage?since=1970-01-01T00:00:00Z', { token: plain.ctx.console!.token });
    expect(exp.status).toBe(200);
    expect(JSON.stringify(exp.body)).not.toContain('dev-ledger-1');
  } finally {
    await plain.stop();
    if (before === undefined) delete process.env.KEYGATE_LEDGER_URL;
    else process.env.KEYGATE_LEDGER_URL = before;
  }
}, 180_000);
