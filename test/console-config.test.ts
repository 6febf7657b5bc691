/**
 * `keygate console` reads only the settings it uses: a sidecar setting that would stop the sidecar
 * (a bad port, conflicting ports, a bad cache bound) does not stop the management API, while a bad
 * setting it does use still stops it with a clear line.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, loadConsoleConfig } from '../src/config.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { startConsole } from '../src/console-api/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { callApi } from './helpers/console-api.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

/** Settings only the sidecar reads, each one that stops it. */
const BAD_SIDECAR = { KEYGATE_GRPC_PORT: 'not-a-port', KEYGATE_HTTP_PORT: '9001', KEYGATE_ADMIN_PORT: '9001', KEYGATE_CACHE_MAX_ENTRIES: '-5' };

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  if (redis) await destroyRedis(redis);
});

describe('the management API reads only its own settings', () => {
  it('the bad sidecar settings stop the sidecar', () => {
    expect(() => loadConfig({}, BAD_SIDECAR)).toThrow(ConfigError);
  });

  it('but not the management API: it starts and answers', async () => {
    const config = loadConsoleApiConfig({ port: 0, redisUrl: redis.url }, { ...BAD_SIDECAR, KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_REDIS_NAMESPACE: 'cfg' });
    expect(config.redisNamespace).toBe('cfg');
    const srv = await startConsole(config, createLogger('silent'));
    try {
      const r = await callApi(`http://127.0.0.1:${srv.port}`, 'GET', '/readyz');
      expect([r.status, r.body]).toEqual([200, { status: 'ready' }]);
    } finally {
      await srv.close();
    }
    // Nor the CLI's console commands.
    expect(loadConsoleConfig({ redisUrl: redis.url }, BAD_SIDECAR).redisUrl).toBe(redis.url);
  });

  it('a bad setting it uses still stops it, naming the setting', () => {
    expect(() => loadConsoleApiConfig({ port: 0 }, { KEYGATE_LOG_LEVEL: 'loud' })).toThrow(/KEYGATE_LOG_LEVEL/);
    expect(() => loadConsoleApiConfig({ port: 0 }, { KEYGATE_DRAIN_DELAY_MS: '9000', KEYGATE_SHUTDOWN_TIMEOUT_MS: '5000' })).toThrow(/KEYGATE_DRAIN_DELAY_MS/);
    expect(() => loadConsoleApiConfig({ port: 0 }, { KEYGATE_CONSOLE_RATE_LIMIT: '0' })).toThrow(/KEYGATE_CONSOLE_RATE_LIMIT/);
  });
});
