/**
 * The common start of a bench that seeds a redis-server and starts targets: h2load checked, a scratch
 * directory `bench/tmp/<name>-<pid>`, the bench's own redis-server and a seeding client, the key
 * schema, and a list of targets; `close` stops the targets and redis and removes the scratch directory.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { schema, type Schema } from '../../src/schema/redis-schema.ts';
import { ensureH2load } from './h2load.ts';
import type { Target } from './procs.ts';
import { startRedis, type BenchRedis } from './redis.ts';

export interface BenchSetup {
  readonly tmp: string;
  readonly redis: BenchRedis;
  readonly db: Redis;
  readonly s: Schema;
  /** Targets started by the bench, stopped by `close`. */
  readonly targets: Target[];
  close(): Promise<void>;
}

export async function startBench(name: string): Promise<BenchSetup> {
  ensureH2load();
  const tmp = join(import.meta.dirname, '..', 'tmp', `${name}-${process.pid}`);
  mkdirSync(tmp, { recursive: true });
  const redis = await startRedis();
  const targets: Target[] = [];
  return {
    tmp,
    redis,
    db: redis.client(),
    s: schema(),
    targets,
    async close() {
      for (const t of targets) await t.stop();
      await redis.stop();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
