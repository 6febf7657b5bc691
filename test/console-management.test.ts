/**
 * The management layer on real Redis: audit events are written by the change's own script (a
 * refused change writes none; MONITOR sees one EVAL per change), retention is bounded, and the
 * whole layer (tokens, audited changes, reveal, roll, idempotency) works on a real Redis Cluster.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { AUDIT_RETENTION, CLI_ACTOR } from '../src/console/management.ts';
import { ConsoleService } from '../src/console/service.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const acct = () => `acct-${randomBytes(4).toString('hex')}`;

describe('standalone', () => {
  let redis: RedisServer;
  let mc: ConsoleService;
  beforeAll(async () => {
    redis = await startRedis();
    mc = new KeyConsole({ redis: redis.url, revealKey: REVEAL });
  });
  afterAll(async () => {
    await mc?.close();
    if (redis) await destroyRedis(redis);
  });

  it('each audited change is one EVAL that writes the change and its event', async () => {
    const a = acct();
    const k = await mc.createKey({ account: a, name: 'watched' }, CLI_ACTOR);
    const monitor = new Redis(redis.port, '127.0.0.1');
    const commands: string[] = [];
    const m = await monitor.monitor();
    // MONITOR names the source of each command: "lua" for one issued by a script.
    m.on('monitor', (_t: string, args: string[], source: string) => commands.push(`${source === 'lua' ? 'lua:' : ''}${args[0]!.toLowerCase()}`));
    await mc.updateKey(k.id, { name: 'renamed' }, CLI_ACTOR);
    await mc.revokeKey(k.id, CLI_ACTOR);
    await mc.setAccountStatus(a, 'disabled', CLI_ACTOR);
    await new Promise((r) => setTimeout(r, 200));
    m.disconnect();
    monitor.disconnect();
    // Writes happen only inside the three scripts: none issued on their own.
    const direct = commands.filter((c) => ['lpush', 'ltrim', 'hset', 'hdel', 'srem', 'sadd', 'set'].includes(c));
    expect(direct).toEqual([]);
    expect(commands.filter((c) => c === 'eval' || c === 'evalsha')).toHaveLength(3);
    expect(commands.filter((c) => c === 'lua:lpush')).toHaveLength(6); // two lists per change
    const events = await mc.listAudit({ account: a });
    expect(events.map((e) => e.action)).toEqual(['disable', 'revoke', 'update', 'create']);
    expect(events[2]!.changes).toEqual({ name: 'renamed' });
  });

  it('a refused change writes no event; repeating a no-op (revoke twice, disable twice) writes none', async () => {
    const a = acct();
    const k = await mc.createKey({ account: a, name: 'x' }, CLI_ACTOR);
    await mc.revokeKey(k.id, CLI_ACTOR);
    await expect(mc.updateKey(k.id, { name: 'y' }, CLI_ACTOR)).rejects.toMatchObject({ code: 'REVOKED' });
    expect((await mc.revokeKey(k.id, CLI_ACTOR)).alreadyRevoked).toBe(true);
    await mc.setAccountStatus(a, 'disabled', CLI_ACTOR);
    await mc.setAccountStatus(a, 'disabled', CLI_ACTOR);
    await mc.setAccountStatus(a, 'active', CLI_ACTOR);
    expect((await mc.listAudit({ account: a })).map((e) => e.action)).toEqual(['enable', 'disable', 'revoke', 'create']);
  });

  it('retention: the account list keeps the newest 1000 events', async () => {
    const a = acct();
    const k = await mc.createKey({ account: a, name: 'chatty' }, CLI_ACTOR);
    for (let i = 0; i < AUDIT_RETENTION.perAccount + 5; i++) await mc.audit(CLI_ACTOR, 'reveal', a, k.id);
    const db = redis.client();
    const lists = (await db.keys('*auditacct*')).filter((x) => x.endsWith(a));
    expect(await db.llen(lists[0]!)).toBe(AUDIT_RETENTION.perAccount);
    expect((await mc.listAudit({ account: a, limit: 1000 })).every((e) => e.action === 'reveal')).toBe(true);
  }, 60_000);
});

describe('Redis Cluster', () => {
  let cluster: ClusterDeployment;
  let mc: ConsoleService;
  beforeAll(async () => {
    cluster = await startCluster();
    mc = new KeyConsole({ redis: cluster.url, revealKey: REVEAL });
  }, 60_000);
  afterAll(async () => {
    await mc?.close();
    await cluster?.destroy();
  });

  it('tokens, audited changes, reveal, roll and idempotency all work across slots', async () => {
    const a = acct();
    const t = await mc.createToken({ name: 'ops', account: null }, CLI_ACTOR);
    expect((await mc.authenticate(t.token))?.id).toBe(t.record.id);
    const k = await mc.createKey({ account: a, name: 'c1', models: ['openai/*'] }, CLI_ACTOR);
    await mc.updateKey(k.id, { name: 'c2' }, CLI_ACTOR);
    expect((await mc.revealKey(k.id, CLI_ACTOR)).key).toBe(k.key);
    const rolled = await mc.rollKey(k.id, 0, CLI_ACTOR);
    expect(rolled.record).toMatchObject({ name: 'c2 (rolled)', rolledFrom: k.id });
    expect(rolled.old).toMatchObject({ status: 'revoked', rolledTo: rolled.id, models: ['openai/*'] });
    expect((await mc.listKeys(a)).filter((x) => x.status === 'active').map((x) => x.id)).toEqual([rolled.id]);
    await mc.revokeKey(rolled.id, CLI_ACTOR);
    // Both revokes (the roll's and the plain one, per-slot steps on Cluster) moved the models out of the sidecar's field.
    const sidecarModels = async (id: string) => mc.redis.hget(mc.schema.keyRecord((await mc.redis.get(mc.schema.keyIdIndex(id)))!), 'models');
    expect([await sidecarModels(k.id), await sidecarModels(rolled.id)]).toEqual([null, null]);
    expect((await mc.getKey(rolled.id)).models).toEqual(['openai/*']);
    await mc.setAccountStatus(a, 'disabled', CLI_ACTOR);
    expect((await mc.listAudit({ account: a })).map((e) => e.action)).toEqual(['disable', 'revoke', 'roll', 'reveal', 'update', 'create']);
    const claim = await mc.claimIdempotency(t.record.id, 'k1', 'fp');
    expect(claim.kind).toBe('claimed');
    await expect(mc.claimIdempotency(t.record.id, 'k1', 'other')).rejects.toMatchObject({ code: 'CONFLICT' });
    expect((await mc.revokeToken(t.record.id, CLI_ACTOR)).alreadyRevoked).toBe(false);
    expect(await mc.authenticate(t.token)).toBeNull();
  }, 60_000);
});
