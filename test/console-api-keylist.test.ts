/**
 * What the "API keys" page reads from the management API, over real HTTP against a real Redis: the
 * key list's cursor pages, status filter (with each key's status now: expired, limit reached until
 * …, revoked), search and sort; the account's ledger of credits and charges, newest first, paged;
 * the deployment's currency and "no wallet" in the account view; all in the OpenAPI document.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { startConsole, type ConsoleServer } from '../src/console-api/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { callApi, startTestConsole, type ApiResponse } from './helpers/console-api.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

let redis: RedisServer;
let srv: ConsoleServer;
let base: string;
let admin: string;
let owner: string; // scoped to ACCT
const ACCT = `list-${randomBytes(4).toString('hex')}`;
const OTHER = `other-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  redis = await startRedis();
  ({ srv, base, admin, owner } = await startTestConsole(redis.url, ACCT));
}, 60_000);

afterAll(async () => {
  await srv?.close();
  if (redis) await destroyRedis(redis);
});

const get = (path: string, token = owner): Promise<ApiResponse> => callApi(base, 'GET', path, { token });
const errOf = (r: ApiResponse) => [r.status, r.body?.error?.code];
const keysPath = (account: string, q: Record<string, string | number> = {}) =>
  `/v1/accounts/${account}/keys?${new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)]))}`;

/** Every page of a list, following next_cursor. */
async function allPages(account: string, q: Record<string, string | number>): Promise<{ ids: string[]; pages: number; totals: number[] }> {
  const ids: string[] = [];
  const totals: number[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r = await get(keysPath(account, cursor === null ? q : { ...q, cursor }));
    expect(r.status).toBe(200);
    ids.push(...r.body.keys.map((k: { id: string }) => k.id));
    totals.push(r.body.total);
    cursor = r.body.next_cursor;
    pages++;
  } while (cursor !== null && pages < 100);
  return { ids, pages, totals };
}

describe('the key list: pages, filters, search, sort', () => {
  const made: { id: string; name: string; hint: string; createdAt: number }[] = [];
  let revoked: string[] = [];

  beforeAll(async () => {
    for (let i = 0; i < 57; i++) {
      const c = await srv.console.createKey({ account: ACCT, name: `Batch ${String(i).padStart(2, '0')}${i % 10 === 0 ? ' Prod' : ''}` }, CLI_ACTOR);
      made.push({ id: c.id, name: c.record.name, hint: c.record.hint, createdAt: c.record.createdAt });
    }
    // The list's order: created, ties (the same millisecond) by id.
    made.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
    revoked = made.slice(50, 57).map((k) => k.id);
    for (const id of revoked) await srv.console.revokeKey(id, CLI_ACTOR);
  }, 60_000);

  it('pages with a cursor: 50 by default, every key once, in order, with the total and the active count', async () => {
    const first = await get(keysPath(ACCT));
    expect(first.status).toBe(200);
    expect(first.body.keys).toHaveLength(50);
    expect(first.body).toMatchObject({ total: 57, active_keys: 50, max_active_keys: 100 });
    expect(first.body.keys.map((k: { id: string }) => k.id)).toEqual(made.slice(0, 50).map((k) => k.id)); // default: oldest first
    const walked = await allPages(ACCT, { limit: 10 });
    expect(walked.pages).toBe(6);
    expect(walked.ids).toEqual(made.map((k) => k.id));
    expect(new Set(walked.totals)).toEqual(new Set([57]));
    const newest = await allPages(ACCT, { limit: 7, sort: '-created' });
    expect(newest.ids).toEqual(made.map((k) => k.id).reverse());
    const byName = await allPages(ACCT, { limit: 200, sort: '-name' });
    expect(byName.pages).toBe(1);
    expect(byName.ids).toEqual([...made].sort((a, b) => b.name.toLowerCase().localeCompare(a.name.toLowerCase())).map((k) => k.id));
  });

  it('filters by status: current hides revoked keys, revoked shows only them, each key carries its state', async () => {
    const current = await allPages(ACCT, { status: 'current', limit: 200 });
    expect(current.ids).toEqual(made.slice(0, 50).map((k) => k.id));
    const r = await get(keysPath(ACCT, { status: 'revoked' }));
    expect(r.body.keys.map((k: { id: string }) => k.id)).toEqual(revoked);
    expect(r.body.keys.every((k: { state: string; status: string }) => k.state === 'revoked' && k.status === 'revoked')).toBe(true);
    const active = await get(keysPath(ACCT, { status: 'active', limit: 1 }));
    expect(active.body).toMatchObject({ total: 50, keys: [{ state: 'active', limit_reached_until: null }] });
    expect((await get(keysPath(ACCT, { status: 'rate_limited' }))).body).toMatchObject({ keys: [], total: 0, next_cursor: null });
  });

  it('searches a case-insensitive substring of the name, or an exact id or hint (not a part of one)', async () => {
    const prod = await get(keysPath(ACCT, { q: 'pROD', status: 'all', sort: 'name' }));
    expect(prod.body.keys.map((k: { name: string }) => k.name)).toEqual(['Batch 00 Prod', 'Batch 10 Prod', 'Batch 20 Prod', 'Batch 30 Prod', 'Batch 40 Prod', 'Batch 50 Prod']);
    expect((await get(keysPath(ACCT, { q: 'prod', status: 'current' }))).body.total).toBe(made.slice(0, 50).filter((k) => k.name.includes('Prod')).length);
    const k = made[3]!;
    expect((await get(keysPath(ACCT, { q: k.id }))).body.keys.map((x: { id: string }) => x.id)).toEqual([k.id]);
    expect((await get(keysPath(ACCT, { q: ` ${k.hint} ` }))).body.keys.map((x: { id: string }) => x.id)).toEqual([k.id]);
    expect((await get(keysPath(ACCT, { q: k.id.slice(0, 10) }))).body.total).toBe(0);
  });

  it('refuses bad parameters with 400 naming them, and another account with 404', async () => {
    expect(errOf(await get(keysPath(ACCT, { limit: 201 })))).toEqual([400, 'INVALID_INPUT']);
    expect(errOf(await get(keysPath(ACCT, { limit: 0 })))).toEqual([400, 'INVALID_INPUT']);
    expect(errOf(await get(keysPath(ACCT, { status: 'sleeping' })))).toEqual([400, 'INVALID_INPUT']);
    expect(errOf(await get(keysPath(ACCT, { sort: 'hint' })))).toEqual([400, 'INVALID_INPUT']);
    expect(errOf(await get(keysPath(ACCT, { bogus: 1 })))).toEqual([400, 'INVALID_INPUT']);
    const bad = await get(keysPath(ACCT, { cursor: 'not-a-cursor' }));
    expect(errOf(bad)).toEqual([400, 'INVALID_INPUT']);
    expect(bad.body.error.message).toMatch(/cursor/);
    // A cursor of one sort is not a cursor of another.
    const c = (await get(keysPath(ACCT, { limit: 5, sort: 'name' }))).body.next_cursor;
    expect(errOf(await get(keysPath(ACCT, { cursor: c, sort: '-created' })))).toEqual([400, 'INVALID_INPUT']);
    expect(errOf(await get(keysPath(OTHER)))).toEqual([404, 'NOT_FOUND']);
  });
});

describe('states now: expired, limit reached until …', () => {
  it('an expired key and a key at its spend limit show so, with the time the limit lifts', async () => {
    const a = `st-${randomBytes(4).toString('hex')}`;
    const soon = await srv.console.createKey({ account: a, name: 'soon', expiresAt: new Date(Date.now() + 1500).toISOString() }, CLI_ACTOR);
    const capped = await srv.console.createKey({ account: a, name: 'capped', limit: { amountMicros: 1_000, period: 'day' } }, CLI_ACTOR);
    const forever = await srv.console.createKey({ account: a, name: 'forever', limit: { amountMicros: 1_000, period: 'total' } }, CLI_ACTOR);
    await srv.console.recordUsage({ keyId: capped.id, amountMicros: 1_000, requestId: `r-${a}-1` });
    await srv.console.recordUsage({ keyId: forever.id, amountMicros: 5_000, requestId: `r-${a}-2` });
    await new Promise((r) => setTimeout(r, 1600));
    const r = await get(keysPath(a, { status: 'all' }), admin);
    const byName = Object.fromEntries(r.body.keys.map((k: { name: string }) => [k.name, k]));
    expect(byName.soon).toMatchObject({ id: soon.id, status: 'active', state: 'expired' });
    const midnight = new Date();
    midnight.setUTCHours(24, 0, 0, 0);
    expect(byName.capped).toMatchObject({ state: 'limit_reached', limit_reached_until: midnight.toISOString() });
    expect(byName.forever).toMatchObject({ state: 'limit_reached', limit_reached_until: null });
    expect((await get(keysPath(a, { status: 'limit_reached' }), admin)).body.keys.map((k: { id: string }) => k.id).sort()).toEqual([capped.id, forever.id].sort());
    expect((await get(keysPath(a, { status: 'expired' }), admin)).body.keys.map((k: { id: string }) => k.id)).toEqual([soon.id]);
  });
});

describe('the ledger and the account view', () => {
  it('credits and charges, newest first, signed, paged by cursor; readable by the owner only', async () => {
    const k = await srv.console.createKey({ account: ACCT, name: 'metered' }, CLI_ACTOR);
    const fresh = await get(`/v1/accounts/${ACCT}`);
    expect(fresh.body).toMatchObject({ currency: 'USD', wallet: { exists: false, balance_micros: 0 } });
    expect((await get(`/v1/accounts/${ACCT}/ledger`)).body).toEqual({ currency: 'USD', entries: [], next_cursor: null });
    // A credit and a charge in one millisecond are ordered by the documented tie rule (credit first,
    // as the newer); a pause after each credit keeps this test's order about time, not the tie.
    const tick = () => new Promise((r) => setTimeout(r, 3));
    await srv.console.creditAccount(ACCT, 10_000_000, 'inv-1', CLI_ACTOR);
    await tick();
    for (let i = 1; i <= 3; i++) await srv.console.recordUsage({ keyId: k.id, amountMicros: i * 1000, requestId: `req-${i}`, model: 'openai/gpt-4o-mini' });
    await srv.console.creditAccount(ACCT, 500_000, 'inv-2', CLI_ACTOR);
    await tick();
    await srv.console.recordUsage({ keyId: k.id, amountMicros: 7, requestId: 'req-4' });
    expect((await get(`/v1/accounts/${ACCT}`)).body).toMatchObject({ currency: 'USD', wallet: { exists: true, enforced: true, balance_micros: 10_500_000 - 6_007 } });

    const seen: any[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await get(`/v1/accounts/${ACCT}/ledger?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      expect(r.body.entries.length).toBeLessThanOrEqual(2);
      seen.push(...r.body.entries);
      cursor = r.body.next_cursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(pages).toBe(3);
    expect(seen.map((e) => [e.type, e.amount_micros, e.reference ?? e.request_id])).toEqual([
      ['charge', -7, 'req-4'],
      ['credit', 500_000, 'inv-2'],
      ['charge', -3000, 'req-3'],
      ['charge', -2000, 'req-2'],
      ['charge', -1000, 'req-1'],
      ['credit', 10_000_000, 'inv-1'],
    ]);
    expect(seen[2]).toMatchObject({ key_id: k.id, model: 'openai/gpt-4o-mini', time: expect.stringMatching(/Z$/) });
    const times = seen.map((e) => Date.parse(e.time));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(seen.reduce((s, e) => s + e.amount_micros, 0)).toBe(10_500_000 - 6_007);

    expect(errOf(await get(`/v1/accounts/${OTHER}/ledger`))).toEqual([404, 'NOT_FOUND']);
    expect(errOf(await get(`/v1/accounts/${ACCT}/ledger?cursor=zz`))).toEqual([400, 'INVALID_INPUT']);
    expect(errOf(await get(`/v1/accounts/${ACCT}/ledger?limit=500`))).toEqual([400, 'INVALID_INPUT']);
    expect((await get(`/v1/accounts/${ACCT}/ledger`, '')).status).toBe(401);
  });

  it('KEYGATE_CURRENCY labels balances; a code that is not ISO 4217 is refused at start', async () => {
    expect(() => loadConsoleApiConfig({ port: 0, redisUrl: redis.url }, { KEYGATE_CURRENCY: 'euro' })).toThrow(/KEYGATE_CURRENCY/);
    const config = loadConsoleApiConfig({ port: 0, redisUrl: redis.url }, { KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_CURRENCY: 'EUR' });
    const eur = await startConsole(config, createLogger('silent'), { revealKey: `k1:${randomBytes(32).toString('base64')}` });
    try {
      const t = (await eur.console.createToken({ name: 'ops', account: null }, CLI_ACTOR)).token;
      const r = await callApi(`http://127.0.0.1:${eur.port}`, 'GET', `/v1/accounts/${ACCT}`, { token: t });
      expect(r.body.currency).toBe('EUR');
      expect((await callApi(`http://127.0.0.1:${eur.port}`, 'GET', `/v1/accounts/${ACCT}/ledger?limit=1`, { token: t })).body.currency).toBe('EUR');
    } finally {
      await eur.close();
    }
  });

  it('the OpenAPI document describes the list parameters and the ledger', async () => {
    const doc = (await callApi(base, 'GET', '/openapi.json')).body;
    const list = doc.paths['/v1/accounts/{account}/keys'].get;
    expect(list.parameters.map((p: { name: string }) => p.name).sort()).toEqual(['account', 'cursor', 'limit', 'q', 'sort', 'status']);
    const listed = list.responses['200'].content['application/json'].schema;
    expect(Object.keys(listed.properties).sort()).toEqual(['active_keys', 'keys', 'max_active_keys', 'next_cursor', 'total']);
    const ledger = doc.paths['/v1/accounts/{account}/ledger'].get;
    expect(ledger.operationId).toBe('listLedger');
    expect(ledger.parameters.map((p: { name: string }) => p.name).sort()).toEqual(['account', 'cursor', 'limit']);
    const account = doc.paths['/v1/accounts/{account}'].get.responses['200'].content['application/json'].schema;
    expect(account.properties.currency).toBeDefined();
    expect(account.properties.wallet.properties.exists).toBeDefined();
  });
});
