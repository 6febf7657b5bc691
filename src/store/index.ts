/**
 * The sidecar's store from config: the data connection (`REDIS_URL`, any mode), the uncached
 * `RedisKeyStore`, and in front of it the `CachedKeyStore` with its invalidation tracker
 * (one link for standalone/Sentinel, one per master for Cluster).
 */
import { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Schema } from '../schema/redis-schema.ts';
import { CachedKeyStore } from './cache.ts';
import { ClusterTracker, SingleTracker, type Tracker, type TrackingOptions } from './invalidation.ts';
import { connectRedis, nodeOptions, parseRedisUrl } from './redis.ts';
import { RedisKeyStore } from './redis-store.ts';

export { CachedKeyStore, type CacheStats } from './cache.ts';

export type StoreConfig = Pick<
  Config,
  'redisUrl' | 'redisTimeoutMs' | 'cacheMaxEntries' | 'serveCachedDuringOutage' | 'storeMaxInflight'
>;

/** Liveness check interval of the invalidation links. */
const HEARTBEAT_MS = 1000;

/** Called for each connection the store opens: `commands` (data) and `invalidation` (subscribers). */
export type WatchConnection = (client: Redis | Cluster, connection: 'commands' | 'invalidation') => void;

export function createKeyStore(config: StoreConfig, s: Schema, log: Logger, watch: WatchConnection = () => {}): CachedKeyStore {
  const redis = connectRedis(config.redisUrl, { commandTimeoutMs: config.redisTimeoutMs, connectionName: 'keygate-sidecar' });
  redis.on('error', (err: Error) => log.warn({ err: { message: err.message } }, 'redis connection error'));
  watch(redis, 'commands');
  const inner = new RedisKeyStore(redis, s, log);

  let tracker: Tracker | null = null;
  if (config.cacheMaxEntries > 0) {
    // The subscriber's own liveness bound: generous, a slow PING must not flap the cache.
    const subOpts = { commandTimeoutMs: Math.max(1000, config.redisTimeoutMs * 4), subscriber: true, protocol: 2 as const };
    const onSubError = (err: Error) => log.debug({ err: { message: err.message } }, 'invalidation connection error');
    const opts: TrackingOptions = { prefixes: s.trackedPrefixes, heartbeatMs: HEARTBEAT_MS, retryMs: 250, log };
    if (redis instanceof Cluster) {
      const parsed = parseRedisUrl(config.redisUrl);
      tracker = new ClusterTracker(
        redis,
        (host, port, name) => {
          const sub = new Redis({ ...nodeOptions(parsed, { ...subOpts, connectionName: name }), host, port });
          sub.on('error', onSubError);
          watch(sub, 'invalidation');
          return sub;
        },
        opts,
      );
    } else {
      tracker = new SingleTracker(
        redis,
        (name) => {
          const sub = connectRedis(config.redisUrl, { ...subOpts, connectionName: name }) as Redis;
          sub.on('error', onSubError);
          watch(sub, 'invalidation');
          return sub;
        },
        opts,
      );
    }
  }

  return new CachedKeyStore(
    inner,
    tracker,
    s,
    {
      maxEntries: config.cacheMaxEntries,
      serveCachedDuringOutage: config.serveCachedDuringOutage,
      lookupTimeoutMs: config.redisTimeoutMs,
      maxInflight: config.storeMaxInflight,
      maxQueued: config.storeMaxInflight * 4,
    },
    log,
  );
}
