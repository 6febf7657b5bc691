/**
 * Events on Redis Cluster: the usage and credit scripts write their events and alert flags in the
 * account's slot (no CROSSSLOT), and the delivery worker's lease and cursor scripts run there too.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { CLI_ACTOR } from '../src/console/management.ts';
import { ConsoleService } from '../src/console/service.ts';
import { WebhookStore } from '../src/events/webhooks.ts';
import { DeliveryWorker } from '../src/events/worker.ts';
import { eventsSchema } from '../src/schema/events.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { startReceiver, type Receiver } from './helpers/webhook-receiver.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
let cluster: ClusterDeployment;
let mc: ConsoleService;
let r: Receiver;
let w: DeliveryWorker | undefined;

beforeAll(async () => {
  cluster = await startCluster();
  mc = new KeyConsole({ redis: cluster.url, revealKey: REVEAL });
  r = await startReceiver();
}, 60_000);

afterAll(async () => {
  await w?.stop(1000);
  await r?.close();
  await mc?.close();
  await cluster?.destroy();
});

it('wallet and threshold events at their crossing, delivered in order from a Cluster', async () => {
  const a = `c-${randomBytes(4).toString('hex')}`;
  const store = new WebhookStore(mc.redis, 'kg', REVEAL);
  await mc.createWebhook({ url: r.url, account: a, events: ['wallet.credited', 'wallet.low', 'wallet.empty', 'key.limit.threshold'] }, CLI_ACTOR, { allowPrivate: true });
  await mc.creditAccount(a, 1000, 'c1', CLI_ACTOR);
  await mc.setWalletLow(a, 500, CLI_ACTOR);
  // on a Cluster the audit lists are in another slot: the entry follows the change
  expect((await mc.listAudit({ account: a })).map((e) => e.action)).toEqual(['alert', 'credit', 'webhook_create']);
  const k = await mc.createKey({ account: a, name: 'k', models: null, expiresAt: null, limit: { amountMicros: 1000, period: 'week' } }, CLI_ACTOR);
  await mc.recordUsage({ keyId: k.id, amountMicros: 500, requestId: 'u1' }); // balance 500: not below; spend 50 %
  await mc.recordUsage({ keyId: k.id, amountMicros: 500, requestId: 'u2' }); // balance 0: low and empty; spend 100 % (80 and 100)
  w = new DeliveryWorker({ redis: mc.redis, namespace: 'kg', webhooks: store, config: { retryScheduleSeconds: [0.2], allowPrivate: true, disableAfterMs: 86_400_000, timeoutMs: 5000, concurrency: 4 }, log: createLogger('silent'), pollMs: 100 });
  w.start();
  const end = Date.now() + 15_000;
  while (r.received.length < 6 && Date.now() < end) await new Promise((x) => setTimeout(x, 50));
  expect(r.received.map((x) => `${x.event.type}${x.event.data.threshold ?? ''}`)).toEqual(['wallet.credited', 'key.limit.threshold50', 'wallet.low', 'wallet.empty', 'key.limit.threshold80', 'key.limit.threshold100']);
}, 60_000);

it('filling the expiries of keys made before events walks every master of the Cluster', async () => {
  const s = eventsSchema('kg');
  const accounts = Array.from({ length: 6 }, () => `f-${randomBytes(4).toString('hex')}`); // spread over the slots
  const members: string[] = [];
  for (const a of accounts) {
    const k = await mc.createKey({ account: a, name: 'k', models: null, expiresAt: Date.now() + 86_400_000, limit: null }, CLI_ACTOR);
    members.push(`${a} ${k.id}`);
  }
  await mc.redis.zrem(s.expiries(), ...members);
  await mc.redis.del(s.expiriesFilled());
  const store = new WebhookStore(mc.redis, 'kg', REVEAL);
  const filler = new DeliveryWorker({ redis: mc.redis, namespace: 'kg', webhooks: store, config: { retryScheduleSeconds: [0.2], allowPrivate: true, disableAfterMs: 86_400_000, timeoutMs: 5000, concurrency: 4 }, log: createLogger('silent') });
  expect(await filler.fillExpiries()).toBeGreaterThanOrEqual(members.length);
  for (const m of members) expect(await mc.redis.zscore(s.expiries(), m), m).not.toBeNull();
  expect(await mc.redis.get(s.expiriesFilled())).not.toBeNull();
  expect(await filler.fillExpiries()).toBe(0); // once
}, 60_000);
