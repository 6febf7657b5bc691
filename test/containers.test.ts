/**
 * The same contract against Redis in a container (testcontainers), where a Docker engine exists —
 * the setup a platform team runs in its own CI. These machines have no engine: the suite is then
 * skipped, and says so; every other test uses real redis-server processes instead.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../src/schema/redis-schema.ts';
import { generateKey } from '../src/core/key-format.ts';
import { seedKey } from './helpers/seed.ts';
import { startSidecarWith, type TestSidecar } from './helpers/sidecars.ts';

const dockerEngine = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { timeout: 10_000 }).status === 0;

describe.skipIf(!dockerEngine)('against Redis in a container (testcontainers; needs a Docker engine)', () => {
  let container: { getHost(): string; getMappedPort(p: number): number; stop(): Promise<unknown> };
  let sc: TestSidecar;
  let url: string;

  beforeAll(async () => {
    const { GenericContainer, Wait } = await import('testcontainers');
    container = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).withWaitStrategy(Wait.forLogMessage('Ready to accept connections')).start();
    url = `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
    sc = await startSidecarWith({ redisUrl: url, redisTimeoutMs: 5000 });
  }, 180_000);

  afterAll(async () => {
    await sc?.close();
    await container?.stop();
  });

  it('allows a seeded key and refuses an unknown one', async () => {
    const { Redis } = await import('ioredis');
    const db = new Redis(url);
    try {
      const k = await seedKey(db, schema());
      const ok = await sc.client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${k.key}` } });
      expect(ok.status?.code).toBe(0);
      const no = await sc.client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${generateKey()}` } });
      expect(JSON.parse(no.denied_response!.body!).error.code).toBe('INVALID_API_KEY');
    } finally {
      db.disconnect();
    }
  });
});
