/**
 * SIGTERM against the real CLI (`bin/keygate serve` as a child process): readiness goes false at
 * once, checks in flight finish, new checks are still answered during the drain delay, then the
 * ports close and the process exits 0 within the shutdown timeout. No check is dropped.
 *
 * To hold checks in flight across the moment the gRPC server shuts down, Redis is paused
 * (CLIENT PAUSE) with a Redis timeout longer than the pause: the checks wait inside keygate.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ConfigError, loadConfig } from '../src/config.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { adminGet, sample, waitFor } from './helpers/admin.ts';
import { EnvoyClient, type CheckResponseMsg } from './helpers/envoy-client.ts';
import { destroyRedis, freePort, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
const DRAIN_MS = 1500;
const SHUTDOWN_MS = 15_000;
const PAUSE_MS = 3000;

let redis: RedisServer;
let db: Redis;
let keys: SeededKey[];

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  keys = await Promise.all(Array.from({ length: 20 }, (_, i) => seedKey(db, schema(), { account: `acct-${i % 4}` })));
});

afterAll(async () => {
  await destroyRedis(redis);
});

interface Child {
  readonly proc: ChildProcess;
  readonly grpcPort: number;
  readonly adminPort: number;
  readonly logs: () => Array<Record<string, unknown>>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

async function serve(): Promise<Child> {
  const [grpcPort, httpPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  const proc = spawn(BIN, ['serve'], {
    env: {
      PATH: process.env.PATH,
      KEYGATE_NODE: process.execPath,
      REDIS_URL: redis.url,
      KEYGATE_GRPC_PORT: String(grpcPort),
      KEYGATE_HTTP_PORT: String(httpPort),
      KEYGATE_ADMIN_PORT: String(adminPort),
      KEYGATE_ADMIN_HOST: '127.0.0.1',
      KEYGATE_REDIS_TIMEOUT_MS: '20000',
      KEYGATE_DRAIN_DELAY_MS: String(DRAIN_MS),
      KEYGATE_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_MS),
      KEYGATE_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  const logs = () =>
    out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  try {
    await waitFor('keygate ready', async () => (await adminGet(adminPort, '/readyz')).status === 200, 30_000);
  } catch (e) {
    proc.kill('SIGKILL');
    throw new Error(`keygate did not start: ${(e as Error).message}\nstdout: ${out}\nstderr: ${err}`);
  }
  return { proc, grpcPort, adminPort, logs, exited };
}

/** grpc.health.v1 as Envoy's cluster health check asks it. */
function healthOf(port: number): { status: () => Promise<string>; close: () => void } {
  const Ctor = grpc.makeGenericClientConstructor(healthService as grpc.ServiceDefinition, 'Health');
  const c = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Function>;
  return {
    status: () =>
      new Promise((resolve, reject) =>
        c.Check!({ service: 'envoy.service.auth.v3.Authorization' }, { deadline: Date.now() + 5000 }, (err: Error | null, res: { status: string }) =>
          err ? reject(err) : resolve(res.status),
        ),
      ),
    close: () => c.close(),
  };
}

const inFlight = async (port: number) => sample((await adminGet(port, '/metrics')).body, 'keygate_checks_in_flight') ?? -1;

describe('graceful shutdown on SIGTERM', () => {
  it('answers every check in flight or sent during the drain, then exits 0', async () => {
    const child = await serve();
    const client = new EnvoyClient(`127.0.0.1:${child.grpcPort}`);
    const health = healthOf(child.grpcPort);
    try {
      expect(await health.status()).toBe('SERVING');
      // A warm-up check so the channel is connected, with a key of its own: the batch's keys must
      // stay cold (not in keygate's cache), so that their checks wait on the paused Redis.
      const warm = await seedKey(db, schema(), { account: 'acct-warm' });
      expect((await client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${warm.key}` } })).status?.code).toBe(0);

      // Batch A: in flight when SIGTERM arrives (Redis paused, so they wait inside keygate).
      await db.client('PAUSE', PAUSE_MS, 'ALL');
      const send = (i: number): Promise<CheckResponseMsg> =>
        client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${keys[i % keys.length]!.key}`, 'x-request-id': `r-${i}` } }, 60_000);
      const batchA = Array.from({ length: 200 }, (_, i) => send(i));
      await waitFor('200 checks in flight', async () => (await inFlight(child.adminPort)) === 200);

      const sigtermAt = Date.now();
      child.proc.kill('SIGTERM');

      // Readiness drops at once; the process is still alive and serving.
      await waitFor('readyz 503', async () => (await adminGet(child.adminPort, '/readyz')).status === 503, 5_000);
      const ready = await adminGet(child.adminPort, '/readyz');
      expect(JSON.parse(ready.body)).toMatchObject({ ready: false, draining: true });
      expect((await adminGet(child.adminPort, '/healthz')).status).toBe(200);
      expect(await health.status()).toBe('NOT_SERVING');

      // Batch B: new checks during the drain delay are still accepted (and also wait on Redis).
      const batchB = Array.from({ length: 50 }, (_, i) => send(1000 + i));
      await waitFor('250 checks in flight', async () => (await inFlight(child.adminPort)) === 250, 5_000);
      expect(Date.now() - sigtermAt).toBeLessThan(DRAIN_MS + PAUSE_MS);

      const results = await Promise.allSettled([...batchA, ...batchB]);
      const failed = results.filter((r) => r.status === 'rejected');
      expect(failed.map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
      for (const r of results) expect((r as PromiseFulfilledResult<CheckResponseMsg>).value.status?.code).toBe(0);

      const exit = await child.exited;
      expect(exit).toMatchObject({ code: 0, signal: null });
      expect(exit.at - sigtermAt).toBeGreaterThanOrEqual(DRAIN_MS);
      expect(exit.at - sigtermAt).toBeLessThan(SHUTDOWN_MS);

      const msgs = child.logs().map((l) => l.msg);
      expect(msgs).toEqual(expect.arrayContaining(['shutting down', 'draining: not ready, still serving', 'stopped']));
      // Once gone, a check cannot reach it (Envoy then answers 503 per status_on_error).
      await expect(client.check({ path: '/v1/chat/completions', headers: {} }, 2_000)).rejects.toThrow();
    } finally {
      client.close();
      health.close();
      if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
    }
  });

  it('exits 0 promptly on SIGTERM when idle', async () => {
    const child = await serve();
    const sigtermAt = Date.now();
    child.proc.kill('SIGTERM');
    const exit = await child.exited;
    expect(exit.code).toBe(0);
    expect(exit.at - sigtermAt).toBeLessThan(SHUTDOWN_MS);
  });
});

describe('shutdown settings', () => {
  it('refuses a drain delay that does not fit in the shutdown timeout', () => {
    expect(() => loadConfig({}, { KEYGATE_DRAIN_DELAY_MS: '20000', KEYGATE_SHUTDOWN_TIMEOUT_MS: '20000' })).toThrow(ConfigError);
    expect(() => loadConfig({}, { KEYGATE_DRAIN_DELAY_MS: '20000', KEYGATE_SHUTDOWN_TIMEOUT_MS: '20000' })).toThrow(/KEYGATE_DRAIN_DELAY_MS/);
    expect(loadConfig({}, { KEYGATE_DRAIN_DELAY_MS: '0', KEYGATE_SHUTDOWN_TIMEOUT_MS: '1000' }).drainDelayMs).toBe(0);
  });
});
