/**
 * Webhook endpoints and alert settings are console resources audited in the change's own write
 * (docs/events.md "Endpoints"): on a standalone Redis each change is one script — the change and its
 * audit entry in both lists — counted by the real server's INFO commandstats; without an actor
 * (the library's plain call) nothing is audited; a refused change writes no entry.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { KeyConsole } from '../src/console/service.ts';
import { eventsSchema } from '../src/schema/events.ts';
import { managementSchema } from '../src/schema/management.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
let redis: RedisServer;
let db: Redis;
let kc: KeyConsole;

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  kc = new KeyConsole({ redis: db, revealKey: REVEAL });
}, 30_000);

afterAll(async () => {
  if (redis) await destroyRedis(redis);
});

/** Scripts run and audit entries of the account written by `change`. */
async function counted(account: string, change: () => Promise<unknown>): Promise<{ scripts: number; audit: string[]; all: number }> {
  const before = { acct: await db.llen(managementSchema(kc.schema.ns).auditOfAccount(account)), all: (await kc.listAudit({ limit: 1000 })).length };
  await db.config('RESETSTAT');
  await change();
  const stats = await db.info('commandstats');
  const scripts = [...stats.matchAll(/cmdstat_(eval|evalsha):calls=(\d+)/g)].reduce((n, m) => n + Number(m[2]), 0);
  const entries = await kc.listAudit({ account, limit: 1000 });
  const fresh = entries.slice(0, entries.length - before.acct).map((e) => e.action);
  return { scripts, audit: fresh, all: (await kc.listAudit({ limit: 1000 })).length - before.all };
}

it('create, replay and remove of a webhook and both alert settings: one script each, with its audit entry', async () => {
  const a = `au-${randomBytes(4).toString('hex')}`;
  let id = '';
  const made = await counted(a, async () => (id = (await kc.createWebhook({ url: 'http://127.0.0.1:9/h', account: a }, CLI_ACTOR, { allowPrivate: true })).endpoint.id));
  expect(made).toEqual({ scripts: 1, audit: ['webhook_create'], all: 1 });

  const eventId = `evt_${Date.now()}_1_${randomBytes(4).toString('hex')}`;
  await db.lpush(eventsSchema('kg').dead(id), JSON.stringify({ event: { id: eventId, type: 'key.created', created_at: new Date().toISOString(), account: a, data: {} }, attempts: 3, last_error: 'HTTP 500', dead_at: Date.now() }));
  expect(await counted(a, () => kc.replayDeadLetter(id, eventId, CLI_ACTOR))).toEqual({ scripts: 1, audit: ['webhook_replay'], all: 1 });
  expect(await db.llen(eventsSchema('kg').replay(id))).toBe(1);
  // refused (no such dead letter any more): nothing audited
  const again = await counted(a, () => kc.replayDeadLetter(id, eventId, CLI_ACTOR).catch((e: Error) => e.message));
  expect(again).toEqual({ scripts: 1, audit: [], all: 0 });

  expect(await counted(a, () => kc.removeWebhook(id, CLI_ACTOR))).toEqual({ scripts: 1, audit: ['webhook_remove'], all: 1 });
  expect(await db.exists(eventsSchema('kg').replay(id), eventsSchema('kg').dead(id))).toBe(0);
  await expect(kc.getWebhook(id)).rejects.toMatchObject({ code: 'NOT_FOUND' });

  expect(await counted(a, () => kc.setWalletLow(a, 5_000_000, CLI_ACTOR))).toEqual({ scripts: 1, audit: ['alert'], all: 1 });
  expect(await kc.events.alerts(a)).toEqual({ walletLowMicros: 5_000_000 });
  const k = await kc.createKey({ account: a, name: 'k', models: null, expiresAt: null, limit: null });
  const set = await counted(a, () => kc.setKeyAlertThresholds(k.id, [90, 50], CLI_ACTOR));
  expect(set).toEqual({ scripts: 1, audit: ['alert'], all: 1 });
  expect(await kc.events.keyThresholds(a, k.id)).toEqual([50, 90]);
  expect((await kc.listAudit({ account: a, limit: 1 }))[0]).toMatchObject({ action: 'alert', key_id: k.id, changes: { alert_thresholds: [50, 90] } });

  // the library's plain call: the same change, no audit entry
  expect(await counted(a, () => kc.setWalletLow(a, null))).toEqual({ scripts: 1, audit: [], all: 0 });
  expect(await kc.events.alerts(a)).toEqual({ walletLowMicros: null });
}, 60_000);
