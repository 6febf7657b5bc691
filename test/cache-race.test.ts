/**
 * The classic client-side-caching race, made deterministic: a store read that returned before a
 * write but whose answer is held back until after the write's invalidation has arrived must not be
 * cached, and no later lookup may join it. Real Redis; the only thing added is a gate that delays
 * handing the real reply to the cache.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyField, schema, type ParsedKey } from '../src/schema/redis-schema.ts';
import { CachedRecordSource } from '../src/store/cache.ts';
import { KEY_RECORD, type RecordType } from '../src/schema/records.ts';
import { SingleTracker } from '../src/store/invalidation.ts';
import { connectRedis } from '../src/store/redis.ts';
import { redisSource } from '../src/store/redis-source.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { seedKey } from './helpers/seed.ts';
import { waitFor } from './helpers/sidecars.ts';

const s = schema();
const log = createLogger('silent');
let redis: RedisServer;
let db: Redis;
let store: CachedRecordSource;
/** When set, the next key read waits for this promise after Redis has answered. */
let gate: Promise<void> | null = null;

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  const data = connectRedis(redis.url, { commandTimeoutMs: 2000 });
  data.on('error', () => {});
  const real = redisSource(data, s, log);
  const gated = {
    async lookup<T>(type: RecordType<T>, id: string): Promise<T> {
      const v = await real.lookup(type, id);
      if (type !== KEY_RECORD) return v;
      const g = gate;
      gate = null;
      if (g) await g;
      return v;
    },
    ready: () => real.ready(),
    close: () => real.close(),
  };
  const tracker = new SingleTracker(
    data as import('ioredis').Redis,
    (name) => {
      const sub = connectRedis(redis.url, { commandTimeoutMs: 2000, connectionName: name, subscriber: true }) as import('ioredis').Redis;
      sub.on('error', () => {});
      return sub;
    },
    { prefixes: s.trackedPrefixes, boundMs: 3000, retryMs: 100, log },
  );
  store = new CachedRecordSource(gated, tracker, s, { maxEntries: 100, serveCachedDuringOutage: false, lookupTimeoutMs: 5000, maxInflight: 16, maxQueued: 64 }, log);
  await waitFor(() => store.stats().tracking, 'tracking');
});

afterAll(async () => {
  await store?.close();
  await destroyRedis(redis);
});

function hold(): () => void {
  let release!: () => void;
  gate = new Promise<void>((r) => (release = r));
  return release;
}

describe('a read in flight when its key is invalidated', () => {
  it('is returned to its own callers but not cached, and later lookups do not join it', async () => {
    const k = await seedKey(db, s);
    const release = hold();
    const stale = store.lookup(KEY_RECORD, k.digest); // reads the active record, then waits at the gate
    await waitFor(() => gate === null, 'read answered by Redis');
    const inv = store.stats().invalidations;
    await db.hset(s.keyRecord(k.digest), KeyField.status, 'revoked');
    await waitFor(() => store.stats().invalidations > inv, 'invalidation');
    const later = store.lookup(KEY_RECORD, k.digest); // after the invalidation: must not join the held read
    release();
    expect((await stale).kind).toBe('grant');
    expect((await later).kind).toBe('absent');
    expect(((await store.lookup(KEY_RECORD, k.digest)) as ParsedKey).kind).toBe('absent');
  });

  it('is not cached when the invalidation link breaks while it is in flight', async () => {
    const k = await seedKey(db, s);
    const release = hold();
    const pending = store.lookup(KEY_RECORD, k.digest);
    await waitFor(() => gate === null, 'read answered by Redis');
    await db.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await waitFor(() => !store.stats().tracking, 'link loss');
    await db.hset(s.keyRecord(k.digest), KeyField.status, 'revoked'); // not reported: the link is down
    await waitFor(() => store.stats().tracking, 'tracking again');
    release();
    expect((await pending).kind).toBe('grant');
    expect(((await store.lookup(KEY_RECORD, k.digest)) as ParsedKey).kind).toBe('absent');
  });
});
