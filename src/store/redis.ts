/**
 * Redis connections from one URL setting (its forms: `src/redis-url.ts`). Commands fail fast while
 * disconnected (no offline queue) so that a decision never waits on an outage longer than the
 * command timeout.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { parseRedisUrl, type ParsedRedisUrl } from '../redis-url.ts';

export type RedisClient = Redis | Cluster;

export interface ConnectOptions {
  readonly commandTimeoutMs: number;
  readonly connectionName?: string;
  /** Keep commands queued while connecting (console CLI) instead of failing fast (sidecar). */
  readonly queueWhileOffline?: boolean;
  readonly lazyConnect?: boolean;
  /** RESP protocol version; the invalidation subscriber uses 2. */
  readonly protocol?: 2 | 3;
  /**
   * A connection that SUBSCRIBEs by itself after each (re)connect (the invalidation subscriber):
   * no automatic resubscribe, so that its new CLIENT ID is read first.
   */
  readonly subscriber?: boolean;
  /**
   * Destroy the socket (and reconnect) when a command has been waiting this long without any byte
   * from the server: replaces a connection that died without FIN or RST.
   */
  readonly socketTimeoutMs?: number;
}

/** Reconnect forever with capped backoff: the sidecar recovers by itself when Redis returns. */
const retryStrategy = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000);

/** Options for one node connection (also used for per-node subscribers in Cluster). */
export function nodeOptions(p: ParsedRedisUrl, opts: ConnectOptions): RedisOptions {
  return {
    commandTimeout: opts.commandTimeoutMs,
    connectTimeout: Math.max(1000, opts.commandTimeoutMs * 4),
    enableOfflineQueue: opts.queueWhileOffline ?? false,
    maxRetriesPerRequest: opts.queueWhileOffline ? 2 : 0,
    retryStrategy,
    lazyConnect: opts.lazyConnect ?? false,
    protocol: opts.protocol ?? 2,
    ...(opts.connectionName ? { connectionName: opts.connectionName } : {}),
    ...(p.username ? { username: p.username } : {}),
    ...(p.password !== undefined ? { password: p.password } : {}),
    ...(p.tls ? { tls: {} } : {}),
    ...(opts.subscriber ? { autoResubscribe: false } : {}),
    ...(opts.socketTimeoutMs ? { socketTimeout: opts.socketTimeoutMs } : {}),
  };
}

export function connectRedis(url: string, opts: ConnectOptions): RedisClient {
  const p = parseRedisUrl(url);
  const common = nodeOptions(p, opts);
  if (p.mode === 'cluster') {
    const clusterOpts: ClusterOptions = {
      redisOptions: common,
      enableOfflineQueue: opts.queueWhileOffline ?? false,
      clusterRetryStrategy: retryStrategy,
      lazyConnect: opts.lazyConnect ?? false,
    };
    return new Cluster(p.hosts.map((h) => ({ host: h.host, port: h.port })), clusterOpts);
  }
  if (p.mode === 'sentinel') {
    return new Redis({
      ...common,
      sentinels: p.hosts.map((h) => ({ host: h.host, port: h.port })),
      name: p.masterName!,
      db: p.db,
      sentinelRetryStrategy: retryStrategy,
      ...(p.sentinelUsername !== undefined ? { sentinelUsername: p.sentinelUsername } : {}),
      ...(p.sentinelPassword !== undefined ? { sentinelPassword: p.sentinelPassword } : {}),
    });
  }
  return new Redis({ ...common, host: p.hosts[0]!.host, port: p.hosts[0]!.port, db: p.db });
}
