/**
 * `keygate dev` on free ports in a temporary directory, for tests that use it as a newcomer would:
 * the dev handle, a Redis client of its store, the demo key and the gateway's base URL.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startDev } from '../../src/dev/index.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { freePort } from './redis-server.ts';

export interface DevStack {
  readonly dev: Awaited<ReturnType<typeof startDev>>;
  readonly db: Redis;
  /** The demo key. */
  readonly key: string;
  /** The dev gateway, `http://127.0.0.1:<port>`. */
  readonly base: string;
  stop(): Promise<void>;
}

export async function startDevStack(prefix: string): Promise<DevStack> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const p: number[] = [];
  while (p.length < 6) {
    const n = await freePort();
    if (!p.includes(n)) p.push(n);
  }
  let dev: DevStack['dev'];
  try {
    dev = await startDev({ dir, redisPort: p[0]!, grpcPort: p[1]!, httpPort: p[2]!, adminPort: p[3]!, gatewayPort: p[4]!, consolePort: p[5]! }, createLogger('silent'));
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const db = new Redis({ port: p[0]!, host: '127.0.0.1' });
  return {
    dev,
    db,
    key: dev.ctx.demoKey!.key,
    base: `http://127.0.0.1:${p[4]}`,
    async stop() {
      db.disconnect();
      await dev.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
