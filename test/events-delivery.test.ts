/**
 * The delivery worker's guarantees on a real Redis with a real receiver: at least once across a
 * console stopped in the middle of a delivery, no two consoles delivering the same event at the same
 * time, an endpoint that keeps failing disabled with a webhook.disabled event, and the CLI commands.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { CLI_ACTOR } from '../src/console/management.ts';
import { ConsoleService } from '../src/console/service.ts';
import type { WebhookConfig } from '../src/events/config.ts';
import { eventsSchema } from '../src/schema/events.ts';
import { wakeAccounts } from '../src/events/publish.ts';
import { WebhookStore } from '../src/events/webhooks.ts';
import { DeliveryWorker } from '../src/events/worker.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startReceiver, type Receiver } from './helpers/webhook-receiver.ts';
import { until } from './helpers/until.ts';

const run = promisify(execFile);
const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
let redis: RedisServer;
let mc: ConsoleService;
let store: WebhookStore;
const receivers: Receiver[] = [];
const workers: DeliveryWorker[] = [];
const log = createLogger('silent');
const config = (o: Partial<WebhookConfig> = {}): WebhookConfig => ({ retryScheduleSeconds: [0.2, 0.2], allowPrivate: true, disableAfterMs: 86_400_000, timeoutMs: 5000, concurrency: 4, ...o });

beforeAll(async () => {
  redis = await startRedis();
  mc = new KeyConsole({ redis: redis.url, revealKey: REVEAL });
  store = new WebhookStore(mc.redis, 'kg', REVEAL);
}, 30_000);

afterAll(async () => {
  for (const w of workers) await w.stop(1000);
  for (const r of receivers) await r.close();
  await mc?.close();
  await redis?.stop();
});

function worker(c: WebhookConfig, leaseMs = 600): DeliveryWorker {
  const w = new DeliveryWorker({ redis: mc.redis, namespace: 'kg', webhooks: store, config: c, log, pollMs: 100, leaseMs });
  workers.push(w);
  w.start();
  return w;
}

const acct = () => `d-${randomBytes(4).toString('hex')}`;

describe('delivery worker', () => {
  it('at least once across a console stopped mid-delivery: the next console delivers the same event, and the order holds', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const a = acct();
    await mc.createWebhook({ url: r.url, account: a, events: ['wallet.credited'] }, undefined, { allowPrivate: true });
    r.respond = (_x, n) => (n === 1 ? 'hang' : 200);
    await mc.creditAccount(a, 1, 'one', CLI_ACTOR);
    await mc.creditAccount(a, 2, 'two', CLI_ACTOR);
    const first = worker(config());
    await until('the first attempt', () => r.received.length === 1);
    await first.stop(50); // the console goes away while the receiver has not answered
    const second = worker(config());
    await until('both delivered', () => r.received.some((x) => x.event.data.reference === 'two'));
    const refs = r.received.map((x) => x.event.data.reference);
    expect(refs).toEqual(['one', 'one', 'two']);
    expect(r.received[0]!.event.id).toBe(r.received[1]!.event.id);
    await second.stop(1000);
  }, 30_000);

  it('two consoles never deliver the same event at the same time, and every event arrives once when all answer', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const a = acct();
    await mc.createWebhook({ url: r.url, account: a, events: ['wallet.credited'] }, undefined, { allowPrivate: true });
    for (let i = 1; i <= 8; i++) await mc.creditAccount(a, i, `c${i}`, CLI_ACTOR);
    const w1 = worker(config(), 5000);
    const w2 = worker(config(), 5000);
    await until(() => `eight events (got ${r.received.map((x) => x.event.data.reference).join(',')})`, () => r.received.length >= 8);
    await new Promise((x) => setTimeout(x, 400));
    expect(r.received.map((x) => x.event.data.reference)).toEqual(['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8']);
    expect(r.maxSameIdInFlight).toBe(1);
    await w1.stop(1000);
    await w2.stop(1000);
  }, 30_000);

  it('an event written in the millisecond the endpoint was created, after it, is delivered (the cursor starts before that millisecond)', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const a = acct();
    const { endpoint } = await mc.createWebhook({ url: r.url, account: a, events: ['wallet.credited'] }, undefined, { allowPrivate: true });
    // What a credit right after `create` gets when the server clock has not ticked yet: the stream id
    // <creation ms>-0 (written here with that id, so the case does not depend on timing).
    const s = eventsSchema('kg');
    await mc.redis.sadd(s.accounts(), a);
    await mc.redis.xadd(s.stream(a), `${endpoint.createdAt}-0`, 'type', 'wallet.credited', 'account', a, 'data', JSON.stringify({ reference: 'same-ms' }));
    await wakeAccounts(mc.redis, 'kg', [a]);
    await mc.creditAccount(a, 1, 'later', CLI_ACTOR);
    const w = worker(config());
    await until('both events', () => r.received.length >= 2);
    await new Promise((x) => setTimeout(x, 300));
    expect(r.received.map((x) => x.event.data.reference)).toEqual(['same-ms', 'later']);
    await w.stop(1000);
  }, 30_000);

  it('an endpoint failing without a success for the stated time is disabled, with a webhook.disabled event to the others', async () => {
    const bad = await startReceiver();
    const watch = await startReceiver();
    receivers.push(bad, watch);
    bad.respond = () => 500;
    const a = acct();
    // A receiver URL may carry a token in its path (as Slack's and Discord's do) or its query string:
    // the event tells the endpoint by its id and origin only.
    const badUrl = `${bad.url}${bad.url.endsWith('/') ? '' : '/'}hook/s3cret-path-token?token=s3cret-query-token&x=1`;
    const { endpoint } = await mc.createWebhook({ url: badUrl, account: a, events: ['wallet.credited'] }, undefined, { allowPrivate: true });
    await mc.createWebhook({ url: watch.url, account: a, events: ['webhook.disabled'] }, undefined, { allowPrivate: true });
    await mc.creditAccount(a, 1, 'x', CLI_ACTOR);
    const w = worker(config({ retryScheduleSeconds: [0.3, 0.3, 0.3, 0.3, 0.3, 0.3], disableAfterMs: 700 }));
    const ev = await until('webhook.disabled', () => watch.received.find((x) => x.event.type === 'webhook.disabled'));
    const u = new URL(badUrl);
    expect(ev.event.data).toMatchObject({ webhook_id: endpoint.id, url: u.origin });
    expect(ev.body).not.toContain('s3cret');
    expect(bad.received.length).toBeGreaterThan(0); // the endpoint was called at its full URL meanwhile
    expect(ev.event.account).toBe(a);
    expect((await mc.getWebhook(endpoint.id)).status).toBe('disabled');
    const n = bad.received.length;
    await new Promise((x) => setTimeout(x, 800));
    expect(bad.received.length).toBe(n); // no attempts once disabled
    await w.stop(1000);
  }, 30_000);

  it('keys made before key.expired existed are told too: a worker fills the expiries set once at start, future expiries only', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const a = acct();
    await mc.createWebhook({ url: r.url, account: a, events: ['key.expired'] }, undefined, { allowPrivate: true });
    // `soon` must still be ahead when the fill reads the clock, however slow a loaded machine makes the steps before it.
    const soon = await mc.createKey({ account: a, name: 'soon', expiresAt: Date.now() + 4000 }, CLI_ACTOR);
    const later = await mc.createKey({ account: a, name: 'later', expiresAt: Date.now() + 86_400_000 }, CLI_ACTOR);
    const never = await mc.createKey({ account: a, name: 'never' }, CLI_ACTOR);
    const gone = await mc.createKey({ account: a, name: 'revoked', expiresAt: Date.now() + 86_400_000 }, CLI_ACTOR);
    await mc.revokeKey(gone.id, CLI_ACTOR);
    const past = await mc.createKey({ account: a, name: 'past', expiresAt: Date.now() + 300 }, CLI_ACTOR);
    // As a store written before events existed: no entry in the expiries set, never filled.
    const s = eventsSchema('kg');
    const member = (id: string) => `${a} ${id}`;
    await mc.redis.zrem(s.expiries(), ...[soon, later, never, gone, past].map((k) => member(k.id)));
    await mc.redis.del(s.expiriesFilled());
    await new Promise((x) => setTimeout(x, 500)); // `past` expired before the upgrade
    const w = worker(config());
    await until('filled', async () => (await mc.redis.get(s.expiriesFilled())) !== null, 10_000);
    expect(await mc.redis.zscore(s.expiries(), member(later.id))).not.toBeNull();
    expect(await mc.redis.zscore(s.expiries(), member(never.id))).toBeNull();
    expect(await mc.redis.zscore(s.expiries(), member(gone.id))).toBeNull();
    expect(await mc.redis.zscore(s.expiries(), member(past.id))).toBeNull();
    const ev = await until('key.expired of the key made before', () => r.received.find((x) => x.event.type === 'key.expired'), 10_000);
    expect(ev.event.data.key_id).toBe(soon.id);
    expect(ev.at - Date.parse(ev.event.data.expires_at)).toBeLessThan(5000);
    await new Promise((x) => setTimeout(x, 1000));
    expect(r.received.map((x) => x.event.data.key_id)).toEqual([soon.id]); // not the one that expired before the upgrade
    // Once: a console started later does not walk the keys again.
    await mc.redis.zrem(s.expiries(), member(later.id));
    const w2 = worker(config());
    expect(await w2.fillExpiries()).toBe(0);
    expect(await mc.redis.zscore(s.expiries(), member(later.id))).toBeNull();
    await w.stop(1000);
    await w2.stop(1000);
  }, 30_000);

  it('a receiver that answers 3xx is a failure (no redirect followed); the body is not read beyond the bound', async () => {
    const r = await startReceiver();
    const target = await startReceiver();
    receivers.push(r, target);
    r.respond = () => 302;
    const a = acct();
    const { endpoint } = await mc.createWebhook({ url: r.url, account: a, events: ['wallet.credited'] }, undefined, { allowPrivate: true });
    await mc.creditAccount(a, 1, 'r', CLI_ACTOR);
    const w = worker(config({ retryScheduleSeconds: [0.1] }));
    await until('dead letter', async () => (await store.listDead(endpoint.id)).length === 1);
    expect((await store.listDead(endpoint.id))[0]!.lastError).toBe('HTTP 302');
    expect(target.received).toHaveLength(0);
    await w.stop(1000);
  }, 30_000);
});

describe('CLI', () => {
  const cli = (args: string[], env: Record<string, string> = {}) =>
    run('bin/keygate', args, { env: { ...process.env, REDIS_URL: redis.url, KEYGATE_REVEAL_KEY: REVEAL, ...env } }).then(
      (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
    );

  it('webhooks create/list/remove, accounts alert, keys update --alert-at', async () => {
    const a = acct();
    const refused = await cli(['webhooks', 'create', '--url', 'http://127.0.0.1:9/x', '--account', a]);
    expect(refused.code).not.toBe(0);
    expect(refused.err).toMatch(/loopback, private/);
    // a public literal: a name is resolved at creation (test/webhook-destinations.test.ts), and this machine may have no DNS
    const c = await cli(['webhooks', 'create', '--url', 'https://93.184.216.34/k', '--account', a, '--events', 'wallet.low,wallet.empty', '--json']);
    expect(c.code).toBe(0);
    const made = JSON.parse(c.out);
    expect(made).toMatchObject({ url: 'https://93.184.216.34/k', account: a, events: ['wallet.low', 'wallet.empty'] });
    expect(made.secret).toMatch(/^whsec_/);
    const l = JSON.parse((await cli(['webhooks', 'list', '--json'])).out);
    expect(l.webhooks.find((w: { id: string }) => w.id === made.id)).toBeTruthy();
    expect(JSON.stringify(l)).not.toContain('whsec_');
    expect((await cli(['accounts', 'alert', a, '--wallet-low', '10.00'])).out).toMatch(/below 10/);
    expect(await mc.events.alerts(a)).toEqual({ walletLowMicros: 10_000_000 });
    const k = await mc.createKey({ account: a, name: 'k', models: null, expiresAt: null, limit: null }, CLI_ACTOR);
    expect((await cli(['keys', 'update', k.id, '--alert-at', '90,50'])).code).toBe(0);
    expect(await mc.events.keyThresholds(a, k.id)).toEqual([50, 90]);
    expect((await cli(['webhooks', 'remove', made.id])).out).toMatch(/Removed/);
    await expect(mc.getWebhook(made.id)).rejects.toThrow(/no webhook/);
    expect((await mc.listAudit({ account: a })).map((e) => e.action)).toEqual(expect.arrayContaining(['webhook_create', 'webhook_remove', 'alert']));
  }, 150_000);

  it('webhooks dead lists a dead letter and webhooks replay delivers it once more (audited)', async () => {
    const a = acct();
    const r = await startReceiver();
    receivers.push(r);
    let fail = true;
    r.respond = () => (fail ? 500 : 200);
    const made = JSON.parse((await cli(['webhooks', 'create', '--url', r.url, '--account', a, '--events', 'account.disabled', '--json'], { KEYGATE_WEBHOOK_ALLOW_PRIVATE: 'true' })).out);
    worker(config());
    await mc.setAccountStatus(a, 'disabled', CLI_ACTOR);
    await until('three attempts', () => r.received.length >= 3, 20_000);
    let dead: { event: { id: string; type: string }; attempts: number; last_error: string }[] = [];
    await until('the dead letter', async () => (dead = JSON.parse((await cli(['webhooks', 'dead', made.id, '--json'])).out).dead).length === 1, 20_000);
    expect(dead[0]).toMatchObject({ attempts: 3, last_error: 'HTTP 500', event: { type: 'account.disabled' } });
    const text = await cli(['webhooks', 'dead', made.id]);
    expect(text.out).toContain(dead[0]!.event.id);
    expect(text.out).toMatch(/HTTP 500/);
    expect((await mc.getWebhook(made.id)).failingSince).not.toBeNull();
    fail = false;
    const rep = await cli(['webhooks', 'replay', made.id, dead[0]!.event.id]);
    expect(rep.code).toBe(0);
    expect(rep.out).toMatch(/Queued/);
    await until('the replay delivered', () => r.received.filter((x) => x.event.id === dead[0]!.event.id).length === 4, 20_000);
    expect((await cli(['webhooks', 'dead', made.id])).out).toMatch(/No dead letters/);
    // The replay's success is the endpoint's success: no longer failing, so not disabled later.
    await until('failing_since cleared', async () => (await mc.getWebhook(made.id)).failingSince === null, 10_000);
    const again = await cli(['webhooks', 'replay', made.id, dead[0]!.event.id]);
    expect(again.code).not.toBe(0);
    expect(again.err).toMatch(/no dead letter/);
    expect((await mc.listAudit({ account: a })).map((e) => e.action)).toEqual(expect.arrayContaining(['webhook_create', 'webhook_replay']));
  }, 150_000);
});
