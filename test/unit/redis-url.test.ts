/** REDIS_URL forms: one setting for standalone, Sentinel and Cluster; bad URLs refused at start. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { parseRedisUrl } from '../../src/redis-url.ts';

describe('parseRedisUrl', () => {
  it('standalone, with credentials, TLS and db', () => {
    expect(parseRedisUrl('rediss://user:p%40ss@redis.internal:6380/2')).toEqual({
      mode: 'standalone',
      tls: true,
      hosts: [{ host: 'redis.internal', port: 6380 }],
      db: 2,
      username: 'user',
      password: 'p@ss',
    });
    expect(parseRedisUrl('redis://[::1]').hosts).toEqual([{ host: '::1', port: 6379 }]);
  });

  it('sentinel: data-node password in userinfo, sentinel credentials in the query', () => {
    const p = parseRedisUrl('redis-sentinel://:datapw@s1:26379,s2/mymaster/1?sentinelPassword=sentpw&sentinelUsername=ops');
    expect(p).toMatchObject({
      mode: 'sentinel',
      masterName: 'mymaster',
      db: 1,
      password: 'datapw',
      sentinelPassword: 'sentpw',
      sentinelUsername: 'ops',
      hosts: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
      ],
    });
    // sentinels without auth: the data password is not sent to them
    expect(parseRedisUrl('redis-sentinel://:datapw@s1/m').sentinelPassword).toBeUndefined();
  });

  it('cluster', () => {
    expect(parseRedisUrl('redis-cluster://a:7000,b:7001,c:7002')).toMatchObject({ mode: 'cluster', hosts: [{ host: 'a', port: 7000 }, { host: 'b', port: 7001 }, { host: 'c', port: 7002 }] });
  });

  it.each([
    ['redis-sentinel://s1:26379', /master name/],
    ['redis://h:99999', /bad port/],
    ['redis://h/abc', /database/],
    ['redis://h?foo=1', /parameter "foo"/],
    ['redis-cluster://h?sentinelPassword=x', /parameter "sentinelPassword"/],
  ])('%s is refused', (url, msg) => {
    expect(() => parseRedisUrl(url)).toThrow(msg);
  });
});

describe('REDIS_URL is validated at start', () => {
  it('a malformed URL is a one-line ConfigError that names REDIS_URL and hides the password', () => {
    let err: unknown;
    try {
      loadConfig({}, { REDIS_URL: 'redis://user:hunter2secret@h:99999' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/^invalid setting REDIS_URL/);
    expect((err as Error).message).toContain('bad port');
    expect((err as Error).message).not.toContain('hunter2secret');
  });
});
