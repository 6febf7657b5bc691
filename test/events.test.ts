/**
 * Events and webhooks end to end: a real console (its delivery worker) on a real Redis, delivering to
 * a real HTTP receiver on loopback (KEYGATE_WEBHOOK_ALLOW_PRIVATE=true for it). Every event type, the
 * signature checked by the docs' own Node and Python snippets, retries across a receiver that fails
 * then recovers, per-account order, dead letters and replay, the management routes and GET /v1/key.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { keyDigest } from '../src/core/key-format.ts';
import { KeyConsole } from '../src/console/index.ts';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { callApi, startTestConsole } from './helpers/console-api.ts';
import { startRedis, type RedisServer } from './helpers/redis-server.ts';
import { EVENTS_DOC as DOCS, startReceiver, verifyDocs, type Receiver, type Received } from './helpers/webhook-receiver.ts';
import { until } from './helpers/until.ts';

const pySnippet = /```python\n([\s\S]*?)```/.exec(DOCS)![1]!;

let redis: RedisServer;
let srv: ConsoleServer;
let base: string;
let admin: string;
let owner: string;
const OWNED = `own-${randomBytes(3).toString('hex')}`;
const receivers: Receiver[] = [];
const saved = { ...process.env };

beforeAll(async () => {
  process.env.KEYGATE_WEBHOOK_ALLOW_PRIVATE = 'true';
  process.env.KEYGATE_WEBHOOK_RETRY_SCHEDULE = '0.2,0.2,0.2';
  redis = await startRedis();
  ({ srv, base, admin, owner } = await startTestConsole(redis.url, OWNED));
}, 60_000);

afterAll(async () => {
  process.env = saved;
  await srv?.close();
  for (const r of receivers) await r.close();
  await redis?.stop();
});

const mc = () => srv.console;
const acct = () => `ev-${randomBytes(4).toString('hex')}`;

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

async function hook(account: string | null, r: Receiver, events?: string[]): Promise<{ id: string; secret: string }> {
  const res = await callApi(base, 'POST', '/v1/webhooks', { token: admin, body: { url: r.url, account, ...(events ? { events } : {}) } });
  expect(res.status).toBe(201);
  return res.body;
}

const types = (r: Receiver) => r.received.map((x) => x.event.type);
const ok = (r: Receiver) => r.received.filter((x, i, all) => all.findIndex((y) => y.event.id === x.event.id) === i);

describe('changes made through the library', () => {
  it('tell the same key and account events as the CLI and the API (no actor: no audit entry, events all the same)', async () => {
    const a = acct();
    const r = await receiver();
    await hook(a, r);
    const lib = new KeyConsole({ redis: redis.url, revealKey: `k1:${randomBytes(32).toString('base64')}` });
    try {
      const k1 = await lib.createKey({ account: a, name: 'lib1', models: null, expiresAt: Date.now() + 1500, limit: null });
      const k2 = await lib.createKey({ account: a, name: 'lib2', models: null, expiresAt: null, limit: null });
      await lib.rollKey(k2.id, 0);
      await lib.setAccountStatus(a, 'disabled');
      await lib.setAccountStatus(a, 'active');
      await lib.revokeKey(k1.id);
      const want = ['key.created', 'key.created', 'key.rolled', 'account.disabled', 'account.enabled', 'key.revoked'];
      await until('the events of the library', () => ok(r).length >= want.length);
      expect(ok(r).map((x) => x.event.type).slice(0, want.length)).toEqual(want);
      expect(ok(r)[0]!.event.data).toMatchObject({ key_id: k1.id, name: 'lib1' });
      // No actor, no audit entry: the audit log is the record of who did what through the CLI and API.
      expect((await mc().listAudit({ account: a })).map((e) => e.action)).toEqual(['webhook_create']); // the endpoint, made through the API
    } finally {
      await lib.close();
    }
  });
});

describe('every event type, signed', () => {
  it('key, account and wallet events reach the account endpoint, in order, each verified by the docs snippets', async () => {
    const a = acct();
    const r = await receiver();
    const { secret } = await hook(a, r);
    const m = mc();
    await m.creditAccount(a, 20_000_000, 'c1', CLI_ACTOR);
    await m.setWalletLow(a, 10_000_000);
    const created = await m.createKey({ account: a, name: 'k1', models: null, expiresAt: Date.now() + 2500, limit: { amountMicros: 1000, period: 'month' } }, CLI_ACTOR);
    await m.recordUsage({ keyId: created.id, amountMicros: 500, requestId: 'r1' });
    await m.recordUsage({ keyId: created.id, amountMicros: 10_000_000, requestId: 'r2' });
    await m.recordUsage({ keyId: created.id, amountMicros: 9_999_500, requestId: 'r3' });
    await m.setAccountStatus(a, 'disabled', CLI_ACTOR);
    await m.setAccountStatus(a, 'active', CLI_ACTOR);
    const k2 = await m.createKey({ account: a, name: 'k2', models: ['openai/*'], expiresAt: null, limit: null }, CLI_ACTOR);
    await m.rollKey(k2.id, 0, CLI_ACTOR);
    await m.revokeKey(created.id === k2.id ? k2.id : (await m.createKey({ account: a, name: 'k3', models: null, expiresAt: null, limit: null }, CLI_ACTOR)).id, CLI_ACTOR);
    const want = [
      'wallet.credited',
      'key.created',
      'key.limit.threshold', // 50 % (r1)
      'wallet.low', // r2: the wallet first, then the key's thresholds, in the one script
      'key.limit.threshold', // 80 %
      'key.limit.threshold', // 100 %
      'wallet.empty',
      'account.disabled',
      'account.enabled',
      'key.created',
      'key.rolled',
      'key.created',
      'key.revoked',
    ];
    await until('the events', () => ok(r).length >= want.length);
    expect(ok(r).map((x) => x.event.type)).toEqual(want);
    // key.expired: the first key expires 2.5 s after creation, unused since; told within 5 s of the instant.
    const exp = await until('key.expired', () => r.received.find((x) => x.event.type === 'key.expired'), 10_000);
    expect(exp.event.data.key_id).toBe(created.id);
    expect(exp.at - Date.parse(exp.event.data.expires_at)).toBeLessThan(5000);

    const th = ok(r).filter((x) => x.event.type === 'key.limit.threshold').map((x) => x.event.data);
    expect(th.map((d) => d.threshold)).toEqual([50, 80, 100]);
    expect(th[0]).toMatchObject({ key_id: created.id, period: 'month', spend_micros: 500, limit_micros: 1000 });
    expect(ok(r).find((x) => x.event.type === 'wallet.credited')!.event.data).toEqual({ amount_micros: 20_000_000, reference: 'c1', balance_micros: 20_000_000 });

    const dir = mkdtempSync(join(tmpdir(), 'kg-sig-'));
    writeFileSync(join(dir, 'v.py'), `${pySnippet}\nimport json, sys\nd = json.load(sys.stdin)\nprint(json.dumps([verify_keygate_signature(d['secret'], x['body'].encode(), x['sig']) for x in d['items']]))\n`);
    const items = r.received.map((x) => ({ body: x.body, sig: String(x.headers['keygate-signature']) }));
    for (const x of r.received) {
      expect(verifyDocs(secret, x.body, String(x.headers['keygate-signature']))).toBe(true);
      expect(verifyDocs(`${secret}x`, x.body, String(x.headers['keygate-signature']))).toBe(false);
      expect(verifyDocs(secret, `${x.body} `, String(x.headers['keygate-signature']))).toBe(false);
      const t = Number(/t=(\d+)/.exec(String(x.headers['keygate-signature']))![1]);
      expect(verifyDocs(secret, x.body, String(x.headers['keygate-signature']), t + 301)).toBe(false);
      expect(x.headers['keygate-event-id']).toBe(x.event.id);
      expect(x.body).not.toMatch(/kg_[0-9A-Za-z]{20,}|whsec_|kgmt_/); // never key material, secrets or tokens
    }
    const py = JSON.parse(execFileSync('python3', [join(dir, 'v.py')], { input: JSON.stringify({ secret, items }) }).toString()) as boolean[];
    expect(py.every(Boolean)).toBe(true);
    expect(py.length).toBe(r.received.length);
  }, 40_000);
});

describe('thresholds at their exact crossing (in the usage script)', () => {
  const stream = async (a: string) => (await mc().redis.xrange(mc().events.s.stream(a), '-', '+')).map(([, f]) => ({ type: f[1]!, data: JSON.parse(f[5]!) }));

  it('wallet.low fires at the first micro-unit below, once, and again after a credit takes the balance back above it (not at it); wallet.empty at 0', async () => {
    const a = acct();
    const m = mc();
    await m.creditAccount(a, 10_000_002, 'c1', CLI_ACTOR);
    await m.setWalletLow(a, 10_000_000);
    const k = await m.createKey({ account: a, name: 'k', models: null, expiresAt: null, limit: null }, CLI_ACTOR);
    const lows = async () => (await stream(a)).filter((e) => e.type === 'wallet.low');
    await m.recordUsage({ keyId: k.id, amountMicros: 2, requestId: 'a' }); // 10.000000: not below
    expect(await lows()).toHaveLength(0);
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'b' }); // 9.999999
    expect((await lows()).map((e) => e.data)).toEqual([{ balance_micros: 9_999_999, threshold_micros: 10_000_000 }]);
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'c' });
    expect(await lows()).toHaveLength(1); // once per crossing
    await m.creditAccount(a, 1, 'c2', CLI_ACTOR); // 9.999998 + 1: still below, not re-armed
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'd' });
    expect(await lows()).toHaveLength(1);
    await m.creditAccount(a, 2, 'c3', CLI_ACTOR); // 9.999998 + 2 = exactly 10.000000: not above, not re-armed
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'e' }); // 9.999999
    expect(await lows()).toHaveLength(1);
    await m.creditAccount(a, 2, 'c4', CLI_ACTOR); // 10.000001: back above the threshold, re-armed
    await m.recordUsage({ keyId: k.id, amountMicros: 2, requestId: 'e2' }); // 9.999999
    expect(await lows()).toHaveLength(2);
    const empties = async () => (await stream(a)).filter((e) => e.type === 'wallet.empty');
    await m.recordUsage({ keyId: k.id, amountMicros: 9_999_998, requestId: 'f' }); // 1 micro left
    expect(await empties()).toHaveLength(0);
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'g' }); // exactly 0
    expect((await empties()).map((e) => e.data)).toEqual([{ balance_micros: 0 }]);
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'h' });
    expect(await empties()).toHaveLength(1);
    // A repeated request id books nothing and tells nothing.
    const before = (await stream(a)).length;
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'h' });
    expect((await stream(a)).length).toBe(before);
  });

  it('key.limit.threshold at ceil(limit × t / 100), once per period and threshold, custom thresholds', async () => {
    const a = acct();
    const m = mc();
    const k = await m.createKey({ account: a, name: 'k', models: null, expiresAt: null, limit: { amountMicros: 1001, period: 'day' } }, CLI_ACTOR);
    const patched = await callApi(base, 'PATCH', `/v1/keys/${k.id}`, { token: admin, body: { alert_thresholds: [80, 25] } });
    expect(patched.status).toBe(200);
    expect(await m.events.keyThresholds(a, k.id)).toEqual([25, 80]);
    expect((await callApi(base, 'PATCH', `/v1/keys/${k.id}`, { token: admin, body: { alert_thresholds: [0] } })).status).toBe(400);
    const th = async () => (await stream(a)).filter((e) => e.type === 'key.limit.threshold').map((e) => e.data.threshold);
    await m.recordUsage({ keyId: k.id, amountMicros: 250, requestId: 'a' }); // ceil(1001 × 25 / 100) = 251
    expect(await th()).toEqual([]);
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'b' });
    expect(await th()).toEqual([25]);
    await m.recordUsage({ keyId: k.id, amountMicros: 549, requestId: 'c' }); // 800 < 801
    expect(await th()).toEqual([25]);
    await m.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'd' }); // 801
    expect(await th()).toEqual([25, 80]);
    await m.recordUsage({ keyId: k.id, amountMicros: 500, requestId: 'e' });
    expect(await th()).toEqual([25, 80]);
    const data = (await stream(a)).filter((e) => e.type === 'key.limit.threshold')[1]!.data;
    expect(data).toEqual({ key_id: k.id, threshold: 80, period: 'day', spend_micros: 801, limit_micros: 1001 });
  });
});

describe('delivery', () => {
  it('retries a receiver that fails then recovers; a failing event holds back the later ones', async () => {
    const a = acct();
    const r = await receiver();
    r.respond = (_x, n) => (n <= 2 ? 503 : 200);
    await hook(a, r, ['account.disabled', 'account.enabled']);
    await mc().setAccountStatus(a, 'disabled', CLI_ACTOR);
    await mc().setAccountStatus(a, 'active', CLI_ACTOR);
    await until('both delivered', () => r.received.filter((x) => x.event.type === 'account.enabled').length >= 1);
    expect(types(r)).toEqual(['account.disabled', 'account.disabled', 'account.disabled', 'account.enabled']);
    expect(new Set(r.received.slice(0, 3).map((x) => x.event.id)).size).toBe(1); // the same event, again
  }, 30_000);

  it('dead-letters after the schedule, moves on, and replays a dead letter', async () => {
    const a = acct();
    const r = await receiver();
    let fail = true;
    r.respond = () => (fail ? 500 : 200);
    const w = await hook(a, r, ['account.disabled', 'account.enabled']);
    await mc().setAccountStatus(a, 'disabled', CLI_ACTOR);
    await until('four attempts', () => r.received.length >= 4, 20_000);
    let res = await callApi(base, 'GET', `/v1/webhooks/${w.id}/dead`, { token: admin });
    for (let i = 0; i < 40 && res.body.dead.length === 0; i++) {
      await new Promise((x) => setTimeout(x, 100));
      res = await callApi(base, 'GET', `/v1/webhooks/${w.id}/dead`, { token: admin });
    }
    expect(res.status).toBe(200);
    expect(res.body.dead).toHaveLength(1);
    expect(res.body.dead[0]).toMatchObject({ attempts: 4, last_error: 'HTTP 500', event: { type: 'account.disabled', account: a } });
    const deadId = res.body.dead[0].event.id as string;
    fail = false;
    await mc().setAccountStatus(a, 'active', CLI_ACTOR); // the next event goes
    await until('the next event', () => r.received.some((x) => x.event.type === 'account.enabled'));
    const rep = await callApi(base, 'POST', `/v1/webhooks/${w.id}/dead/${deadId}/replay`, { token: admin });
    expect(rep.status).toBe(202);
    await until('the replay', () => r.received.filter((x) => x.event.id === deadId).length === 5);
    expect((await callApi(base, 'GET', `/v1/webhooks/${w.id}/dead`, { token: admin })).body.dead).toHaveLength(0);
    expect((await callApi(base, 'POST', `/v1/webhooks/${w.id}/dead/${deadId}/replay`, { token: admin })).status).toBe(404);
    const audit = await mc().listAudit({ account: a });
    expect(audit.map((e) => e.action)).toEqual(expect.arrayContaining(['webhook_create', 'webhook_replay']));
  }, 40_000);

  it('an all-accounts endpoint gets every account\'s events, per account in order', async () => {
    const r = await receiver();
    await hook(null, r, ['wallet.credited']);
    const [a, b] = [acct(), acct()];
    for (let i = 1; i <= 3; i++) {
      await mc().creditAccount(a, i, `a${i}`, CLI_ACTOR);
      await mc().creditAccount(b, i, `b${i}`, CLI_ACTOR);
    }
    await until('six credits', () => ok(r).filter((x) => x.event.account === a || x.event.account === b).length >= 6);
    for (const x of [a, b]) expect(ok(r).filter((y) => y.event.account === x).map((y) => y.event.data.reference)).toEqual([`${x === a ? 'a' : 'b'}1`, `${x === a ? 'a' : 'b'}2`, `${x === a ? 'a' : 'b'}3`]);
  }, 30_000);
});

describe('management routes', () => {
  it('owners for their account only; operators for all; the secret once; private URLs refused without the setting', async () => {
    const r = await receiver();
    const own = await callApi(base, 'POST', '/v1/webhooks', { token: owner, body: { url: r.url, account: OWNED, events: ['wallet.low'] } });
    expect(own.status).toBe(201);
    expect(own.body.secret).toMatch(/^whsec_/);
    expect((await callApi(base, 'POST', '/v1/webhooks', { token: owner, body: { url: r.url, account: 'someone-else' } })).status).toBe(404);
    expect((await callApi(base, 'POST', '/v1/webhooks', { token: owner, body: { url: r.url, account: null } })).status).toBe(403);
    expect((await callApi(base, 'POST', '/v1/webhooks', { token: admin, body: { url: 'ftp://example.com/', account: OWNED } })).status).toBe(400);
    expect((await callApi(base, 'POST', '/v1/webhooks', { token: admin, body: { url: r.url, account: OWNED, events: ['nope'] } })).status).toBe(400);
    const mine = await callApi(base, 'GET', '/v1/webhooks', { token: owner });
    expect(mine.body.webhooks.map((w: { id: string }) => w.id)).toEqual([own.body.id]);
    expect(JSON.stringify(mine.body)).not.toContain('whsec_');
    const all = await callApi(base, 'GET', '/v1/webhooks', { token: admin });
    expect(all.body.webhooks.length).toBeGreaterThan(1);
    const raw = JSON.stringify(await mc().redis.hgetall(mc().events.s.endpoints()));
    expect(raw).not.toContain(own.body.secret); // sealed at rest
    expect((await callApi(base, 'DELETE', `/v1/webhooks/${all.body.webhooks.find((w: { account: string | null }) => w.account !== OWNED).id}`, { token: owner })).status).toBe(404);
    expect((await callApi(base, 'DELETE', `/v1/webhooks/${own.body.id}`, { token: owner })).status).toBe(204);
    const doc = (await callApi(base, 'GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/webhooks', '/v1/webhooks/{id}', '/v1/webhooks/{id}/dead', '/v1/webhooks/{id}/dead/{event_id}/replay', '/v1/key']));
  });

  it('creation refuses loopback when private destinations are not allowed', async () => {
    for (const url of ['http://127.0.0.1/x', 'http://2130706433/', 'http://[::ffff:127.0.0.1]/', 'http://localhost/', 'http://169.254.169.254/latest', 'http://user:pw@example.com/']) {
      await expect(mc().createWebhook({ url, account: 'a' }, undefined, { allowPrivate: false })).rejects.toThrow(/url:/);
    }
  });

  it('GET /v1/key: the key reads its own limit in any key header; revoked, unknown and tokens are 401', async () => {
    const a = acct();
    const created = await mc().createKey({ account: a, name: 'self', models: ['openai/*'], expiresAt: null, limit: { amountMicros: 5000, period: 'month' } }, CLI_ACTOR);
    await mc().recordUsage({ keyId: created.id, amountMicros: 1200, requestId: 's1' });
    const headers: Record<string, string>[] = [{ authorization: `Bearer ${created.key}` }, { 'x-api-key': created.key }, { 'x-goog-api-key': created.key }];
    for (const h of headers) {
      const res = await callApi(base, 'GET', '/v1/key', { headers: h });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ id: created.id, name: 'self', hint: expect.any(String), expires_at: null, models: ['openai/*'], limit: { amount_micros: 5000, period: 'month', remaining_micros: 3800 }, rate: null, token_rate: null });
      expect(JSON.stringify(res.body)).not.toContain(created.key);
    }
    expect((await callApi(base, 'GET', '/v1/key', { token: admin })).status).toBe(401);
    expect((await callApi(base, 'GET', '/v1/key')).status).toBe(401);
    expect((await callApi(base, 'GET', '/v1/key', { headers: { 'x-api-key': `${created.key.slice(0, -1)}${created.key.endsWith('A') ? 'B' : 'A'}` } })).status).toBe(401);
    await mc().revokeKey(created.id, CLI_ACTOR);
    const rv = await callApi(base, 'GET', '/v1/key', { headers: { 'x-api-key': created.key } });
    expect(rv.status).toBe(401);
    // the key is not accepted anywhere else
    expect((await callApi(base, 'GET', `/v1/accounts/${a}/keys`, { headers: { 'x-api-key': created.key } })).status).toBe(401);
  });

  it("GET /v1/key: the key's request and token rates with the current window's use, remaining and end", async () => {
    const a = acct();
    const rated = await mc().createKey(
      { account: a, name: 'rated', models: null, expiresAt: null, limit: null, rates: { requests: { count: 5, per: 'minute' }, tokens: { count: 1000, per: 'hour' } } },
      CLI_ACTOR,
    );
    await mc().recordUsage({ keyId: rated.id, amountMicros: 1, requestId: 't1', inputTokens: 300, outputTokens: 100 });
    const res = await callApi(base, 'GET', '/v1/key', { headers: { 'x-api-key': rated.key } });
    expect(res.status).toBe(200);
    const hourEnd = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 + 3_600_000).toISOString();
    expect(res.body.limit).toBeNull();
    expect(res.body.rate).toEqual({ requests: 5, per: 'minute', used: 0, held: 0, remaining: 5, resets_at: expect.stringMatching(/:00\.000Z$/) });
    expect(res.body.token_rate).toEqual({ tokens: 1000, per: 'hour', used: 400, remaining: 600, resets_at: hourEnd });
    await mc().recordUsage({ keyId: rated.id, amountMicros: 1, requestId: 't2', inputTokens: 900, outputTokens: 0 });
    const over = await callApi(base, 'GET', '/v1/key', { headers: { 'x-api-key': rated.key } });
    expect(over.body.token_rate).toMatchObject({ used: 1300, remaining: 0 }); // never below 0
    // the same rates as the owner's view of the key
    const owned = (await callApi(base, 'GET', `/v1/keys/${rated.id}`, { token: admin })).body;
    expect({ requests: over.body.rate.requests, per: over.body.rate.per }).toEqual(owned.rate);
    expect({ tokens: over.body.token_rate.tokens, per: over.body.token_rate.per }).toEqual(owned.token_rate);
    expect(over.body.token_rate.used).toBe(owned.rate_use.tokens.used);
  });

  it('GET /v1/key: an expired key is 401, not 200 (key records have no time to live: the route checks the instant)', async () => {
    const k = await mc().createKey({ account: acct(), name: 'brief', models: null, expiresAt: Date.now() + 1200, limit: null }, CLI_ACTOR);
    expect((await callApi(base, 'GET', '/v1/key', { headers: { 'x-api-key': k.key } })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1300));
    expect(await mc().redis.exists(mc().schema.keyRecord(keyDigest(k.key)))).toBe(1); // the record is still there
    const res = await callApi(base, 'GET', '/v1/key', { headers: { 'x-api-key': k.key } });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('UNAUTHENTICATED');
  });

  it("GET /v1/key: remaining_micros is the limit less this period's spend, not the spend of earlier periods", async () => {
    const a = acct();
    const k = await mc().createKey({ account: a, name: 'daily', models: null, expiresAt: null, limit: { amountMicros: 5000, period: 'day' } }, CLI_ACTOR);
    await mc().recordUsage({ keyId: k.id, amountMicros: 1200, requestId: 'yesterday' });
    // that spend was yesterday's: its period's start moved one day back
    const spendKey = mc().schema.keySpend(a, k.id);
    const dayStart = Number(await mc().redis.hget(spendKey, 'day_start'));
    expect(dayStart).toBeGreaterThan(0);
    await mc().redis.hset(spendKey, 'day_start', String(dayStart - 86_400_000));
    await mc().recordUsage({ keyId: k.id, amountMicros: 300, requestId: 'today' });
    const res = await callApi(base, 'GET', '/v1/key', { headers: { 'x-api-key': k.key } });
    expect(res.status).toBe(200);
    expect(res.body.limit).toEqual({ amount_micros: 5000, period: 'day', remaining_micros: 4700 });
    expect((await mc().getKeyView(k.id)).usage.spend).toEqual({ period: 'day', periodMicros: 300, totalMicros: 1500 });
  });

  it('GET /v1/key is rate-limited per client address (60 a minute): a 429 with retry-after, not a 401', async () => {
    // Last in the file: it spends this address's minute for the route.
    const k = await mc().createKey({ account: acct(), name: 'poll', models: null, expiresAt: null, limit: null }, CLI_ACTOR);
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof callApi>> | undefined;
    for (let i = 0; i < 61 && !limited; i++) {
      const res = await callApi(base, 'GET', '/v1/key', { headers: { authorization: `Bearer ${k.key}` } });
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    expect(limited, `61 calls: ${statuses.join(',')}`).toBeDefined();
    expect(statuses.slice(0, -1).every((x) => x === 200)).toBe(true);
    expect(limited!.body.error.code).toBe('RATE_LIMITED');
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThan(0);
    // the management routes keep their own buckets
    expect((await callApi(base, 'GET', '/v1/webhooks', { token: admin })).status).toBe(200);
  });
});
