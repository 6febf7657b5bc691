/**
 * The admin port against a running sidecar and a real redis-server: /healthz, /readyz (follows
 * Redis and draining), /metrics (decisions, latency, Redis errors, cache numbers).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../src/core/key-format.ts';
import type { Sidecar } from '../src/main.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { Metrics } from '../src/telemetry/metrics.ts';
import { adminGet, sample, waitFor } from './helpers/admin.ts';
import type { EnvoyClient } from './helpers/envoy-client.ts';
import type { RedisServer } from './helpers/redis-server.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { startStack, startTestSidecar, type Stack } from './helpers/sidecars.ts';

const s = schema();
let stack: Stack;
let redis: RedisServer;
let sidecar: Sidecar;
let client: EnvoyClient;
let valid: SeededKey;

beforeAll(async () => {
  stack = await startStack({ adminHost: '127.0.0.1' });
  ({ redis, sidecar, client } = stack);
  valid = await seedKey(stack.db, s, { account: 'acct-admin' });
  await waitFor('ready', async () => (await adminGet(sidecar.adminPort, '/readyz')).status === 200);
});

afterAll(async () => {
  await stack?.close();
});

describe('health endpoints', () => {
  it('/healthz says the process is up', async () => {
    const r = await adminGet(sidecar.adminPort, '/healthz');
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/json/);
    expect(JSON.parse(r.body)).toEqual({ status: 'ok' });
  });

  it('/readyz says ready with the store reachable and not draining', async () => {
    // A loaded machine can stall the heartbeat past its bound for a moment (not ready, then ready again).
    let r = await adminGet(sidecar.adminPort, '/readyz');
    await waitFor('ready', async () => (r = await adminGet(sidecar.adminPort, '/readyz')).status === 200, 10_000);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ ready: true, store: true, draining: false });
  });

  it('answers HEAD without a body, refuses other methods and unknown paths', async () => {
    const head = await adminGet(sidecar.adminPort, '/healthz', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    const post = await adminGet(sidecar.adminPort, '/readyz', { method: 'POST', body: 'x' });
    expect(post.status).toBe(405);
    const missing = await adminGet(sidecar.adminPort, '/nope');
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body).paths).toContain('/metrics');
  });
});

describe('/metrics', () => {
  it('counts decisions by result, code and family, and times them', async () => {
    const before = (await adminGet(sidecar.adminPort, '/metrics')).body;
    const count = (text: string, result: string, code: string, family: string) =>
      sample(text, 'keygate_decisions_total', { result, code, family }) ?? 0;

    await client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${valid.key}` }, contextExtensions: { protocol: 'openai' } });
    await client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${valid.key}` }, contextExtensions: { protocol: 'openai' } });
    await client.check({ path: '/v1/messages', headers: { 'x-api-key': generateKey() }, contextExtensions: { protocol: 'anthropic' } });
    await client.check({ path: '/v1beta/models/gemini-2.0-flash:generateContent', headers: {} });

    const r = await adminGet(sidecar.adminPort, '/metrics');
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(count(r.body, 'allow', 'OK', 'openai') - count(before, 'allow', 'OK', 'openai')).toBe(2);
    expect(count(r.body, 'deny', 'INVALID_API_KEY', 'anthropic') - count(before, 'deny', 'INVALID_API_KEY', 'anthropic')).toBe(1);
    expect(count(r.body, 'deny', 'API_KEY_REQUIRED', 'google') - count(before, 'deny', 'API_KEY_REQUIRED', 'google')).toBe(1);
    // Every code/family pair is present from the start, for rate() baselines.
    expect(sample(r.body, 'keygate_decisions_total', { result: 'deny', code: 'USER_BLOCKED', family: 'google' })).toBe(0);

    const hist = (text: string, result: string) => sample(text, 'keygate_decision_duration_seconds_count', { result }) ?? 0;
    expect(hist(r.body, 'allow') - hist(before, 'allow')).toBe(2);
    expect(hist(r.body, 'deny') - hist(before, 'deny')).toBe(2);
    expect(sample(r.body, 'keygate_decision_duration_seconds_bucket', { result: 'allow', le: '+Inf' })).toBe(hist(r.body, 'allow'));
    expect(sample(r.body, 'keygate_decision_duration_seconds_sum', { result: 'allow' })).toBeGreaterThan(0);
  });

  it('exposes readiness, in-flight checks, Redis and cache series, and process metrics', async () => {
    const { body } = await adminGet(sidecar.adminPort, '/metrics');
    expect(sample(body, 'keygate_ready')).toBe(1);
    expect(sample(body, 'keygate_checks_in_flight')).toBe(0);
    // Present from the start (for rate() baselines). Not pinned at 0: on a loaded machine ioredis can
    // time out a connect and count one (seen once in a full run); the failure case below pins the counting.
    expect(sample(body, 'keygate_redis_errors_total', { connection: 'commands' })).toBeTypeOf('number');
    expect(sample(body, 'keygate_redis_reconnects_total', { connection: 'commands' })).toBeTypeOf('number');
    for (const name of ['keygate_cache_hits_total', 'keygate_cache_misses_total', 'keygate_cache_invalidations_total', 'keygate_cache_entries']) {
      expect(body).toContain(`# TYPE ${name} `);
    }
    expect(sample(body, 'keygate_build_info')).toBe(1);
    expect(sample(body, 'process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('reads cache numbers from whatever store stats source is wired, summing several', async () => {
    sidecar.metrics.addStoreStats(() => ({ cacheHits: 40, cacheMisses: 2, cacheInvalidations: 3, cacheSize: 7 }));
    sidecar.metrics.addStoreStats(() => ({ cacheHits: 2 }));
    sidecar.metrics.addStoreStats(() => {
      throw new Error('a broken source is skipped');
    });
    const own = sidecar.store.stats(); // the sidecar's own cached store is wired too
    const { body } = await adminGet(sidecar.adminPort, '/metrics');
    expect(sample(body, 'keygate_cache_hits_total')).toBe(42 + own.hits);
    expect(sample(body, 'keygate_cache_misses_total')).toBe(2 + own.misses);
    expect(sample(body, 'keygate_cache_invalidations_total')).toBe(3 + own.invalidations);
    expect(sample(body, 'keygate_cache_entries')).toBe(7 + own.size);
  });
});

describe('the latency histogram', () => {
  it('puts each decision in the right cumulative buckets', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const outcome = { decision: { allow: false, code: 'USER_BLOCKED', status: 403 }, family: 'anthropic', requestId: 'r' } as const;
    const ago = (ms: number) => process.hrtime.bigint() - BigInt(Math.round(ms * 1e6));
    m.observer(outcome as never, {} as never, ago(6)); // 6 ms, plus however long this line takes (< 4 ms)
    m.observer(outcome as never, {} as never, ago(300)); // 300 ms
    const text = (await m.render()).body;
    const bucket = (le: string) => sample(text, 'keygate_decision_duration_seconds_bucket', { result: 'deny', le });
    expect(bucket('0.005')).toBe(0);
    expect(bucket('0.01')).toBe(1);
    expect(bucket('0.25')).toBe(1);
    expect(bucket('0.5')).toBe(2);
    expect(bucket('+Inf')).toBe(2);
    expect(sample(text, 'keygate_decision_duration_seconds_count', { result: 'allow' })).toBe(0);
    expect(sample(text, 'keygate_decision_duration_seconds_sum', { result: 'deny' })).toBeGreaterThan(0.306);
    expect(sample(text, 'keygate_decisions_total', { result: 'deny', code: 'USER_BLOCKED', family: 'anthropic' })).toBe(2);
  });
});

describe('readiness follows draining', () => {
  it('/readyz goes 503 the moment a shutdown starts, with Redis up (the store alone would say ready)', async () => {
    const own = await startTestSidecar(redis.url, { drainDelayMs: 3000, shutdownTimeoutMs: 6000, adminHost: '127.0.0.1' });
    try {
      const port = own.sidecar.adminPort;
      await waitFor('ready', async () => (await adminGet(port, '/readyz')).status === 200);
      expect(JSON.parse((await adminGet(port, '/readyz')).body)).toEqual({ ready: true, store: true, draining: false }); // the control
      const stopping = own.sidecar.shutdown(); // drains for 3 s before closing anything
      const r = await adminGet(port, '/readyz');
      expect(r.status).toBe(503);
      expect(JSON.parse(r.body)).toEqual({ ready: false, store: true, draining: true, reason: 'shutting down' });
      expect(own.sidecar.ready()).toBe(false);
      await stopping;
    } finally {
      await own.close();
    }
  });
});

describe('readiness follows Redis', () => {
  it('goes 503 when Redis is down (counting errors and reconnects) and back when it returns', async () => {
    await redis.stop();
    await waitFor('not ready', async () => (await adminGet(sidecar.adminPort, '/readyz')).status === 503);
    const down = await adminGet(sidecar.adminPort, '/readyz');
    // Not ready says why: the Redis it cannot reach, or (before the first connection error) that the store is not up.
    expect(JSON.parse(down.body)).toEqual({ ready: false, store: false, draining: false, reason: expect.stringMatching(/^(cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+: |the key store is not ready)/) });
    expect((await adminGet(sidecar.adminPort, '/healthz')).status).toBe(200);
    const metric = async (name: string) => sample((await adminGet(sidecar.adminPort, '/metrics')).body, name, { connection: 'commands' }) ?? 0;
    await waitFor('a counted reconnect attempt that failed', async () => (await metric('keygate_redis_errors_total')) > 0);
    expect(await metric('keygate_redis_reconnects_total')).toBeGreaterThan(0);

    // Fail closed meanwhile, and counted as such.
    const res = await client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${valid.key}` } });
    expect(res.denied_response?.status?.code).toBe(503);

    await redis.start();
    await waitFor('ready again', async () => (await adminGet(sidecar.adminPort, '/readyz')).status === 200);
    const { body } = await adminGet(sidecar.adminPort, '/metrics');
    expect(sample(body, 'keygate_ready')).toBe(1);
    expect(sample(body, 'keygate_decisions_total', { result: 'deny', code: 'AUTH_UNAVAILABLE', family: 'openai' })).toBeGreaterThanOrEqual(1);
  });
});
