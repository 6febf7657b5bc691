/**
 * The sidecar's store from config: the data connection (`REDIS_URL`, any mode), the uncached
 * `RedisRecordSource`, and in front of it the `CachedRecordSource` with its invalidation tracker
 * (one link for standalone/Sentinel, one per master for Cluster). With Sentinel, a watch on the
 * sentinels' failover announcements pauses the store while a failover is under way and moves
 * every connection to the new master as soon as it is announced (`sentinel-watch.ts`).
 *
 * `createSidecarStore` is the sidecar's whole store as one value: the records, the Redis links,
 * the rate limiter and token views on the commands connection, the sidecar settings, the usage
 * and refusal counters on their own connection, the outage reporter; closed together.
 */
import type { Clock } from '../core/clock.ts';
import { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Schema } from '../schema/redis-schema.ts';
import { CachedRecordSource } from './cache.ts';
import { ClusterTracker, SingleTracker, type Tracker, type TrackingOptions } from './invalidation.ts';
import { parseRedisUrl } from '../redis-url.ts';
import { connectRedis, nodeOptions, type RedisClient } from './redis.ts';
import { redisSource } from './redis-source.ts';
import { watchSentinels, type FailoverHandlers } from './sentinel-watch.ts';
import { RateLimiter } from './rate-limiter.ts';
import { TokenRateViews } from './token-rate-views.ts';
import { SidecarSettings } from './sidecar-settings.ts';
import { RedisOutageReporter } from './redis-outage.ts';
import { redisUsageWrite, UsageCounter } from './usage-counter.ts';
import { redisRefusalWrite } from './refusal-count.ts';

export { CachedRecordSource, type CacheStats } from './cache.ts';

export type StoreConfig = Pick<
  Config,
  'redisUrl' | 'redisTimeoutMs' | 'cacheMaxEntries' | 'serveCachedDuringOutage' | 'storeMaxInflight' | 'stalenessBoundMs'
>;

/** Called for each connection the store opens: `commands` (data), `invalidation` (subscribers), `usage` (the counters'). */
export type WatchConnection = (client: Redis | Cluster, connection: 'commands' | 'invalidation' | 'usage') => void;

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
  return openKeyStore(config, s, log, watch, failover).records;
}

/** The cached records and the commands connection they read on. */
function openKeyStore(
  config: StoreConfig,
  s: Schema,
  log: Logger,
  watch: WatchConnection,
  failover: FailoverHandlers | undefined,
): { records: CachedRecordSource; redis: RedisClient } {
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

  const records = new CachedRecordSource(
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
  return { records, redis };
}

export type SidecarStoreConfig = StoreConfig & Pick<Config, 'countUsage' | 'requireWallet' | 'bareModelProviders'>;

/** The sidecar's store, one value: what the authorizer, the phases and the sidecar's metrics read. */
export interface SidecarStore {
  /** The cached key and account records: `stats()` (hits, misses, …), `ready()`. */
  readonly records: CachedRecordSource;
  /** The commands connection (records, rate limits, token views, settings share it). */
  readonly redis: RedisClient;
  /** Rate limits on the commands connection (docs/rate-limits.md): paused with the store during a Sentinel failover. */
  readonly limiter: RateLimiter;
  readonly tokenViews: TokenRateViews;
  /** What this sidecar enforces and how it reads a bare model name (for the console; on a timer, never per request). */
  readonly settings: SidecarSettings;
  /** Why the store is not ready, when Redis is down (for `/readyz`). */
  readonly outage: RedisOutageReporter;
  /** Per-key request counts flushed once a second (null when `KEYGATE_COUNT_USAGE=false`). */
  readonly usage: UsageCounter | null;
  /** The endpoint rule's refusals per key (the page's "refused: endpoint"), beside the usage counts. */
  readonly refusals: UsageCounter | null;
  /** Flushes the counters, then closes every link (the records last). */
  close(): Promise<void>;
}

/**
 * The sidecar's store from config. `watch` sees every connection opened (metrics);
 * `clock`: the clock of the limiter's windows and leases and the token views (default `systemClock`).
 */
export function createSidecarStore(
  config: SidecarStoreConfig,
  s: Schema,
  log: Logger,
  opts: { watch?: WatchConnection; clock?: Clock } = {},
): SidecarStore {
  const watch = opts.watch ?? (() => {});
  const outage = new RedisOutageReporter(config.redisUrl, log);
  const { records, redis } = openKeyStore(
    config,
    s,
    log,
    (client, connection) => {
      watch(client, connection);
      if (connection === 'commands') outage.attach(client);
    },
    {
      // The limiter shares the commands connection: it pauses with the store during a Sentinel failover.
      started: (reason) => limiter.pause(reason),
      switched: () => limiter.resume(),
    },
  );
  // Rate limits on the store's connection; a key and an account without rates never reach them.
  const limiter = new RateLimiter(redis, { clock: opts.clock });
  const tokenViews = new TokenRateViews(redis, { clock: opts.clock });
  const settings = new SidecarSettings(redis, s.sidecars(), { requireWallet: config.requireWallet, bareModelProviders: config.bareModelProviders, log });
  settings.start();
  // Its own connection: a flush's pipeline never queues in front of a cold key's lookup.
  const usageRedis = config.countUsage
    ? connectRedis(config.redisUrl, { commandTimeoutMs: Math.max(1000, config.redisTimeoutMs), connectionName: 'keygate-usage' })
    : null;
  usageRedis?.on('error', (err: Error) => log.debug({ err: { message: err.message } }, 'usage counter connection error'));
  if (usageRedis) watch(usageRedis, 'usage');
  const usage = usageRedis ? new UsageCounter(redisUsageWrite(usageRedis, s), log) : null;
  const refusals = usageRedis ? new UsageCounter(redisRefusalWrite(usageRedis, s), log) : null;
  return {
    records,
    redis,
    limiter,
    tokenViews,
    settings,
    outage,
    usage,
    refusals,
    async close() {
      if (usageRedis) {
        await Promise.all([usage!.close(), refusals!.close()]);
        usageRedis.disconnect();
      }
      outage.close();
      await limiter.close();
      await settings.close();
      await records.close();
    },
  };
}
