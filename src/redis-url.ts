/**
 * The Redis URL setting, parsed (a leaf: imports nothing, so config and store both use it without a
 * folder loop). Forms:
 *   redis://[user:pass@]host:port[/db]      rediss:// for TLS
 *   redis-sentinel://[:pass@]host:port[,host:port…]/masterName[/db][?sentinelPassword=…&sentinelUsername=…]
 *     (the userinfo password is the data nodes'; the sentinels' own credentials, when they have
 *     any, go in the query)
 *   redis-cluster://[:pass@]host:port[,host:port…]      rediss-cluster:// for TLS
 */
export interface ParsedRedisUrl {
  readonly mode: 'standalone' | 'sentinel' | 'cluster';
  readonly tls: boolean;
  readonly hosts: ReadonlyArray<{ host: string; port: number }>;
  readonly username?: string;
  readonly password?: string;
  readonly db: number;
  readonly masterName?: string;
  readonly sentinelUsername?: string;
  readonly sentinelPassword?: string;
}

function hostsOf(list: string, defaultPort: number): { host: string; port: number }[] {
  return list.split(',').map((hp) => {
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(hp.trim());
    if (!m) throw new Error(`bad host "${hp}"`);
    const port = m[2] === undefined ? defaultPort : Number(m[2]);
    if (port < 1 || port > 65535) throw new Error(`bad port in "${hp}"`);
    return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
  });
}

/** Parses a Redis URL of any supported mode; throws with a message that never contains the password. */
export function parseRedisUrl(url: string): ParsedRedisUrl {
  const m = /^([a-z-]+):\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#@]+)(\/[^?#]*)?(?:\?([^#]*))?$/.exec(url);
  if (!m) throw new Error('REDIS_URL is not a valid Redis URL');
  const query = new URLSearchParams(m[6] ?? '');
  for (const k of query.keys()) {
    if (m[1] !== 'redis-sentinel' || (k !== 'sentinelPassword' && k !== 'sentinelUsername')) {
      throw new Error(`REDIS_URL parameter "${k}" is not supported`);
    }
  }
  const scheme = m[1]!;
  const username = m[2] ? decodeURIComponent(m[2]) : undefined;
  const password = m[3] !== undefined ? decodeURIComponent(m[3]) : undefined;
  const path = (m[5] ?? '').split('/').filter(Boolean);
  const auth = { ...(username ? { username } : {}), ...(password !== undefined ? { password } : {}) };
  const dbOf = (s: string | undefined) => {
    if (s === undefined) return 0;
    if (!/^\d{1,2}$/.test(s)) throw new Error('REDIS_URL database must be a number');
    return Number(s);
  };
  switch (scheme) {
    case 'redis':
    case 'rediss':
      return { mode: 'standalone', tls: scheme === 'rediss', hosts: hostsOf(m[4]!, 6379), db: dbOf(path[0]), ...auth };
    case 'redis-sentinel': {
      if (!path[0]) throw new Error('redis-sentinel:// URL needs the master name as its path');
      const sentinelUsername = query.get('sentinelUsername') ?? undefined;
      const sentinelPassword = query.get('sentinelPassword') ?? undefined;
      return {
        mode: 'sentinel',
        tls: false,
        hosts: hostsOf(m[4]!, 26379),
        masterName: path[0],
        db: dbOf(path[1]),
        ...auth,
        ...(sentinelUsername !== undefined ? { sentinelUsername } : {}),
        ...(sentinelPassword !== undefined ? { sentinelPassword } : {}),
      };
    }
    case 'redis-cluster':
    case 'rediss-cluster':
      return { mode: 'cluster', tls: scheme === 'rediss-cluster', hosts: hostsOf(m[4]!, 6379), db: 0, ...auth };
    default:
      throw new Error(`REDIS_URL scheme "${scheme}" is not supported`);
  }
}
