/**
 * The sidecar's store from config: the data connection (`REDIS_URL`, any mode), the uncached
 * `RedisRecordSource`, and in front of it the `CachedRecordSource` with its invalidation tracker
 * (one link for standalone/Sentinel, one per master for Cluster). With Sentinel, a watch on the
 * sentinels' failover announcements pauses the store while a failover is under way and moves
 * every connection to the new master as soon as it is announced (`sentinel-watch.ts`).
 */
import { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Schema } from '../schema/redis-schema.ts';
import { CachedRecordSource } from './cache.ts';
import { ClusterTracker, SingleTracker, type Tracker, type TrackingOptions } from './invalidation.ts';
import { parseRedisUrl } from '../redis-url.ts';
import { connectRedis, nodeOptions } from './redis.ts';
import { redisSource } from './redis-source.ts';
import { watchSentinels, type FailoverHandlers } from './sentinel-watch.ts';

export { CachedRecordSource, type CacheStats } from './cache.ts';

export type StoreConfig = Pick<
  Config,
  'redisUrl' | 'redisTimeoutMs' | 'cacheMaxEntries' | 'serveCachedDuringOutage' | 'storeMaxInflight' | 'stalenessBoundMs'
>;

/** Called for each connection the store opens: `commands` (data) and `invalidation` (subscribers). */
export type WatchConnection = (client: Redis | Cluster, connection: 'commands' | 'invalidation') => void;

/**
 * `failover`: told when a Sentinel failover starts and when it ends, after the store has paused or
 * resumed (the rate limiter, which shares the commands connection, pauses with it).
 */
export function createKeyStore(
  config: StoreConfig,
  s: Schema,
  log: Logger,
  watch: WatchConnection = () => {},
  failover?: FailoverHandlers,
): CachedRecordSource {
  const parsed = parseRedisUrl(config.redisUrl);
  // A connection that died silently (no FIN, no RST) is replaced once a command has waited this long.
  const socketTimeoutMs = Math.max(1000, config.redisTimeoutMs * 4);
  const redis = connectRedis(config.redisUrl, { commandTimeoutMs: config.redisTimeoutMs, connectionName: 'keygate-sidecar', socketTimeoutMs });
  // Connection errors are reported by the caller's `watch` (RedisOutageReporter: once, then a slow reminder).
  redis.on('error', (err: Error) => log.debug({ err: { message: err.message } }, 'redis connection error'));
  watch(redis, 'commands');
  const inner = redisSource(redis, s, log);

  let tracker: Tracker | null = null;
  let single: SingleTracker | null = null;
  if (config.cacheMaxEntries > 0) {
    // The subscriber's PING timeout is generous (a slow PING must not reconnect it); the staleness
    // bound, not this timeout, decides how long the cache is trusted without an answer.
    const subOpts = { commandTimeoutMs: socketTimeoutMs, socketTimeoutMs, subscriber: true, protocol: 2 as const };
    const onSubError = (err: Error) => log.debug({ err: { message: err.message } }, 'invalidation connection error');
    const opts: TrackingOptions = { prefixes: s.trackedPrefixes, boundMs: config.stalenessBoundMs, retryMs: 250, log };
    if (redis instanceof Cluster) {
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
      tracker = single = new SingleTracker(
        redis,
        (name) => {
          const sub = connectRedis(config.redisUrl, { ...subOpts, connectionName: name }) as Redis;
          sub.on('error', onSubError);
          watch(sub, 'invalidation');
          return sub;
        },
        { ...opts, datasetMarker: s.datasetMarker, requireMaster: parsed.mode === 'sentinel' },
      );
    }
  }
  if (parsed.mode === 'sentinel') {
    const sentinels = watchSentinels(
      parsed,
      {
        started: (reason) => {
          inner.pause(reason);
          single?.pause(reason);
          failover?.started(reason);
        },
        switched: (reason) => {
          inner.resume();
          if (single) single.masterSwitched(reason);
          else redis.disconnect(true);
          failover?.switched(reason);
        },
      },
      log,
    );
    inner.onClose(() => sentinels.close());
  }

  return new CachedRecordSource(
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
