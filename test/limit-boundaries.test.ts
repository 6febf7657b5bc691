/**
 * A spend limit lifts at its period's real calendar boundary (UTC): the next midnight for `day`, the
 * next Monday 00:00 for `week`, the first of the next month for `month`. The usage script writes the
 * block's end from the Redis server's clock; the sidecar compares it with its own clock, here one
 * the test moves: blocked 1 ms before the boundary, allowed at it, at a sidecar answering from its
 * cache and at one with the cache off, with no write to Redis in between.
 *
 * (Redis's clock cannot be moved, so spending in the new period is not shown here; that a new
 * period's spend starts at zero is `roll` in the usage script, covered in wallet-library.test.ts.)
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { periodBounds, type LimitPeriod } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { chatRequest, outcomeOf, startSidecarWith, waitTracking, type TestSidecar } from './helpers/sidecars.ts';
import { systemClock } from '../src/core/clock.ts';

const s = schema();
let redis: RedisServer | undefined;
let db: Redis;
let kc: KeyConsole | undefined;
/** The sidecars' clock: the real one, or stopped at `frozen`. */
let frozen: number | null = null;
const now = () => frozen ?? Date.now();
const clock = { ...systemClock, now };
let cached: TestSidecar | undefined;
let uncached: TestSidecar | undefined;

beforeAll(async () => {
  const r = (redis = await startRedis());
  try {
    db = r.client();
    kc = new KeyConsole({ redis: r.url, revealKey: `k1:${randomBytes(32).toString('base64')}` });
    const base = { redisUrl: r.url, redisTimeoutMs: 1000, stalenessBoundMs: 10_000, drainDelayMs: 0, countUsage: false };
    cached = await startSidecarWith(base, undefined, { clock });
    uncached = await startSidecarWith({ ...base, cacheMaxEntries: 0 }, undefined, { clock });
    await waitTracking(cached!);
  } catch (err) {
    await afterAllCleanup();
    throw err;
  }
});

/** Stops what started (once; also after a setup that failed halfway). */
async function afterAllCleanup(): Promise<void> {
  const [c, u, k, r] = [cached, uncached, kc, redis];
  cached = uncached = kc = redis = undefined;
  await c?.close();
  await u?.close();
  await k?.close();
  if (r) await destroyRedis(r);
}
afterAll(afterAllCleanup);

const UTC_MONDAY = 1;

describe('a spend limit lifts at the real calendar boundary of its period', () => {
  for (const period of ['day', 'week', 'month'] as LimitPeriod[]) {
    it(`${period}: blocked until the boundary, allowed at it`, async () => {
      frozen = null;
      const account = `acct-${period}-${randomBytes(3).toString('hex')}`;
      const k = await kc!.createKey({ account, name: period, limit: { amountMicros: 1_000, period } });
      await kc!.recordUsage({ keyId: k.id, amountMicros: 1_000, requestId: `r-${period}` });

      // The block's end, as the script wrote it: the boundary of the period the server's clock is in.
      const end = Number(await db.hget(s.gate(account), `limit:${k.id}`));
      const written = Date.now();
      expect(end).toBe(periodBounds(period, written).end);
      const at = new Date(end);
      expect([at.getUTCHours(), at.getUTCMinutes(), at.getUTCSeconds(), at.getUTCMilliseconds()]).toEqual([0, 0, 0, 0]);
      if (period === 'week') expect(at.getUTCDay()).toBe(UTC_MONDAY);
      if (period === 'month') expect(at.getUTCDate()).toBe(1);
      expect(end - written).toBeLessThanOrEqual(({ day: 1, week: 7, month: 31 } as Record<string, number>)[period]! * 86_400_000);

      for (const sc of [cached!, uncached!]) expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('KEY_LIMIT_EXCEEDED');
      // Twice at the cached sidecar: the second answer comes from its cache.
      const hits = cached!.sidecar.store.stats().hits;
      expect(outcomeOf(await cached!.client.check(chatRequest(k.key)))).toBe('KEY_LIMIT_EXCEEDED');
      expect(cached!.sidecar.store.stats().hits).toBeGreaterThan(hits);

      const writes = Number(/total_commands_processed:(\d+)/.exec(await db.info('stats'))![1]);
      const misses = cached!.sidecar.store.stats().misses;
      frozen = end - 1;
      for (const sc of [cached!, uncached!]) expect(outcomeOf(await sc.client.check(chatRequest(k.key))), 'at end - 1 ms').toBe('KEY_LIMIT_EXCEEDED');
      frozen = end;
      for (const sc of [cached!, uncached!]) expect(outcomeOf(await sc.client.check(chatRequest(k.key))), 'at the boundary').toBe('allow');
      frozen = end + 3_600_000;
      for (const sc of [cached!, uncached!]) expect(outcomeOf(await sc.client.check(chatRequest(k.key))), 'an hour into the next period').toBe('allow');
      // The cached sidecar decided from memory: no new lookup; nothing was written to the gate.
      expect(cached!.sidecar.store.stats().misses).toBe(misses);
      expect(Number(await db.hget(s.gate(account), `limit:${k.id}`))).toBe(end);
      expect(Number(/total_commands_processed:(\d+)/.exec(await db.info('stats'))![1]) - writes).toBeGreaterThan(0); // (the uncached sidecar's reads)
      frozen = null;
    });
  }
});
