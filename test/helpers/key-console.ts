/** The console library on its own test redis-server, and asserting its refusals. */
import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import { ConsoleError } from '../../src/console/errors.ts';
import { KeyConsole, type KeyConsoleOptions } from '../../src/console/service.ts';
import { destroyRedis, startRedis, type RedisServer } from './redis-server.ts';

export interface ConsoleOnRedis {
  readonly redis: RedisServer;
  /** A plain client for seeding and reading back. */
  readonly db: Redis;
  readonly kc: KeyConsole;
  close(): Promise<void>;
}

/** A fresh redis-server and a KeyConsole on it (`options` without `redis`). */
export async function startConsoleOnRedis(options: Omit<KeyConsoleOptions, 'redis'> = {}): Promise<ConsoleOnRedis> {
  const redis = await startRedis();
  let kc: KeyConsole;
  try {
    kc = new KeyConsole({ ...options, redis: redis.url });
  } catch (err) {
    await destroyRedis(redis);
    throw err;
  }
  return {
    redis,
    db: redis.client(),
    kc,
    async close() {
      await kc.close();
      await destroyRedis(redis);
    },
  };
}

/** `p` rejects with a ConsoleError of `code` (and a message matching `msg`, when given). */
export async function expectCode(p: Promise<unknown>, code: ConsoleError['code'], msg?: RegExp): Promise<void> {
  const err = await p.then(
    () => new Error('expected a ConsoleError'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConsoleError);
  expect((err as ConsoleError).code).toBe(code);
  if (msg) expect((err as Error).message).toMatch(msg);
}
