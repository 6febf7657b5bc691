/**
 * A revoked key and a never-issued key cost the same: both read one record (one round trip, no
 * account lookup) and look at its status before anything else; a revoked record's other fields —
 * its model list above all, up to 1000 patterns — are never parsed. Deterministic: the codec's
 * reads of the reply are recorded, and a revoked record whose other fields are garbage is still a
 * plain `absent` (parsing them would make it `corrupt`).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyField, parseSidecarKey, schema, SIDECAR_KEY_FIELDS } from '../src/schema/redis-schema.ts';
import { connectRedis } from '../src/store/redis.ts';
import { KEY_RECORD } from '../src/schema/records.ts';
import { redisSource, type RedisRecordSource } from '../src/store/redis-source.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { seedKey } from './helpers/seed.ts';
import { keyDigest, generateKey } from '../src/core/key-format.ts';
import { KeyConsole } from '../src/console/service.ts';
import { CLI_ACTOR } from '../src/console/management.ts';
import { ConsoleService } from '../src/console/service.ts';

const s = schema();
const STATUS = SIDECAR_KEY_FIELDS.indexOf(KeyField.status);
const MODELS = SIDECAR_KEY_FIELDS.indexOf(KeyField.models);

/** The reply as the codec sees it, recording which fields it reads. */
function recorded(values: (string | null)[]): { values: (string | null)[]; reads: Set<number> } {
  const reads = new Set<number>();
  const proxy = new Proxy(values, {
    get(target, prop, recv) {
      if (typeof prop === 'string' && /^\d+$/.test(prop)) reads.add(Number(prop));
      return Reflect.get(target, prop, recv);
    },
  });
  return { values: proxy, reads };
}

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const manyModels = JSON.stringify(Array.from({ length: 1000 }, (_, i) => `provider-${i}/model-${i}-with-a-long-name`));

describe('revoked and never-issued keys: same work until the status is known', () => {
  let redis: RedisServer;
  let db: Redis;
  let store: RedisRecordSource;

  beforeAll(async () => {
    redis = await startRedis();
    db = redis.client();
    const data = connectRedis(redis.url, { commandTimeoutMs: 2000 });
    data.on('error', () => {});
    store = redisSource(data, s, createLogger('silent'));
  });

  afterAll(async () => {
    await store?.close();
    await mc?.close();
    await destroyRedis(redis);
  });

  let mc: ConsoleService;
  /** Bytes of the sidecar's HMGET reply on the wire (RESP2: `$-1` for a nil, `$len` + data otherwise). */
  async function sidecarReplyBytes(digest: string): Promise<number> {
    const reply = await db.hmgetBuffer(s.keyRecord(digest), ...SIDECAR_KEY_FIELDS);
    return reply.reduce((n, b) => n + (b === null ? 5 : `$${b.length}\r\n`.length + b.length + 2), `*${reply.length}\r\n`.length);
  }

  it('the codec reads only the status of a revoked record, as of an absent one, and never its model list', async () => {
    const k = await seedKey(db, s, { status: 'revoked', models: JSON.parse(manyModels) });
    const revokedReply = await db.hmget(s.keyRecord(k.digest), ...SIDECAR_KEY_FIELDS);
    const unknownReply = await db.hmget(s.keyRecord(keyDigest(generateKey())), ...SIDECAR_KEY_FIELDS);
    expect(revokedReply[MODELS]!.length).toBeGreaterThan(30_000);

    const revoked = recorded(revokedReply);
    expect(parseSidecarKey(revoked.values)).toEqual({ kind: 'absent' });
    expect([...revoked.reads]).toEqual([STATUS]);

    const unknown = recorded(unknownReply);
    expect(parseSidecarKey(unknown.values)).toEqual({ kind: 'absent' });
    expect([...unknown.reads][0]).toBe(STATUS); // the status first, then only null checks
    expect(unknown.reads.has(MODELS)).toBe(true);
  });

  it('a revoked record with garbage in every other field is absent, not corrupt: nothing else was parsed', async () => {
    const k = await seedKey(db, s, { status: 'revoked' });
    await db.hset(s.keyRecord(k.digest), {
      [KeyField.version]: '9',
      [KeyField.id]: 'not an id',
      [KeyField.account]: '',
      [KeyField.models]: '[not json',
      [KeyField.expiresAt]: 'soon',
    });
    expect(await store.lookup(KEY_RECORD, k.digest)).toEqual({ kind: 'absent' });
    expect(await store.lookup(KEY_RECORD, keyDigest(generateKey()))).toEqual({ kind: 'absent' });
    // An active record with the same garbage is still corrupt (the rest is parsed once the status says active).
    await db.hset(s.keyRecord(k.digest), KeyField.status, 'active');
    expect((await store.lookup(KEY_RECORD, k.digest)).kind).toBe('corrupt');
  });

  it('a revoke moves the model list out of what the sidecar reads: the reply is as short as an unknown key’s, the console still shows the models', async () => {
    mc ??= new KeyConsole({ redis: redis.url, revealKey: REVEAL });
    const models = JSON.parse(manyModels) as string[];
    // 1000 models: more than the console writes (100), as many as the sidecar accepts.
    const k = await seedKey(db, s, { models });
    const unknown = await sidecarReplyBytes(keyDigest(generateKey()));
    const active = await sidecarReplyBytes(k.digest);
    expect(active).toBeGreaterThan(40_000);

    await mc.revokeKey(k.id, CLI_ACTOR);
    const revoked = await sidecarReplyBytes(k.digest);
    // Only the short fields (v, id, account, status) remain: tens of bytes, not ~42 KB.
    expect(revoked).toBeLessThan(unknown + 100);
    expect((await db.hmget(s.keyRecord(k.digest), ...SIDECAR_KEY_FIELDS))[MODELS]).toBeNull();
    expect(await store.lookup(KEY_RECORD, k.digest)).toEqual({ kind: 'absent' });
    expect(await mc.getKey(k.id)).toMatchObject({ status: 'revoked', models });
    expect((await mc.getKeyView(k.id)).models).toEqual(models);

    // Revoking again is still idempotent and keeps the list where the console reads it.
    expect((await mc.revokeKey(k.id, CLI_ACTOR)).alreadyRevoked).toBe(true);
    expect((await mc.getKey(k.id)).models).toEqual(models);
  });

  it('a record revoked before the rule (models still in the sidecar field) is fixed by revoking it again', async () => {
    mc ??= new KeyConsole({ redis: redis.url, revealKey: REVEAL });
    const k = await seedKey(db, s, { status: 'revoked', models: ['openai/*'] });
    expect((await mc.getKey(k.id)).models).toEqual(['openai/*']);
    expect((await mc.revokeKey(k.id, CLI_ACTOR)).alreadyRevoked).toBe(true);
    expect(await db.hget(s.keyRecord(k.digest), KeyField.models)).toBeNull();
    expect((await mc.getKey(k.id)).models).toEqual(['openai/*']);
  });

  it('a roll with grace 0 revokes the old key the same way', async () => {
    mc ??= new KeyConsole({ redis: redis.url, revealKey: REVEAL });
    const created = await mc.createKey({ account: 'acct-roll', name: 'r', models: ['openai/gpt-4o', 'anthropic/*'] }, CLI_ACTOR);
    const rolled = await mc.rollKey(created.id, 0, CLI_ACTOR);
    expect(rolled.old).toMatchObject({ status: 'revoked', models: ['openai/gpt-4o', 'anthropic/*'] });
    const digest = (await db.get(s.keyIdIndex(created.id)))!;
    expect(await db.hget(s.keyRecord(digest), KeyField.models)).toBeNull();
    expect(rolled.record.models).toEqual(['openai/gpt-4o', 'anthropic/*']);
  });

  it('the documented benchmark runs (scripts/node bench/revoked-cost.ts) and measures revoked records of ~42 KB', async () => {
    const { stdout } = await promisify(execFile)('scripts/node', ['bench/revoked-cost.ts', '--rounds', '50'], { timeout: 60_000 });
    expect(stdout).toMatch(/^\| revoked \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$/m);
    expect(stdout).toMatch(/^\| unknown \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$/m);
    const wire = /reply on the wire: revoked ~(\d+) bytes, unknown ~(\d+) bytes/.exec(stdout);
    expect(Number(wire?.[1])).toBeGreaterThan(40_000); // the worst case it exists to show
    expect(Number(wire?.[2])).toBeLessThan(100);
  }, 90_000);
});
