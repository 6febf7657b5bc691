/**
 * The usage ledger's "done when" (docs/ledger.md): 300,000 metered bookings for one account, booked
 * through the metering path's own write (`redisBookingWrite`: the usage-record script, pipelined)
 * by several clients, with the Redis cap (KEYGATE_USAGE_LOG_MAX) at 10,000, while two sinks run as
 * `bin/keygate ledger` processes — one SIGKILLed between a commit and its acknowledgement, then
 * started again — and PostgreSQL is stopped and restarted mid-stream. Every booking is in
 * `keygate_usage` exactly once and in the export, nothing was dropped, and the lag returns to zero.
 * The bookings are paced (RATE a second, 2,500: the script's own rate on a loaded 2-core machine is
 * 1,700-3,200) so that the backlog of a PostgreSQL restart (the restart, then the sinks' retry
 * backoff: a few seconds) stays under the cap, as a deployment sizes its cap to its outages
 * (docs/ledger.md, "Sizing the cap").
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { LedgerReads, migrate } from '../src/ledger/index.ts';
import { LEDGER_GROUP } from '../src/ledger/scripts.ts';
import { redisBookingWrite, type PricedBooking } from '../src/metering/booker.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { ledgerChild, type LedgerChild } from './helpers/ledger-child.ts';
import { startPostgres, type PostgresServer } from './helpers/postgres.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { until } from './helpers/until.ts';

const TOTAL = Number(process.env.LEDGER_TEST_TOTAL ?? 300_000);
const CLIENTS = 4;
const BATCH = 250;
const RATE = Number(process.env.LEDGER_TEST_RATE ?? 2500);
const CAP = 10_000;
const ACCOUNT = 'bulk';
const s = schema();

let redis: RedisServer;
let pgs: PostgresServer;
let pool: pg.Pool;
const sinks: LedgerChild[] = [];

beforeAll(async () => {
  redis = await startRedis();
  try {
    pgs = await startPostgres();
  } catch (err) {
    await destroyRedis(redis);
    throw err;
  }
  pool = pgs.pool();
  await migrate(pool);
}, 60_000);

afterAll(async () => {
  for (const c of sinks) await c.kill();
  await pgs?.destroy();
  if (redis) await destroyRedis(redis);
});

it('300,000 bookings with a cap of 10,000, across a PostgreSQL restart and a killed sink: each once in the table and the export', async () => {
  const kc = new KeyConsole({ redis: redis.url, revealKey: `base64:${randomBytes(32).toString('base64')}` });
  const keyId = (await kc.createKey({ account: ACCOUNT, name: 'bulk' })).id;
  await kc.close();
  const clients = Array.from({ length: CLIENTS }, () => new Redis(redis.port, '127.0.0.1'));
  const db = redis.client();
  const sinkEnv = { KEYGATE_LEDGER_CLAIM_IDLE_MS: '1000' };
  try {
    const writes = clients.map((c) => redisBookingWrite(c, s, { idempotencySeconds: 3600, logMaxEntries: CAP }));
    const booking = (i: number): PricedBooking => ({
      booking: { request_id: `b-${i}`, booking_id: `b-${i}`, key_id: keyId, account: ACCOUNT, model: 'gpt-4o-mini', family: 'openai', input_tokens: 12, cached_input_tokens: 2, cache_write_tokens: 0, output_tokens: 5, reasoning_tokens: 0, estimated: false },
      amountMicros: 3 + (i % 7),
      unpriced: false,
      endedAt: Date.now(),
    });
    // two sinks from the start; a third (A) joins later with the test hook that pauses after its commit, and is killed there
    const b = ledgerChild(redis.url, pgs.url, sinkEnv);
    const c2 = ledgerChild(redis.url, pgs.url, sinkEnv);
    sinks.push(b, c2);
    // the first booking makes the account known; the sinks put their group on its log
    expect(await writes[0]!([booking(0)])).toEqual(['booked']);
    await until('the group on the log', async () => ((await db.xinfo('GROUPS', s.usageLog(ACCOUNT))) as unknown[]).length === 1, 30_000);

    let booked = 1;
    let maxLen = 0;
    const started = Date.now();
    const perClient = Math.ceil((TOTAL - 1) / CLIENTS);
    const produce = async (ci: number) => {
      const from = 1 + ci * perClient;
      const to = Math.min(TOTAL, from + perClient);
      for (let i = from; i < to; i += BATCH) {
        const batch = Array.from({ length: Math.min(BATCH, to - i) }, (_, j) => booking(i + j));
        const r = await writes[ci]!(batch);
        expect(r.every((x) => x === 'booked')).toBe(true);
        booked += batch.length;
        // paced: the clients together at RATE bookings a second
        const ahead = (booked / RATE) * 1000 - (Date.now() - started);
        if (ahead > 0) await new Promise((res) => setTimeout(res, ahead));
      }
    };
    let ticks = 0;
    const watch = setInterval(
      () =>
        void db.xlen(s.usageLog(ACCOUNT)).then(
          (n) => {
            maxLen = Math.max(maxLen, n);
            if (++ticks % 50 === 0) console.log(`t=${((Date.now() - started) / 1000).toFixed(0)} s booked ${booked} log ${n}`);
          },
          () => {},
        ),
      100,
    );
    const faults = (async () => {
      // the kill: sink A past a commit, before its acknowledgement
      await until('a third booked', () => booked > TOTAL / 3, 300_000);
      const a = ledgerChild(redis.url, pgs.url, { ...sinkEnv, KEYGATE_LEDGER_TEST_PAUSE_AFTER_COMMIT_MS: '60000' });
      sinks.push(a);
      await a.waitOutput(/committed, pausing before the acknowledgement/, 60_000);
      const held = (await db.xpending(s.usageLog(ACCOUNT), LEDGER_GROUP)) as [number, string, string, [string, string][] | null];
      await a.kill('SIGKILL');
      // A's committed batch, unacknowledged when it died: another sink claims it
      expect(Number((held[3] ?? []).find(([name]) => name.includes(`-${a.proc.pid}-`))?.[1] ?? 0)).toBeGreaterThan(0);
      // PostgreSQL stopped and started again mid-stream
      await until('two thirds booked', () => booked > (2 * TOTAL) / 3, 300_000);
      await pgs.stop();
      await pgs.start();
    })();
    await Promise.all([...clients.map((_, ci) => produce(ci)), faults]);
    const bookSeconds = (Date.now() - started) / 1000;
    const q = pgs.pool();
    const count = async () => (await q.query('SELECT count(*)::int AS n FROM keygate_usage')).rows[0].n as number;
    let rows = 0;
    const state = async () => `rows ${rows}, log ${await db.xlen(s.usageLog(ACCOUNT))}, pending ${JSON.stringify(await db.xpending(s.usageLog(ACCOUNT), LEDGER_GROUP))}, dropped ${await db.get(s.usageDropped(ACCOUNT))}, booked in ${bookSeconds} s; sinks: ${sinks.map((c) => c.output().slice(-600)).join('\n---\n')}`;
    let said = '';
    await until(() => `every row: ${said}`, async () => {
      rows = await count();
      if (rows !== TOTAL) said = await state();
      return rows === TOTAL;
    }, 120_000);
    clearInterval(watch);
    const r = await q.query("SELECT count(*)::int AS n, count(DISTINCT booking_id)::int AS d, sum(amount_micros)::text AS amount FROM keygate_usage WHERE account = 'bulk'");
    let amount = 0n;
    for (let i = 0; i < TOTAL; i++) amount += BigInt(3 + (i % 7));
    expect(r.rows[0]).toEqual({ n: TOTAL, d: TOTAL, amount: String(amount) });
    const missing = await q.query("SELECT count(*)::int AS n FROM generate_series(0, $1 - 1) g WHERE NOT EXISTS (SELECT 1 FROM keygate_usage WHERE account = 'bulk' AND booking_id = 'b-' || g)", [TOTAL]);
    expect(missing.rows[0].n).toBe(0);
    // nothing dropped by the cap, the log within it, and the lag back to zero: nothing pending, the log trimmed
    expect(await db.get(s.usageDropped(ACCOUNT))).toBe(null);
    expect(maxLen).toBeLessThanOrEqual(CAP);
    await until('nothing pending, the log trimmed', async () => ((await db.xpending(s.usageLog(ACCOUNT), LEDGER_GROUP)) as [number])[0] === 0 && (await db.xlen(s.usageLog(ACCOUNT))) === 0, 30_000);
    // the export reads every booking, once, in order
    let exported = 0;
    let last = '';
    const seen = new Set<string>();
    for await (const e of new LedgerReads(q).exportUsage({ sinceMs: 0, account: ACCOUNT, pageSize: 5000 })) {
      exported++;
      seen.add(e.requestId);
      expect(e.id > last || e.id.length > last.length).toBe(true);
      last = e.id;
    }
    expect(exported).toBe(TOTAL);
    expect(seen.size).toBe(TOTAL);
    const sinkOut = sinks.map((c) => c.output()).join('\n');
    // the restart was seen: by a batch in flight, or (a sink caught up, between batches) on its idle connection
    expect(sinkOut).toMatch(/PostgreSQL write failed; retrying|an idle PostgreSQL connection failed/);
    console.log(`ledger 300k: booked in ${bookSeconds.toFixed(1)} s (${Math.round(TOTAL / bookSeconds)}/s), log length at most ${maxLen}`);
  } finally {
    for (const c of clients) c.disconnect();
  }
}, 600_000);
