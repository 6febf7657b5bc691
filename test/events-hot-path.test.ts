/**
 * Events stay off the gateway's hot path: with an account that has a webhook endpoint, a wallet-low
 * threshold, key thresholds and undelivered events, the sidecar's Checks (first and cached, allowed
 * and refused) send Redis no command on any events or webhook record — every Redis command in the
 * window is watched with MONITOR on a real redis-server.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { KeyConsole } from '../src/console/service.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { chatRequest, outcomeOf, startTestSidecar, waitTracking, type TestSidecar } from './helpers/sidecars.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
let redis: RedisServer | undefined;
let kc: KeyConsole | undefined;
let sc: TestSidecar | undefined;
let mon: Redis | undefined;

beforeAll(async () => {
  redis = await startRedis();
  kc = new KeyConsole({ redis: redis.url, revealKey: REVEAL });
  sc = await startTestSidecar(redis.url);
  await waitTracking(sc);
}, 60_000);

afterAll(async () => {
  mon?.disconnect();
  await sc?.close();
  await kc?.close();
  if (redis) await destroyRedis(redis);
});

it('a Check touches no events or webhook record, whatever the account has set up', async () => {
  const a = `hot-${randomBytes(4).toString('hex')}`;
  const rule = { allowPrivate: false, resolve: async () => [{ address: '93.184.216.34', family: 4 as const }] }; // hooks.example.com, public (no DNS here)
  await kc!.createWebhook({ url: 'https://hooks.example.com/k', account: a }, undefined, rule);
  await kc!.createWebhook({ url: 'https://hooks.example.com/all', account: null }, undefined, rule);
  await kc!.creditAccount(a, 20_000_000, 'c1', CLI_ACTOR); // wallet.credited, undelivered
  await kc!.setWalletLow(a, 10_000_000);
  const k = await kc!.createKey({ account: a, name: 'at limit', models: null, expiresAt: null, limit: { amountMicros: 1000, period: 'day' } }, CLI_ACTOR);
  const k2 = await kc!.createKey({ account: a, name: 'open', models: ['openai/*'], expiresAt: null, limit: null }, CLI_ACTOR);
  await kc!.recordUsage({ keyId: k.id, amountMicros: 1000, requestId: 'r1' }); // key.limit.threshold 50, 80, 100
  expect(await kc!.redis.xlen(kc!.events.s.stream(a))).toBeGreaterThan(3);

  // Every command Redis runs from here on (Lua scripts' own calls included) — only the sidecar runs any.
  const seen: string[] = [];
  mon = await redis!.client().monitor();
  mon.on('monitor', (_t: string, args: string[]) => seen.push(args.join(' ')));
  await new Promise((r) => setTimeout(r, 100));
  const outcomes = new Set<string>();
  for (let i = 0; i < 50; i++) outcomes.add(outcomeOf(await sc!.client.check(chatRequest(k2.key, 'openai/gpt-4o'))));
  for (let i = 0; i < 10; i++) outcomes.add(outcomeOf(await sc!.client.check(chatRequest(k2.key, 'anthropic/claude-x'))));
  for (let i = 0; i < 10; i++) outcomes.add(outcomeOf(await sc!.client.check(chatRequest(k.key, 'openai/gpt-4o'))));
  await new Promise((r) => setTimeout(r, 1500)); // the sidecar's usage-tracking flush too
  mon.disconnect();
  mon = undefined;
  expect([...outcomes].sort()).toEqual(['KEY_LIMIT_EXCEEDED', 'MODEL_NOT_ALLOWED', 'allow']);
  expect(seen.length).toBeGreaterThan(0); // the Checks' reads and the tracking flush were seen
  const offending = seen.filter((c) => /:v1:(events|alerts|whstate|whlease):|\{wh\}/.test(c));
  expect(offending, offending.join('\n')).toEqual([]);
}, 60_000);
