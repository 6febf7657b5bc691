/**
 * The usage ledger against real processes (docs/ledger.md): redis-server, PostgreSQL (initdb in a
 * temporary directory), the sink in process and as `bin/keygate ledger`. Every booking once in
 * `keygate_usage`, none lost; the log trimmed only of acknowledged entries; the cap's drops counted.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { ledgerPage } from '../src/console/ledger.ts';
import { LedgerReads, LedgerSink, migrate } from '../src/ledger/index.ts';
import { callApi, startTestConsole } from './helpers/console-api.ts';
import { LEDGER_GROUP } from '../src/ledger/scripts.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { ledgerChild } from './helpers/ledger-child.ts';
import { startPostgres, type PostgresServer } from './helpers/postgres.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { until } from './helpers/until.ts';

const log = createLogger('silent');
const kcRevealKey = `base64:${randomBytes(32).toString('base64')}`;
const s = schema();

describe('usage ledger', () => {
  let redis: RedisServer;
  let pgs: PostgresServer;
  let db: Redis;
  let pool: pg.Pool;
  let kc: KeyConsole;
  let keyId: string;

  beforeAll(async () => {
    redis = await startRedis(['--appendonly', 'yes', '--appendfsync', 'always']);
    try {
      pgs = await startPostgres();
    } catch (err) {
      await destroyRedis(redis);
      throw err;
    }
    db = redis.client();
    pool = pgs.pool();
    await migrate(pool);
    kc = new KeyConsole({ redis: redis.url, usageLogMaxEntries: 100, revealKey: kcRevealKey });
    keyId = (await kc.createKey({ account: 'acme', name: 'ledger' })).id;
  }, 60_000);

  afterAll(async () => {
    await kc?.close();
    await pgs?.destroy();
    if (redis) await destroyRedis(redis);
  });

  const rows = async (account: string) => Number((await pool.query('SELECT count(*) AS n FROM keygate_usage WHERE account = $1', [account])).rows[0].n);
  const book = async (account: string, ids: string[], key = keyId) => {
    for (const id of ids) await kc.recordUsage({ keyId: key, amountMicros: 7, requestId: id, model: 'gpt-4o', inputTokens: 10, outputTokens: 3 });
    void account;
  };

  it('migrations are versioned and safe to run twice, from two processes at once', async () => {
    expect(await Promise.all([migrate(pool), migrate(pool)])).toEqual([[], []]);
    const v = await pool.query('SELECT version FROM keygate_ledger_migrations');
    expect(v.rows.map((r) => r.version)).toEqual([1]);
  });

  it('copies each booking once, with every field, acknowledges after the commit and trims what it acknowledged', async () => {
    await book('acme', ['r-1', 'r-2', 'r-3']);
    const sink = new LedgerSink(db, pool, s, log, { pollMs: 20, accountsEveryMs: 50 });
    sink.start();
    try {
      await until('3 rows', async () => (await rows('acme')) === 3);
      await until('the log trimmed', async () => (await db.xlen(s.usageLog('acme'))) === 0);
      const r = (await pool.query("SELECT * FROM keygate_usage WHERE booking_id = 'r-2'")).rows[0];
      expect(r).toMatchObject({ account: 'acme', key_id: keyId, request_id: 'r-2', model: 'gpt-4o', amount_micros: '7', input_tokens: '10', output_tokens: '3', source: 'record', estimated: false });
      // a router's record says why its amount: the router priced it
      expect(r.price).toMatchObject({ rule: 'recorded', source: 'record', parts: { recorded: '7' } });
      // a repeat of a booked request id books nothing in Redis, nothing twice here
      await book('acme', ['r-2', 'r-4']);
      await until('4 rows', async () => (await rows('acme')) === 4);
      expect(((await db.xpending(s.usageLog('acme'), LEDGER_GROUP)) as [number])[0]).toBe(0);
      expect(sink.lagMs).toBe(0);
    } finally {
      await sink.stop();
    }
  });

  it('with the ledger behind, the cap drops the oldest entries and counts those not acknowledged', async () => {
    // The group exists (the sink made it); no sink runs now: 150 bookings against a cap of 100.
    await book('acme', Array.from({ length: 150 }, (_, i) => `cap-${i}`));
    expect(await db.xlen(s.usageLog('acme'))).toBe(100);
    expect(await db.get(s.usageDropped('acme'))).toBe('50');
    const sink = new LedgerSink(db, pool, s, log, { pollMs: 20, accountsEveryMs: 50 });
    sink.start();
    try {
      await until('the 100 kept entries written', async () => (await rows('acme')) === 104);
      await until('dropped read', () => sink.dropped === 50);
      const kept = await pool.query("SELECT min(booking_id) AS lo FROM keygate_usage WHERE booking_id LIKE 'cap-%' AND length(booking_id) = 6");
      expect(kept.rows[0].lo).toBe('cap-50');
    } finally {
      await sink.stop();
    }
  });

  it('with the ledger, the export, the summary and the page ledger read PostgreSQL: what Redis trimmed is there', async () => {
    // acme: 4 + 100 bookings in the table; the Redis log holds none of them now (trimmed once acknowledged)
    expect(await db.xlen(s.usageLog('acme'))).toBe(0);
    const redisOnly: string[] = [];
    for await (const e of kc.exportUsage({ since: 0, account: 'acme' })) redisOnly.push(e.requestId);
    expect(redisOnly).toEqual([]);
    kc.useUsageHistory(new LedgerReads(pool));
    try {
      const all: string[] = [];
      let last = 0;
      for await (const e of kc.exportUsage({ since: 0, account: 'acme' })) {
        expect(e.time).toBeGreaterThanOrEqual(last);
        last = e.time;
        all.push(e.requestId);
      }
      expect(all.length).toBe(104);
      expect(new Set(all).size).toBe(104);
      expect(all.slice(0, 4)).toEqual(['r-1', 'r-2', 'r-3', 'r-4']);
      // paged in small pages, every account: the same rows, once
      const paged: string[] = [];
      for await (const e of (kc.usageHistory as LedgerReads).exportUsage({ sinceMs: 0, pageSize: 7 })) if (e.account === 'acme') paged.push(e.requestId);
      expect(paged).toEqual(all);
      const sum = await kc.usageSummary('acme', { since: Date.now() - 86_400_000, until: Date.now() + 60_000, groupBy: 'model' });
      expect(sum.total.requests).toBe(104);
      expect(sum.total.amountMicros).toBe(4 * 7 + 100 * 7);
      expect(sum.groups.map((g) => [g.group, g.requests])).toEqual([['gpt-4o', 104]]);
      expect(sum.truncated).toBe(false);
      // the page's ledger, newest first, 30 a page: every charge once
      const charges: string[] = [];
      let cursor: { time: number; id: string } | null = null;
      for (let i = 0; i < 10; i++) {
        const page = await ledgerPage(kc, 'acme', { limit: 30, cursor });
        charges.push(...page.entries.filter((e) => e.type === 'charge').map((e) => e.requestId!));
        if (page.next === null) break;
        const l = page.entries[page.entries.length - 1]!;
        cursor = { time: l.time, id: l.id };
      }
      expect(charges.length).toBe(104);
      expect(new Set(charges).size).toBe(104);
      expect(charges[0]).toBe('cap-149');
    } finally {
      kc.useUsageHistory(null);
    }
  });

  it('keygate console with KEYGATE_LEDGER_URL serves GET /v1/usage from the ledger', async () => {
    const con = await startTestConsole(redis.url, 'acme', { KEYGATE_LEDGER_URL: pgs.url, KEYGATE_LEDGER_CLAIM_IDLE_MS: '500' });
    try {
      const r = await callApi(con.base, 'GET', `/v1/usage?since=1970-01-01T00:00:00Z&account=acme`, { token: con.admin });
      expect(r.status).toBe(200);
      expect(JSON.stringify(r.body)).toContain('cap-60');
      const n = (JSON.stringify(r.body).match(/"request_id"/g) ?? []).length;
      expect(n).toBe(104);
    } finally {
      await con.srv.close();
    }
  });

  it('keygate usage export with KEYGATE_LEDGER_URL prints every booking from the ledger', async () => {
    const run = (env: Record<string, string>) =>
      new Promise<string>((resolve, reject) => {
        const p = spawn(fileURLToPath(new URL('../bin/keygate', import.meta.url)), ['usage', 'export', '--since', '1970-01-01', '--account', 'acme'], { env: { ...process.env, KEYGATE_NODE: process.execPath, REDIS_URL: redis.url, ...env } });
        let out = '';
        p.stdout.on('data', (b: Buffer) => (out += b.toString()));
        p.stderr.on('data', (b: Buffer) => (out += b.toString()));
        p.on('error', reject);
        p.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${out}`))));
      });
    const fromLedger = (await run({ KEYGATE_LEDGER_URL: pgs.url })).trim().split('\n');
    expect(fromLedger.length).toBe(104);
    expect(JSON.parse(fromLedger[0]!)).toMatchObject({ request_id: 'r-1', account: 'acme', amount_micros: 7 });
    // without it: the Redis log, which the ledger trimmed
    expect((await run({ KEYGATE_LEDGER_URL: '' })).trim()).toBe('');
  }, 60_000);

  it('consumers of stopped sinks with nothing pending leave the group', async () => {
    const key = s.usageLog('acme');
    await db.xgroup('CREATECONSUMER', key, LEDGER_GROUP, 'gone-sink');
    await new Promise((r) => setTimeout(r, 300));
    const names = async () => ((await db.xinfo('CONSUMERS', key, LEDGER_GROUP)) as unknown[][]).map((c) => String(c[1]));
    expect(await names()).toContain('gone-sink');
    const sink = new LedgerSink(db, pool, s, log, { pollMs: 20, accountsEveryMs: 50, forgetIdleMs: 200 });
    sink.start();
    try {
      await until('gone-sink removed', async () => !(await names()).includes('gone-sink'), 10_000);
    } finally {
      await sink.stop();
    }
  });

  it('an entry PostgreSQL could not store as it is (a NUL in a field) does not hold up the log', async () => {
    // written by hand: a metered model name is the upstream's text, and PostgreSQL's text holds no NUL
    await db.xadd(s.usageLog('acme'), '*', 'key', keyId, 'req', 'nul-1', 'amount', '5', 'model', 'evil\u0000model', 'src', 'meter');
    await book('acme', ['after-nul']);
    const sink = new LedgerSink(db, pool, s, log, { pollMs: 20, accountsEveryMs: 50 });
    sink.start();
    try {
      await until('both rows', async () => (await pool.query("SELECT model FROM keygate_usage WHERE booking_id IN ('nul-1', 'after-nul') ORDER BY booking_id")).rowCount === 2, 10_000);
      expect((await pool.query("SELECT model FROM keygate_usage WHERE booking_id = 'nul-1'")).rows[0].model).toBe('evil\uFFFDmodel');
      await until('nothing pending', async () => ((await db.xpending(s.usageLog('acme'), LEDGER_GROUP)) as [number])[0] === 0);
    } finally {
      await sink.stop();
    }
  });

  it('a sink SIGKILLed between its commit and its acknowledgement: another claims the entries, nothing twice', async () => {
    // the group on the log first, as a running sink makes it; this console keeps the default cap
    await db.xgroup('CREATE', s.usageLog('beta'), LEDGER_GROUP, '0', 'MKSTREAM');
    const big = new KeyConsole({ redis: redis.url, revealKey: kcRevealKey });
    try {
      const k = await big.createKey({ account: 'beta', name: 'b' });
      for (let i = 0; i < 300; i++) await big.recordUsage({ keyId: k.id, amountMicros: 5, requestId: `k-${i}` });
    } finally {
      await big.close();
    }
    const a = ledgerChild(redis.url, pgs.url, { KEYGATE_LEDGER_TEST_PAUSE_AFTER_COMMIT_MS: '60000', KEYGATE_LEDGER_CLAIM_IDLE_MS: '500' });
    try {
      await a.waitOutput(/committed, pausing before the acknowledgement/);
      const committed = await rows('beta');
      expect(committed).toBe(300);
      const pending = (await db.xpending(s.usageLog('beta'), LEDGER_GROUP)) as [number, ...unknown[]];
      expect(pending[0]).toBe(300); // in the table, not acknowledged
      await a.kill();
    } finally {
      await a.kill();
    }
    const b = ledgerChild(redis.url, pgs.url, { KEYGATE_LEDGER_CLAIM_IDLE_MS: '500' });
    try {
      await until('the dead sink\'s entries claimed and acknowledged', async () => ((await db.xpending(s.usageLog('beta'), LEDGER_GROUP)) as [number])[0] === 0, 30_000);
      expect(await rows('beta')).toBe(300);
      expect(await db.xlen(s.usageLog('beta'))).toBe(0);
    } finally {
      await b.kill();
    }
  }, 90_000);
});
