/** `keygate dev`'s whole stack on free ports in a temporary directory, for the SDK suites; and the real CLI against it. */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { parseUsageEntry, type UsageEntry } from '../../src/schema/money.ts';
import { schema } from '../../src/schema/redis-schema.ts';
import { waitFor } from './sidecars.ts';
import { startDev } from '../../src/dev/index.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { freePort } from './redis-server.ts';

export interface DevStack {
  readonly dev: Awaited<ReturnType<typeof startDev>>;
  /** dev's Redis. */
  readonly db: Redis;
  /** The demo key. */
  readonly key: string;
  /** The dev gateway (the Envoy stand-in). */
  readonly base: string;
  /** The real CLI (`bin/keygate`) against dev's Redis and reveal key: stdout, or the failure. */
  keygate(args: string[]): Promise<string>;
  stop(): Promise<void>;
}

const BIN = fileURLToPath(new URL('../../bin/keygate', import.meta.url));

export async function startDevStack(prefix: string): Promise<DevStack> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  let dev: DevStack['dev'] | undefined;
  try {
    const p: number[] = [];
    while (p.length < 6) {
      const n = await freePort();
      if (!p.includes(n)) p.push(n);
    }
    dev = await startDev({ dir, redisPort: p[0]!, grpcPort: p[1]!, httpPort: p[2]!, adminPort: p[3]!, gatewayPort: p[4]!, consolePort: p[5]! }, createLogger('silent'));
    const db = new Redis({ port: p[0]!, host: '127.0.0.1' });
    const d = dev;
    return {
      dev: d,
      db,
      key: d.ctx.demoKey!.key,
      base: `http://127.0.0.1:${p[4]}`,
      keygate: (args) => {
        const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', KEYGATE_NODE: process.execPath, REDIS_URL: d.ctx.redisUrl, KEYGATE_REVEAL_KEY: d.ctx.revealKey! };
        return new Promise((resolve, reject) =>
          execFile(BIN, args, { env, timeout: 60_000 }, (err, stdout, stderr) => (err ? reject(new Error(`keygate ${args.join(' ')}: ${stderr || err.message}`)) : resolve(stdout))),
        );
      },
      stop: async () => {
        db.disconnect();
        await d.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await dev?.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Runs `call`, then waits for its booking in `account`'s usage log: the wallet must go down by
 * exactly `cost`, with one entry; that entry is returned.
 */
export async function expectDebit(db: Redis, account: string, cost: number, call: () => Promise<void>): Promise<UsageEntry> {
  const s = schema();
  const balance = async () => Number(await db.hget(s.wallet(account), 'balance'));
  const before = await balance();
  const entries = await db.xlen(s.usageLog(account));
  await call();
  await waitFor(async () => (await db.xlen(s.usageLog(account))) > entries, 'the booking', 10_000);
  await new Promise((r) => setTimeout(r, 300));
  expect(before - (await balance())).toBe(cost);
  expect(await db.xlen(s.usageLog(account))).toBe(entries + 1);
  const [id, flat] = ((await db.xrevrange(s.usageLog(account), '+', '-', 'COUNT', 1)) as [string, string[]][])[0]!;
  return parseUsageEntry(account, id, flat);
}
