/**
 * The sidecar's Redis outage messages against a real ioredis client and a port where nothing
 * listens: the first error is one line naming the Redis (never its password) and what to do,
 * then a reminder at the slow rate, never one line per reconnect attempt.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisOutageReporter, redisTarget } from '../src/store/redis-outage.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { freePort } from './helpers/redis-server.ts';

let client: Redis | undefined;
afterEach(() => {
  client?.disconnect();
  client = undefined;
});

describe('RedisOutageReporter', () => {
  it('says it once, then reminds at its rate, with the target and without the password', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('info', { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    const port = await freePort();
    const url = `redis://user:s3cret-pass@127.0.0.1:${port}`;
    const reporter = new RedisOutageReporter(url, log, 600);
    let errors = 0;
    client = new Redis({ host: '127.0.0.1', port, password: 's3cret-pass', retryStrategy: () => 50, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    client.on('error', () => errors++);
    reporter.attach(client);
    await new Promise((r) => setTimeout(r, 1500));
    const first = lines.filter((l) => l.level === 50);
    const reminders = lines.filter((l) => l.level === 40);
    expect(errors).toBeGreaterThan(8);
    expect(first).toHaveLength(1);
    expect(first[0]!.msg).toContain(`cannot reach Redis at redis://127.0.0.1:${port}`);
    expect(first[0]!.msg).toContain('bin/keygate dev');
    expect(reminders.length).toBeGreaterThanOrEqual(1);
    expect(reminders.length).toBeLessThanOrEqual(3);
    expect(reminders[0]!.msg).toBe(`still cannot reach Redis at redis://127.0.0.1:${port}`);
    expect(JSON.stringify(lines)).not.toContain('s3cret-pass');
    expect(reporter.reason()).toMatch(/ECONNREFUSED/);
  });

  it('names every mode without credentials', () => {
    expect(redisTarget('redis-sentinel://:pw@a:26379,b:26380/mymaster/2?sentinelPassword=x')).toBe('redis-sentinel://a:26379,b:26380/mymaster');
    expect(redisTarget('rediss://u:pw@h:6380/1')).toBe('rediss://h:6380');
    expect(redisTarget('redis-cluster://:pw@n1:7000,n2')).toBe('redis-cluster://n1:7000,n2:6379');
  });
});
