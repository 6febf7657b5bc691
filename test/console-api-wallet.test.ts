/**
 * The money side of the management API over real HTTP against a real Redis, with a real sidecar on
 * the same store: crediting a wallet and recording usage (operator operations, idempotent), key
 * spend limits set on create and by PATCH, the wallet and usage in the resources, the usage export,
 * and the sidecar's 402s following what the API wrote.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { callApi, PLAIN_NAMES_UNREAD, startTestConsole, type ApiResponse } from './helpers/console-api.ts';
import { snapshot } from './helpers/redis-dump.ts';
import { chatRequest, outcomeOf, startStack, waitFor, waitTracking, type Stack } from './helpers/sidecars.ts';

let stack: Stack;
let srv: ConsoleServer;
let base: string;
let admin: string; // all-accounts token
let owner: string; // scoped to ACCT
const ACCT = `acct-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  stack = await startStack({ stalenessBoundMs: 10_000 });
  ({ srv, base, admin, owner } = await startTestConsole(stack.redis.url, ACCT));
  await waitTracking(stack);
}, 60_000);

afterAll(async () => {
  await srv?.close();
  await stack?.close();
});

const call = (method: string, path: string, body?: unknown, token: string = admin): Promise<ApiResponse> => callApi(base, method, path, { body, token });

/** The database once the sidecar's pending request counts are written (they flush in the background). */
async function settled() {
  await stack.sidecar.usage?.flush();
  return snapshot(stack.db);
}

const errOf = (r: ApiResponse) => [r.status, r.body?.error?.code];
const check = async (key: string) => outcomeOf(await stack.client.check(chatRequest(key)));
const acct = () => `w-${randomBytes(4).toString('hex')}`;
let seq = 0;
const rid = () => `req-${++seq}-${randomBytes(3).toString('hex')}`;

describe('credits and the wallet', () => {
  it('a credit shows in the balance, is idempotent on its reference and audited once as credit', async () => {
    const a = acct();
    expect((await call('GET', `/v1/accounts/${a}`)).body).toEqual({ id: a, status: 'active', billing: 'metered', wallet: { enforced: false, balance_micros: 0, exists: false, rule: 'not-required' }, tokens: { today: { input: 0, output: 0 }, month: { input: 0, output: 0 } }, rate: null, token_rate: null, rate_use: { requests: null, tokens: null }, currency: 'USD', bare_models: PLAIN_NAMES_UNREAD });
    const c = await call('POST', `/v1/accounts/${a}/credits`, { amount_micros: 12_500_000, reference: 'inv-1' });
    expect(c.status).toBe(200);
    expect(c.body).toEqual({ account: a, reference: 'inv-1', amount_micros: 12_500_000, credited: true, balance_micros: 12_500_000 });
    const again = await call('POST', `/v1/accounts/${a}/credits`, { amount_micros: 99, reference: 'inv-1' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ account: a, reference: 'inv-1', amount_micros: 12_500_000, credited: false, balance_micros: 12_500_000 });
    expect((await call('GET', `/v1/accounts/${a}`)).body.wallet).toEqual({ enforced: true, balance_micros: 12_500_000, exists: true, rule: 'credited' });
    const audit = (await call('GET', `/v1/audit?account=${a}`)).body.events;
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ action: 'credit', account: a, actor: { type: 'token', name: 'ops' }, changes: { amount_micros: 12_500_000, reference: 'inv-1' } });
  });

  it('bad amounts and references → 400 naming the field, nothing changed', async () => {
    const a = acct();
    const before = await settled();
    for (const [body, field] of [
      [{ amount_micros: 0, reference: 'r' }, 'body.amount_micros'],
      [{ amount_micros: -5, reference: 'r' }, 'body.amount_micros'],
      [{ amount_micros: 1.5, reference: 'r' }, 'body.amount_micros'],
      [{ amount_micros: '100', reference: 'r' }, 'body.amount_micros'],
      [{ amount_micros: 1e18, reference: 'r' }, 'body.amount_micros'],
      [{ amount_micros: 100 }, 'body.reference'],
      [{ amount_micros: 100, reference: '' }, 'body.reference'],
      [{ amount_micros: 100, reference: 'has space' }, 'body.reference'],
      [{ amount_micros: 100, reference: 'r', note: 'x' }, 'unknown field "note"'],
    ] as const) {
      const r = await call('POST', `/v1/accounts/${a}/credits`, body);
      expect(errOf(r), JSON.stringify(body)).toEqual([400, 'INVALID_INPUT']);
      expect(r.body.error.message).toContain(field);
    }
    expect(await settled()).toEqual(before);
  });

  it('an account-scoped token reads its wallet but gets 403 on credits and usage (operator operations)', async () => {
    const k = await call('POST', `/v1/accounts/${ACCT}/keys`, { name: 'mine' }, owner);
    expect(k.status).toBe(201);
    const before = await settled();
    expect(errOf(await call('POST', `/v1/accounts/${ACCT}/credits`, { amount_micros: 1_000_000, reference: 'self-fund' }, owner))).toEqual([403, 'FORBIDDEN']);
    expect(errOf(await call('POST', '/v1/usage', { key_id: k.body.id, amount_micros: 1, request_id: rid() }, owner))).toEqual([403, 'FORBIDDEN']);
    // Scope is checked before the body: a bad body from an account-scoped token is still 403.
    expect(errOf(await call('POST', `/v1/accounts/${ACCT}/credits`, { amount_micros: -1 }, owner))).toEqual([403, 'FORBIDDEN']);
    expect(errOf(await call('POST', '/v1/usage', { bogus: true }, owner))).toEqual([403, 'FORBIDDEN']);
    expect(await settled()).toEqual(before);
    expect((await call('GET', `/v1/accounts/${ACCT}`, undefined, owner)).body).toEqual({ id: ACCT, status: 'active', billing: 'metered', wallet: { enforced: false, balance_micros: 0, exists: false, rule: 'not-required' }, tokens: { today: { input: 0, output: 0 }, month: { input: 0, output: 0 } }, rate: null, token_rate: null, rate_use: { requests: null, tokens: null }, currency: 'USD', bare_models: PLAIN_NAMES_UNREAD });
  });

  it('wallet at zero → 402 INSUFFICIENT_BALANCE at the sidecar; a credit lifts it on the next request', async () => {
    const a = acct();
    const k = await call('POST', `/v1/accounts/${a}/keys`, { name: 'router' });
    await call('POST', `/v1/accounts/${a}/credits`, { amount_micros: 1_000, reference: 'seed' });
    expect(await check(k.body.key)).toBe('allow');
    expect(await check(k.body.key)).toBe('allow');
    const u = await call('POST', '/v1/usage', { key_id: k.body.id, amount_micros: 1_000, request_id: rid() });
    expect(u.body).toMatchObject({ booked: true, balance_micros: 0 });
    expect(await check(k.body.key)).toBe('INSUFFICIENT_BALANCE');
    expect((await call('GET', `/v1/accounts/${a}`)).body.wallet).toEqual({ enforced: true, balance_micros: 0, exists: true, rule: 'credited' });
    await call('POST', `/v1/accounts/${a}/credits`, { amount_micros: 1, reference: 'topup' });
    expect(await check(k.body.key)).toBe('allow');
  });
});

describe('usage records', () => {
  it('a record moves spend and balance; the same request id again changes nothing (booked: false)', async () => {
    const a = acct();
    const k = await call('POST', `/v1/accounts/${a}/keys`, { name: 'billed' });
    await call('POST', `/v1/accounts/${a}/credits`, { amount_micros: 5_000_000, reference: 'seed' });
    const body = { key_id: k.body.id, amount_micros: 750_000, request_id: 'req-1', model: 'openai/gpt-4o', input_tokens: 12, output_tokens: 34 };
    const u = await call('POST', '/v1/usage', body);
    expect(u.status).toBe(200);
    expect(u.body).toEqual({ booked: true, key_id: k.body.id, account: a, request_id: 'req-1', amount_micros: 750_000, balance_micros: 4_250_000 });
    const before = await settled();
    const dup = await call('POST', '/v1/usage', body);
    expect(dup.status).toBe(200);
    expect(dup.body).toMatchObject({ booked: false, request_id: 'req-1', balance_micros: null });
    expect(await settled()).toEqual(before);
    const key = (await call('GET', `/v1/keys/${k.body.id}`)).body;
    expect(key.spend).toEqual({ period: 'month', period_micros: 750_000, total_micros: 750_000 });
    expect((await call('GET', `/v1/accounts/${a}`)).body.wallet.balance_micros).toBe(4_250_000);
    // The export shows the record, once.
    const since = new Date(Date.now() - 3600_000).toISOString();
    const ex = await call('GET', `/v1/usage?account=${a}&since=${since}`);
    expect(ex.status).toBe(200);
    expect(ex.body.more).toBe(false);
    expect(ex.body.entries).toEqual([
      { id: expect.stringMatching(/^\d+-\d+$/), time: expect.any(String), account: a, key_id: k.body.id, request_id: 'req-1', booking_id: 'req-1', amount_micros: 750_000, model: 'openai/gpt-4o', input_tokens: 12, output_tokens: 34, source: 'record', estimated: false, unpriced: false,
        // issue 34: every entry says why its amount; a router's record was priced by the router
        price: { rule: 'recorded', model: 'openai/gpt-4o', source: 'record', catalog_version: null, tier: null, service_tier: null, multiplier: '1', parts: { recorded: '750000' } } },
    ]);
  });

  it('unknown key id → 404; bad amount, request id or key id → 400 naming the field; nothing changed', async () => {
    const a = acct();
    const k = await call('POST', `/v1/accounts/${a}/keys`, { name: 'k' });
    const before = await settled();
    const unknown = await call('POST', '/v1/usage', { key_id: 'key_000000000000000000000000', amount_micros: 5, request_id: rid() });
    expect(errOf(unknown)).toEqual([404, 'NOT_FOUND']);
    expect(unknown.body.error.message).toContain('key_000000000000000000000000');
    for (const [body, field] of [
      [{ key_id: k.body.id, amount_micros: 0, request_id: 'r1' }, 'body.amount_micros'],
      [{ key_id: k.body.id, amount_micros: -1, request_id: 'r1' }, 'body.amount_micros'],
      [{ key_id: k.body.id, amount_micros: 5 }, 'body.request_id'],
      [{ key_id: k.body.id, amount_micros: 5, request_id: '' }, 'body.request_id'],
      [{ key_id: k.body.id, amount_micros: 5, request_id: 'a b' }, 'body.request_id'],
      [{ key_id: 'nope', amount_micros: 5, request_id: 'r1' }, 'body.key_id'],
      [{ key_id: k.body.id, amount_micros: 5, request_id: 'r1', input_tokens: -3 }, 'body.input_tokens'],
      [{ key_id: k.body.id, amount_micros: 5, request_id: 'r1', model: 'has space' }, 'model'],
    ] as const) {
      const r = await call('POST', '/v1/usage', body);
      expect(errOf(r), JSON.stringify(body)).toEqual([400, 'INVALID_INPUT']);
      expect(r.body.error.message).toContain(field);
    }
    expect(await settled()).toEqual(before);
  });

  it('the usage export: an account-scoped token sees its own account, another account is 404; a bad since is 400', async () => {
    const since = new Date(Date.now() - 3600_000).toISOString();
    expect((await call('GET', `/v1/usage?since=${since}`, undefined, owner)).status).toBe(200);
    expect(errOf(await call('GET', `/v1/usage?since=${since}&account=someone-else`, undefined, owner))).toEqual([404, 'NOT_FOUND']);
    expect(errOf(await call('GET', '/v1/usage?since=yesterday'))).toEqual([400, 'INVALID_INPUT']);
    const a = acct();
    const k = await call('POST', `/v1/accounts/${a}/keys`, { name: 'many' });
    for (let i = 0; i < 3; i++) await call('POST', '/v1/usage', { key_id: k.body.id, amount_micros: 1 + i, request_id: `page-${i}` });
    const page = await call('GET', `/v1/usage?account=${a}&since=${since}&limit=2`);
    expect(page.body.more).toBe(true);
    expect(page.body.entries.map((e: any) => e.request_id)).toEqual(['page-0', 'page-1']);
  });

  it("the usage export's owner scope: an account-scoped token reads its own account's entries, never another's (with or without ?account=)", async () => {
    const since = new Date(Date.now() - 60_000).toISOString();
    const other = acct();
    const mine = await call('POST', `/v1/accounts/${ACCT}/keys`, { name: 'scope-mine' });
    const theirs = await call('POST', `/v1/accounts/${other}/keys`, { name: 'scope-theirs' });
    await call('POST', '/v1/usage', { key_id: mine.body.id, amount_micros: 1, request_id: 'scope-mine' });
    await call('POST', '/v1/usage', { key_id: theirs.body.id, amount_micros: 1, request_id: 'scope-theirs' });
    const own = await call('GET', `/v1/usage?since=${since}&limit=1000`, undefined, owner);
    expect(own.status).toBe(200);
    expect(new Set(own.body.entries.map((e: any) => e.account))).toEqual(new Set([ACCT]));
    expect(own.body.entries.map((e: any) => e.request_id)).toContain('scope-mine');
    expect(errOf(await call('GET', `/v1/usage?since=${since}&account=${other}`, undefined, owner))).toEqual([404, 'NOT_FOUND']);
    // the operator reads both
    const all = (await call('GET', `/v1/usage?since=${since}&limit=1000`)).body.entries.map((e: any) => e.request_id);
    expect(all).toEqual(expect.arrayContaining(['scope-mine', 'scope-theirs']));
  });
});

describe('key spend limits', () => {
  it('a limit set on create and by PATCH shows in GET; the sidecar refuses with 402 once spend reaches it; raising or removing it lifts', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { name: 'capped', limit: { amount_micros: 1_000, period: 'day' } });
    expect(c.status).toBe(201);
    expect(c.body.limit).toEqual({ amount_micros: 1_000, period: 'day' });
    expect((await call('GET', `/v1/keys/${c.body.id}`)).body.limit).toEqual({ amount_micros: 1_000, period: 'day' });
    expect((await call('GET', `/v1/accounts/${a}/keys`)).body.keys[0].limit).toEqual({ amount_micros: 1_000, period: 'day' });

    expect(await check(c.body.key)).toBe('allow');
    await call('POST', '/v1/usage', { key_id: c.body.id, amount_micros: 999, request_id: rid() });
    expect(await check(c.body.key)).toBe('allow');
    await call('POST', '/v1/usage', { key_id: c.body.id, amount_micros: 1, request_id: rid() });
    expect(await check(c.body.key)).toBe('KEY_LIMIT_EXCEEDED');
    expect((await call('GET', `/v1/keys/${c.body.id}`)).body.spend).toEqual({ period: 'day', period_micros: 1_000, total_micros: 1_000 });

    const up = await call('PATCH', `/v1/keys/${c.body.id}`, { limit: { amount_micros: 5_000, period: 'week' } });
    expect(up.status).toBe(200);
    expect(up.body.limit).toEqual({ amount_micros: 5_000, period: 'week' });
    expect(await check(c.body.key)).toBe('allow');
    await call('PATCH', `/v1/keys/${c.body.id}`, { limit: { amount_micros: 1_000, period: 'total' } });
    expect(await check(c.body.key)).toBe('KEY_LIMIT_EXCEEDED');
    const none = await call('PATCH', `/v1/keys/${c.body.id}`, { limit: null });
    expect(none.body.limit).toBeNull();
    expect(await check(c.body.key)).toBe('allow');
    const events = (await call('GET', `/v1/audit?account=${a}&limit=3`)).body.events;
    expect(events.map((e: any) => [e.action, e.changes.limit])).toEqual([
      ['update', null],
      ['update', { amount_micros: 1_000, period: 'total' }],
      ['update', { amount_micros: 5_000, period: 'week' }],
    ]);
  });

  it('a key limit set by PATCH with other fields, and on a key of an account-scoped token; bad limits → 400 naming the field', async () => {
    const k = await call('POST', `/v1/accounts/${ACCT}/keys`, { name: 'owned' }, owner);
    const up = await call('PATCH', `/v1/keys/${k.body.id}`, { name: 'owned-2', limit: { amount_micros: 42, period: 'month' } }, owner);
    expect(up.status).toBe(200);
    expect(up.body).toMatchObject({ name: 'owned-2', limit: { amount_micros: 42, period: 'month' } });
    const before = await settled();
    for (const [limit, field] of [
      [{ amount_micros: 0, period: 'day' }, 'body.limit.amount_micros'],
      [{ amount_micros: 5, period: 'year' }, 'body.limit.period'],
      [{ amount_micros: 5 }, 'body.limit.period'],
      [5, 'body.limit'],
    ] as const) {
      const p = await call('PATCH', `/v1/keys/${k.body.id}`, { limit });
      expect(errOf(p), JSON.stringify(limit)).toEqual([400, 'INVALID_INPUT']);
      expect(p.body.error.message).toContain(field);
      const c = await call('POST', `/v1/accounts/${ACCT}/keys`, { name: 'x', limit });
      expect(errOf(c), JSON.stringify(limit)).toEqual([400, 'INVALID_INPUT']);
    }
    expect(await settled()).toEqual(before);
  });

  it('roll keeps the limit; allowed requests show as last use and requests today (flushed within about a second)', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { name: 'counted', limit: { amount_micros: 7, period: 'week' } });
    const rolled = await call('POST', `/v1/keys/${c.body.id}/roll`, { grace_seconds: 60 });
    expect(rolled.body.limit).toEqual({ amount_micros: 7, period: 'week' });
    for (let i = 0; i < 3; i++) expect(await check(rolled.body.key)).toBe('allow');
    await waitFor(async () => (await call('GET', `/v1/keys/${rolled.body.id}`)).body.requests.today >= 3, 'request counts flushed', 20_000);
    const key = (await call('GET', `/v1/keys/${rolled.body.id}`)).body;
    expect(key.requests.month).toBeGreaterThanOrEqual(3);
    expect(Date.parse(key.last_used_at)).toBeGreaterThan(Date.now() - 120_000);
  });
});
