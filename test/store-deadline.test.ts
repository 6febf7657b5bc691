/**
 * The store lookup deadline is the configured `redisTimeoutMs`, observed against a real Redis that
 * stops answering (DEBUG SLEEP): a lookup fails as an outage at the deadline, not when Redis wakes.
 * The unit tier pins the decision rules; this pins the deadline's effect.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createKeyStore } from '../src/store/index.ts';
import { KEY_RECORD } from '../src/schema/records.ts';
import { StoreUnavailable } from '../src/store/record-source.ts';
import { startRedis, type RedisServer } from './helpers/redis-server.ts';

const SLEEP_S = 1.5;
let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis(['--enable-debug-command', 'yes']);
});
afterAll(async () => {
  await redis?.stop();
});

async function lookupWhileAsleep(redisTimeoutMs: number, cacheMaxEntries: number): Promise<{ ms: number; err: unknown }> {
  const config = loadConfig({ redisUrl: redis.url, redisTimeoutMs, cacheMaxEntries }, {});
  const store = createKeyStore(config, schema(), pino({ level: 'silent' }));
  try {
    for (let i = 0; i < 200 && !store.ready(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(store.ready()).toBe(true);
    const sleeper = redis.client();
    const asleep = sleeper.call('DEBUG', 'SLEEP', String(SLEEP_S));
    await new Promise((r) => setTimeout(r, 50)); // the SLEEP is running
    const t0 = performance.now();
    let err: unknown;
    try {
      await store.lookup(KEY_RECORD, '0'.repeat(64));
    } catch (e) {
      err = e;
    }
    const ms = performance.now() - t0;
    await asleep;
    return { ms, err };
  } finally {
    await store.close();
  }
}

describe('store lookup deadline', () => {
  for (const cacheMaxEntries of [0, 1000]) {
    it(`a lookup fails as unavailable at the configured deadline (cache ${cacheMaxEntries ? 'on' : 'off'})`, async () => {
      const { ms, err } = await lookupWhileAsleep(200, cacheMaxEntries);
      expect(err).toBeInstanceOf(StoreUnavailable);
      expect(ms).toBeGreaterThanOrEqual(150);
      // well before Redis wakes up (generous: the machine is shared)
      expect(ms).toBeLessThan(SLEEP_S * 1000 - 400);
    });
  }
});
