/**
 * Web console sessions on a real Redis and a fake clock: a session is refused from its expiry
 * instant on, on read — even while Redis still holds it (its own expiry is the backstop, not the rule).
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionStore } from '../src/console-web/sessions.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

let redis: RedisServer;
let db: Redis;

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
});
afterAll(async () => {
  await destroyRedis(redis);
});

describe('web session expiry', () => {
  const TTL = 60_000;

  it('is checked on read: live one tick before its expiry, refused at it and after (Redis still holds it)', async () => {
    let now = Date.now();
    const store = new SessionStore(db, 'kg', TTL, { now: () => now });
    const { id, record } = await store.create('tok_1', 'acct-1', 'my token');
    expect(record.expiresAt).toBe(now + TTL);
    const start = now;
    now = start + TTL - 1;
    expect(await store.get(id)).toMatchObject({ tokenId: 'tok_1', account: 'acct-1', expiresAt: start + TTL });
    now = start + TTL;
    expect(await store.get(id)).toBeNull();
    now = start + TTL + 1;
    expect(await store.get(id)).toBeNull();
    expect(await db.keys('kg:v1:{mgmt}:websession:*')).toHaveLength(1); // still in Redis: the refusal is the read's
    expect(await db.pttl((await db.keys('kg:v1:{mgmt}:websession:*'))[0]!)).toBeGreaterThan(TTL - 10_000);
    now = start;
    expect(await store.get(id)).not.toBeNull(); // the control: the same record, read in its lifetime
  });
});
