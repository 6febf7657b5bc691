/**
 * A management API server (`keygate console`) on a test Redis, on a free port, with an all-accounts
 * token and a token scoped to one account. Closing it is the caller's (`srv.close()`).
 */
import { randomBytes } from 'node:crypto';
import { CLI_ACTOR } from '../../src/console/management.ts';
import { loadConsoleApiConfig } from '../../src/console-api/config.ts';
import { startConsole, type ConsoleServer } from '../../src/console-api/main.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { destroyRedis, startRedis, type RedisServer } from './redis-server.ts';

export interface TestConsole {
  readonly srv: ConsoleServer;
  readonly base: string;
  /** An all-accounts token named "ops". */
  readonly admin: string;
  /** A token scoped to the account given, named "owner page". */
  readonly owner: string;
  readonly ownerId: string;
}

export async function startTestConsole(redisUrl: string, ownerAccount: string, env: Record<string, string> = {}): Promise<TestConsole> {
  const config = loadConsoleApiConfig({ port: 0, redisUrl }, { KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_CONSOLE_RATE_LIMIT: '100000', ...env });
  const srv = await startConsole(config, createLogger('silent'), { revealKey: `k1:${randomBytes(32).toString('base64')}`, credentialKey: `c1:${randomBytes(32).toString('base64')}` });
  try {
    const admin = (await srv.console.createToken({ name: 'ops', account: null }, CLI_ACTOR)).token;
    const o = await srv.console.createToken({ name: 'owner page', account: ownerAccount }, CLI_ACTOR);
    return { srv, base: `http://127.0.0.1:${srv.port}`, admin, owner: o.token, ownerId: o.record.id };
  } catch (err) {
    await srv.close();
    throw err;
  }
}

export interface ApiResponse {
  readonly status: number;
  /** The JSON body, or the text when it is not JSON. */
  readonly body: any;
  readonly headers: Headers;
}

export interface ApiCallOptions {
  /** Bearer token; null sends none. */
  readonly token?: string | null;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Sent as it is (instead of `body`). */
  readonly raw?: string;
  readonly headers?: Record<string, string>;
}

/** One request to the management API at `base`. */
export async function callApi(base: string, method: string, path: string, opts: ApiCallOptions = {}): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined && opts.token !== null) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* metrics, etc. */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** A test console on its own redis-server for the file's tests (started before them, stopped after). */
export interface ConsoleFixture extends TestConsole {
  readonly redis: RedisServer;
  /** A client for seeding and inspecting. */
  readonly db: Redis;
}

/** An account answer's bare_models beside sidecars without KEYGATE_BARE_MODEL_PROVIDER. */
export const PLAIN_NAMES_UNREAD = { openai: { rule: 'none', provider: null }, anthropic: { rule: 'none', provider: null }, google: { rule: 'none', provider: null } };
/** An account answer's bare_models with no live sidecar. */
export const PLAIN_NAMES_UNREPORTED = { openai: { rule: 'unreported', provider: null }, anthropic: { rule: 'unreported', provider: null }, google: { rule: 'unreported', provider: null } };

/** Registers beforeAll/afterAll that start and stop a test console; read the fixture inside tests. */

export function useTestConsole(ownerAccount: string): ConsoleFixture {
  const f = {} as { -readonly [K in keyof ConsoleFixture]: ConsoleFixture[K] };
  beforeAll(async () => {
    f.redis = await startRedis();
    f.db = f.redis.client();
    Object.assign(f, await startTestConsole(f.redis.url, ownerAccount));
  }, 60_000);
  afterAll(async () => {
    await f.srv?.close();
    if (f.redis) await destroyRedis(f.redis);
  });
  return f;
}
