/**
 * The cache's staleness bound in the real invalidation link (real Redis connections), on a fake
 * clock: with no heartbeat answered, the link is trusted one tick before the bound and lost at it
 * (the cache is told at once), and stays lost after. The pure rule is pinned in
 * test/unit/time-bounds.test.ts; this pins that the link applies it on the clock it is given.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/telemetry/logger.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { SingleTracker } from '../src/store/invalidation.ts';
import { connectRedis } from '../src/store/redis.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { waitFor } from './helpers/sidecars.ts';
import { FakeClock } from './unit/fake-clock.ts';

const s = schema();
let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await destroyRedis(redis);
});

describe('staleness bound on the injected clock', () => {
  it('trusted at bound − 1 ms without an answered heartbeat, lost at the bound, still lost after', async () => {
    const BOUND = 250;
    const clock = new FakeClock(1_000_000);
    const data = connectRedis(redis.url, { commandTimeoutMs: 2000 }) as import('ioredis').Redis;
    data.on('error', () => {});
    const tracker = new SingleTracker(
      data,
      (name) => {
        const sub = connectRedis(redis.url, { commandTimeoutMs: 2000, connectionName: name, subscriber: true }) as import('ioredis').Redis;
        sub.on('error', () => {});
        return sub;
      },
      { prefixes: s.trackedPrefixes, boundMs: BOUND, retryMs: 100, log: createLogger('silent'), datasetMarker: s.datasetMarker, clock },
    );
    const downs: string[] = [];
    tracker.on('down', (reason) => downs.push(reason));
    try {
      await waitFor(() => tracker.tracked, 'tracking on'); // the fake clock has not moved: confirmed at its start
      const t0 = clock.now();
      // Heartbeats fall due on the way (every quarter of the bound) and are sent, but none is answered
      // before the checks below: they run in this same turn.
      clock.tick(BOUND - 1);
      expect(tracker.tracked).toBe(true);
      expect(downs).toEqual([]);
      clock.tick(1);
      expect(clock.now() - t0).toBe(BOUND);
      expect(tracker.tracked).toBe(false);
      expect(downs).toEqual([`no heartbeat answer within ${BOUND} ms`]);
      // The answers that arrive late do not reopen the window.
      await new Promise((r) => setTimeout(r, 100));
      clock.tick(1);
      expect(downs).toHaveLength(1);
    } finally {
      tracker.close();
      data.disconnect();
    }
  });
});
