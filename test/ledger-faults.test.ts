/**
 * The usage ledger's faults with real processes (docs/ledger.md, "Tested with real processes"):
 * Redis restarted (with its append-only file) while a sink holds a committed, unacknowledged batch;
 * two sinks at once; a Redis Cluster run with several accounts on different nodes, the cap counted
 * there too. Each: every booking once in the table, none lost, nothing pending at the end.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { LedgerSink, migrate } from '../src/ledger/index.ts';
import { LEDGER_GROUP } from '../src/ledger/scripts.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { connectRedis } from '../src/store/redis.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { ledgerChild } from './helpers/ledger-child.ts';
import { startPostgres, type PostgresServer } from './helpers/postgres.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { until } from './helpers/until.ts';

const s = schema();
const revealKey = `base64:${randomBytes(32).toString('base64')}`;
let pgs: PostgresServer;
let pool: pg.Pool;

beforeAll(async () => {
  pgs = await startPostgres();
  pool = pgs.pool();
  await migrate(pool);
}, 60_000);

afterAll(async () => {
  await pgs?.destroy();
});

const count = async (account: string) => Number((await pool.query('SELECT count(*) AS n, count(DISTINCT booking_id) AS d FROM keygate_usage WHERE account = $1', [account])).rows[0].d);
const rows = async (account: string) => Number((await pool.query('SELECT count(*) AS n FROM keygate_usage WHERE account = $1', [account])).rows[0].n);

describe('Redis restarted mid-stream', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis(['--appendonly', 'yes', '--appendfsync', 'always']);
  });
  afterAll(async () => {
    if (redis) await destroyRedis(redis);
  });

  it('a sink holding a committed batch acknowledges it once Redis is back; two sinks; every booking once', async () => {
    const kc = new KeyConsole({ redis: redis.url, revealKey });
    const db = redis.client();
    const key = (await kc.createKey({ account: 'rr', name: 'r' })).id;
    await db.xgroup('CREATE', s.usageLog('rr'), LEDGER_GROUP, '0', 'MKSTREAM');
    for (let i = 0; i < 400; i++) await kc.recordUsage({ keyId: key, amountMicros: 3, requestId: `a-${i}` });
    // sink A commits, then waits 3 s before acknowledging: Redis is killed and restarted in that window
    const a = ledgerChild(redis.url, pgs.url, { KEYGATE_LEDGER_TEST_PAUSE_AFTER_COMMIT_MS: '3000', KEYGATE_LEDGER_CLAIM_IDLE_MS: '60000' });
    let b: ReturnType<typeof ledgerChild> | undefined;
    try {
      await a.waitOutput(/committed, pausing before the acknowledgement/);
      await redis.stop();
      await new Promise((r) => setTimeout(r, 4000)); // down past A's pause: its acknowledgement fails and is retried
      await redis.start();
      b = ledgerChild(redis.url, pgs.url, { KEYGATE_LEDGER_CLAIM_IDLE_MS: '60000' }); // a second sink from now on
      const db2 = redis.client();
      // the group and its pending entries survived (AOF); bookings go on
      for (let i = 0; i < 400; i++) await kc.recordUsage({ keyId: key, amountMicros: 3, requestId: `b-${i}` });
      let seen = 0;
      await until(() => `800 rows (${seen}) and nothing pending`, async () => (seen = await rows('rr')) === 800 && ((await db2.xpending(s.usageLog('rr'), LEDGER_GROUP)) as [number])[0] === 0, 60_000);
      expect(await count('rr')).toBe(800);
      await until('the log trimmed', async () => (await db2.xlen(s.usageLog('rr'))) === 0, 10_000);
      expect(await db2.get(s.usageDropped('rr'))).toBe(null);
      expect(a.output()).toMatch(/acknowledgement failed; retrying/); // A saw Redis go with its batch committed
    } finally {
      await a.kill();
      await b?.kill();
      await kc.close();
    }
  }, 120_000);
});

describe('Redis Cluster', () => {
  let cluster: ClusterDeployment;
  beforeAll(async () => {
    cluster = await startCluster(3);
  }, 60_000);
  afterAll(async () => {
    await cluster?.destroy();
  });

  it('accounts on different nodes: every booking once, the cap counted per account', async () => {
    const kc = new KeyConsole({ redis: cluster.url, revealKey, usageLogMaxEntries: 100 });
    const db = cluster.client();
    const accounts = ['cl-a', 'cl-b', 'cl-c', 'cl-d'];
    const nodes = new Set(await Promise.all(accounts.map(async (a) => (await cluster.nodeOf(s.usageLog(a))).port)));
    expect(nodes.size).toBeGreaterThan(1); // the control: the logs live on several nodes
    const keys = new Map<string, string>();
    for (const a of accounts) {
      keys.set(a, (await kc.createKey({ account: a, name: a })).id);
      await db.xgroup('CREATE', s.usageLog(a), LEDGER_GROUP, '0', 'MKSTREAM');
    }
    // cl-d: 150 bookings with no sink running and a cap of 100: 50 cut unread, counted
    for (let i = 0; i < 150; i++) await kc.recordUsage({ keyId: keys.get('cl-d')!, amountMicros: 2, requestId: `d-${i}` });
    expect(await db.get(s.usageDropped('cl-d'))).toBe('50');
    const redis = connectRedis(cluster.url, { commandTimeoutMs: 5000, queueWhileOffline: true });
    const sink = new LedgerSink(redis, pool, s, createLogger('silent'), { pollMs: 20, accountsEveryMs: 100 });
    sink.start();
    try {
      await Promise.all(
        accounts.slice(0, 3).map(async (a) => {
          for (let i = 0; i < 90; i++) await kc.recordUsage({ keyId: keys.get(a)!, amountMicros: 2, requestId: `${a}-${i}` });
        }),
      );
      for (const a of accounts.slice(0, 3)) await until(`${a}: 90 rows`, async () => (await rows(a)) === 90, 30_000);
      await until('cl-d: the 100 kept', async () => (await rows('cl-d')) === 100, 30_000);
      for (const a of accounts) {
        await until(`${a}: nothing pending, log trimmed`, async () => ((await db.xpending(s.usageLog(a), LEDGER_GROUP)) as [number])[0] === 0 && (await db.xlen(s.usageLog(a))) === 0, 10_000);
      }
      await until('dropped read', () => sink.dropped === 50, 10_000);
      expect(sink.lagMs).toBe(0);
    } finally {
      await sink.stop();
      redis.disconnect();
      await kc.close();
    }
  }, 120_000);
});
