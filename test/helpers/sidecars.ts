/**
 * In-process sidecars for tests: one on a given Redis (`startTestSidecar`, `startSidecarWith`), or a
 * whole stack — its own redis-server, a seeding client, the sidecar and an Envoy-style gRPC client —
 * in one call (`startStack`).
 */
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { loadConfig, type Config } from '../../src/config.ts';
import { startSidecar, type Sidecar, type SidecarDeps } from '../../src/main.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { EnvoyClient, type CheckResponseMsg } from './envoy-client.ts';
import { destroyRedis, startRedis, type RedisServer } from './redis-server.ts';

/** Settings as `loadConfig` takes them (flag names), e.g. `{ redisTimeoutMs: 10_000 }`. */
export type Settings = Partial<Record<keyof Config, unknown>>;

export interface TestSidecar {
  readonly sidecar: Sidecar;
  readonly client: EnvoyClient;
  close(): Promise<void>;
}

const testLogger = (): Logger => createLogger(process.env.KEYGATE_TEST_LOG ?? 'silent');

/**
 * A sidecar on free ports with exactly `settings` over the config defaults, and a gRPC client for
 * it. `log` defaults to silent (`KEYGATE_TEST_LOG=debug` to see the lines).
 */
export async function startSidecarWith(settings: Settings, log: Logger = testLogger(), deps: SidecarDeps = {}): Promise<TestSidecar> {
  const sidecar = await startSidecar(loadConfig({ grpcPort: 0, httpPort: 0, adminPort: 0, ...settings }, {}), log, deps);
  const client = new EnvoyClient(`127.0.0.1:${sidecar.grpcPort}`);
  return {
    sidecar,
    client,
    async close() {
      client.close();
      await sidecar.close();
    },
  };
}

/**
 * For store tests: a 1 s Redis timeout, a 1 s staleness bound (the shared test machine can stall a
 * process past the 250 ms default; tests of the bound set it), a 2 s shutdown bound and no drain
 * delay unless `extra` says otherwise.
 */
export function startTestSidecar(redisUrl: string, extra: Settings = {}, log?: Logger): Promise<TestSidecar> {
  return startSidecarWith({ redisUrl, redisTimeoutMs: 1000, stalenessBoundMs: 1000, shutdownTimeoutMs: 2000, drainDelayMs: 0, ...extra }, log);
}

export interface Stack extends TestSidecar {
  /** This stack's own redis-server (stop/start it to play an outage). */
  readonly redis: RedisServer;
  /** A client of that server for seeding and inspecting. */
  readonly db: Redis;
  /** Closes the client, the sidecar, then stops and removes the redis-server. */
  close(): Promise<void>;
}

/**
 * A fresh redis-server and a sidecar on it with `settings` over the config defaults (as
 * `startSidecarWith`). Cleans up after itself if the sidecar fails to start.
 */
export async function startStack(settings: Settings = {}, log?: Logger): Promise<Stack> {
  const redis = await startRedis();
  let sc: TestSidecar;
  try {
    sc = await startSidecarWith({ redisUrl: redis.url, ...settings }, log);
  } catch (err) {
    await destroyRedis(redis);
    throw err;
  }
  return {
    ...sc,
    redis,
    db: redis.client(),
    async close() {
      await sc.close();
      await destroyRedis(redis);
    },
  };
}

/** Two sidecars sharing one standalone Redis, their caches tracking; on a failed start nothing is left running. */
export interface SharedPair {
  readonly redis: RedisServer;
  readonly db: Redis;
  readonly a: TestSidecar;
  readonly b: TestSidecar;
  close(): Promise<void>;
}

export async function startSharedPair(extra: Settings = {}): Promise<SharedPair> {
  const redis = await startRedis();
  const started = await Promise.allSettled([startTestSidecar(redis.url, extra), startTestSidecar(redis.url, extra)]);
  const [a, b] = started.map((r) => (r.status === 'fulfilled' ? r.value : undefined));
  const close = async () => {
    await Promise.all([a?.close(), b?.close()]);
    await destroyRedis(redis);
  };
  try {
    if (!a || !b) throw (started.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason;
    await waitTracking(a, b);
    return { redis, db: redis.client(), a, b, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Polls `cond` until true; throws with `what` after `timeoutMs`. */
export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Until every sidecar's cache is tracking. 45 s: on a loaded machine (the whole suite, a browser
 * starting beside it) heartbeats miss the 250 ms staleness bound and drop tracking again and again
 * before it holds; a full suite run once waited out 20 s here.
 */
export const waitTracking = (...sc: TestSidecar[]) =>
  waitFor(() => sc.every((x) => x.sidecar.store.stats().tracking), 'cache tracking on every sidecar', 45_000);

/**
 * Checks `key` twice: allowed both times, the second with key record, account state and gate from
 * the cache. On a loaded machine a heartbeat can miss its bound and drop the cache between the two
 * checks (that is the staleness bound doing its job), so a warm-up that was cut that way is tried
 * again once tracking is back, a bounded number of times.
 */
export async function warmAllow(sc: TestSidecar, key: string, attempts = 5): Promise<void> {
  let last = '';
  for (let i = 0; i < attempts; i++) {
    await waitTracking(sc);
    if (outcomeOf(await sc.client.check(chatRequest(key))) !== 'allow') throw new Error('warm-up check was not allowed');
    const { hits, flushes } = sc.sidecar.store.stats();
    const second = outcomeOf(await sc.client.check(chatRequest(key)));
    const after = sc.sidecar.store.stats();
    const cached = after.hits - hits;
    if (second === 'allow' && cached === 3) return;
    last = `second check: ${second}, ${cached} of 3 lookups from the cache`;
    if (after.flushes === flushes) break; // not cut by a dropped cache: a real failure
  }
  throw new Error(last);
}

/** `'allow'` or the deny code. */
export function outcomeOf(res: CheckResponseMsg): string {
  if (res.ok_response && res.status?.code === 0) return 'allow';
  const body = JSON.parse(res.denied_response?.body ?? '{}');
  return body?.error?.code ?? `status ${res.denied_response?.status?.code}`;
}

export const chatRequest = (key: string, model?: string) => ({
  path: '/v1/chat/completions',
  headers: { 'x-api-key': key, 'content-type': 'application/json' },
  ...(model ? { body: JSON.stringify({ model, messages: [] }) } : {}),
});
