/**
 * The management API (`keygate console`) over real HTTP against a real Redis, with a real sidecar
 * in the same stack: every route, scopes, idempotency, rolling, the audit log, bad input, and the
 * OpenAPI document (validated, and equal to the set of routes the server answers).
 */
import { randomBytes } from 'node:crypto';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { startConsole, type ConsoleServer } from '../src/console-api/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { deniedBody } from './helpers/envoy-client.ts';
import { callApi, PLAIN_NAMES_UNREAD, startTestConsole, type ApiCallOptions, type ApiResponse } from './helpers/console-api.ts';
import { chatRequest, startStack, type Stack } from './helpers/sidecars.ts';

let stack: Stack;
let srv: ConsoleServer;
let base: string;
let admin: string; // all-accounts token
let owner: string; // scoped to ACCT
let ownerId: string;
const ACCT = `acct-${randomBytes(4).toString('hex')}`;
const OTHER = `other-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  stack = await startStack();
  ({ srv, base, admin, owner, ownerId } = await startTestConsole(stack.redis.url, ACCT));
}, 60_000);

afterAll(async () => {
  await srv?.close();
  await stack?.close();
});

/** A request as the all-accounts token unless `token` says otherwise (null: none). */
const call = (method: string, path: string, opts: ApiCallOptions = {}): Promise<ApiResponse> =>
  callApi(base, method, path, { ...opts, token: opts.token === undefined ? admin : opts.token });

const errCode = (r: ApiResponse) => r.body?.error?.code as string;
const check = async (key: string, model = 'openai/gpt-4o') => {
  const res = await stack.client.check(chatRequest(key, model));
  return res.denied_response ? (deniedBody(res).error.code as string) : 'ALLOW';
};

describe('keys', () => {
  it('create, list, show, reveal, restrict, roll, revoke — and the sidecar follows', async () => {
    const c = await call('POST', `/v1/accounts/${ACCT}/keys`, { body: { name: 'ci', models: ['openai/*'] } });
    expect(c.status).toBe(201);
    expect(c.body).toMatchObject({ account: ACCT, name: 'ci', status: 'active', models: ['openai/*'], expires_at: null, limit: null, last_used_at: null });
    expect(c.body.key).toMatch(/^kg_/);
    expect(await check(c.body.key)).toBe('ALLOW');

    const list = await call('GET', `/v1/accounts/${ACCT}/keys`);
    expect(list.status).toBe(200);
    expect(list.body.keys.map((k: any) => k.id)).toContain(c.body.id);
    expect(JSON.stringify(list.body)).not.toContain(c.body.key);

    expect((await call('GET', `/v1/keys/${c.body.id}`)).body).toMatchObject({ id: c.body.id, hint: expect.stringContaining('…') });
    expect((await call('POST', `/v1/keys/${c.body.id}/reveal`)).body).toEqual({ id: c.body.id, key: c.body.key });

    const up = await call('PATCH', `/v1/keys/${c.body.id}`, { body: { models: ['openai/gpt-4o-mini'], name: 'ci-2' } });
    expect(up.status).toBe(200);
    expect(up.body).toMatchObject({ name: 'ci-2', models: ['openai/gpt-4o-mini'] });
    expect(await check(c.body.key, 'openai/gpt-4o')).toBe('MODEL_NOT_ALLOWED');

    const rolled = await call('POST', `/v1/keys/${c.body.id}/roll`, { body: { grace_seconds: 3600 } });
    expect(rolled.status).toBe(201);
    expect(rolled.body).toMatchObject({ name: 'ci-2 (rolled)', account: ACCT, models: ['openai/gpt-4o-mini'], rolled_from: c.body.id, status: 'active' });
    expect(rolled.body.old).toMatchObject({ id: c.body.id, rolled_to: rolled.body.id, status: 'active' });
    expect(Date.parse(rolled.body.old.expires_at) - Date.now()).toBeGreaterThan(3500_000);
    expect(await check(c.body.key, 'openai/gpt-4o-mini')).toBe('ALLOW'); // within the grace
    expect(await check(rolled.body.key, 'openai/gpt-4o-mini')).toBe('ALLOW');
    expect((await call('POST', `/v1/keys/${c.body.id}/roll`)).status).toBe(409); // already rolled

    const again = await call('POST', `/v1/keys/${rolled.body.id}/roll`); // grace 0: old revoked at once
    expect(again.status).toBe(201);
    expect(again.body.name).toBe('ci-2 (rolled 2)');
    expect(again.body.old).toMatchObject({ id: rolled.body.id, status: 'revoked', rolled_to: again.body.id });
    expect(await check(rolled.body.key, 'openai/gpt-4o-mini')).toBe('INVALID_API_KEY');

    const rv = await call('POST', `/v1/keys/${again.body.id}/revoke`);
    expect(rv.status).toBe(200);
    expect(rv.body.status).toBe('revoked');
    expect(await check(again.body.key, 'openai/gpt-4o-mini')).toBe('INVALID_API_KEY');
    const changed = await call('PATCH', `/v1/keys/${again.body.id}`, { body: { name: 'x' } });
    expect([changed.status, errCode(changed)]).toEqual([409, 'REVOKED']);
    expect((await call('POST', `/v1/keys/${again.body.id}/reveal`)).status).toBe(409);
  });

  it('Idempotency-Key: the same body replays the first answer with the key; another body → 409; scoped to the token', async () => {
    const idem = `idem-${randomBytes(4).toString('hex')}`;
    const body = { name: 'once', expires_at: '2999-01-01' };
    const a = await call('POST', `/v1/accounts/${ACCT}/keys`, { body, headers: { 'idempotency-key': idem } });
    const b = await call('POST', `/v1/accounts/${ACCT}/keys`, { body: { expires_at: '2999-01-01', name: 'once' }, headers: { 'idempotency-key': idem } });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.body.id).toBe(a.body.id);
    expect(b.body.key).toBe(a.body.key);
    const c = await call('POST', `/v1/accounts/${ACCT}/keys`, { body: { name: 'other' }, headers: { 'idempotency-key': idem } });
    expect([c.status, errCode(c)]).toEqual([409, 'CONFLICT']);
    // Another token with the same Idempotency-Key creates its own key.
    const d = await call('POST', `/v1/accounts/${ACCT}/keys`, { token: owner, body, headers: { 'idempotency-key': idem } });
    expect(d.status).toBe(201);
    expect(d.body.id).not.toBe(a.body.id);
    const keys = (await call('GET', `/v1/accounts/${ACCT}/keys`)).body.keys.filter((k: any) => k.name === 'once');
    expect(keys).toHaveLength(2);
  });

  it('100 active keys → 422 and nothing written', async () => {
    const acct = `full-${randomBytes(4).toString('hex')}`;
    await Promise.all(Array.from({ length: 100 }, (_, i) => srv.console.createKey({ account: acct, name: `k${i}` })));
    const r = await call('POST', `/v1/accounts/${acct}/keys`, { body: { name: 'one too many' } });
    expect([r.status, errCode(r)]).toEqual([422, 'LIMIT_REACHED']);
    expect((await call('GET', `/v1/accounts/${acct}/keys?limit=200`)).body.keys).toHaveLength(100);
  }, 30_000);
});

describe('money on keys and accounts', () => {
  it('a key carries its spend limit and usage, the account its wallet; the sidecar follows both', async () => {
    const acct = `money-${randomBytes(4).toString('hex')}`;
    const c = await call('POST', `/v1/accounts/${acct}/keys`, { body: { name: 'metered', limit: { amount_micros: 2_000_000, period: 'month' } } });
    expect(c.status).toBe(201);
    expect(c.body).toMatchObject({ limit: { amount_micros: 2_000_000, period: 'month' }, spend: { period_micros: 0, total_micros: 0 }, requests: { today: 0, month: 0 } });
    expect((await call('GET', `/v1/accounts/${acct}`)).body.wallet).toEqual({ enforced: false, balance_micros: 0, exists: false, rule: 'not-required' });

    await srv.console.creditAccount(acct, 10_000_000, `ref-${acct}`, CLI_ACTOR);
    await srv.console.recordUsage({ keyId: c.body.id, amountMicros: 2_000_000, requestId: `r-${acct}` });
    expect((await call('GET', `/v1/accounts/${acct}`)).body.wallet).toEqual({ enforced: true, balance_micros: 8_000_000, exists: true, rule: 'credited' });
    const shown = await call('GET', `/v1/keys/${c.body.id}`);
    expect(shown.body).toMatchObject({ limit: { amount_micros: 2_000_000, period: 'month' }, spend: { period_micros: 2_000_000, total_micros: 2_000_000 } });
    expect((await call('GET', `/v1/accounts/${acct}/keys`)).body.keys[0].spend).toMatchObject({ period_micros: 2_000_000, total_micros: 2_000_000 });
    expect(await check(c.body.key)).toBe('KEY_LIMIT_EXCEEDED');

    // Raising the limit lifts the refusal; null removes it.
    const raised = await call('PATCH', `/v1/keys/${c.body.id}`, { body: { limit: { amount_micros: 3_000_000, period: 'month' } } });
    expect([raised.status, raised.body.limit]).toEqual([200, { amount_micros: 3_000_000, period: 'month' }]);
    expect(await check(c.body.key)).toBe('ALLOW');
    const removed = await call('PATCH', `/v1/keys/${c.body.id}`, { body: { limit: null } });
    expect([removed.status, removed.body.limit]).toEqual([200, null]);
  });
});

describe('auth and scope', () => {
  it('no token → 401; an API key → 401; a revoked token → 401', async () => {
    expect((await call('GET', `/v1/accounts/${ACCT}`, { token: null })).status).toBe(401);
    const k = await srv.console.createKey({ account: ACCT, name: 'api key' });
    const r = await call('GET', `/v1/accounts/${ACCT}`, { token: k.key });
    expect([r.status, errCode(r)]).toEqual([401, 'UNAUTHENTICATED']);
    expect(r.body.error.message).toMatch(/API key cannot call/);
    expect(JSON.stringify(r.body)).not.toContain(k.key);
    const t = await srv.console.createToken({ name: 'short-lived', account: null }, CLI_ACTOR);
    expect((await call('GET', '/v1/tokens', { token: t.token })).status).toBe(200);
    expect((await call('POST', `/v1/tokens/${t.record.id}/revoke`)).body.status).toBe('revoked');
    expect((await call('GET', '/v1/tokens', { token: t.token })).status).toBe(401);
  });

  it('the sidecar refuses a management token as INVALID_API_KEY', async () => {
    expect(await check(admin)).toBe('INVALID_API_KEY');
    expect(await check(owner)).toBe('INVALID_API_KEY');
  });

  it('an account-scoped token manages its own keys and sees nothing of other accounts', async () => {
    const mine = await call('POST', `/v1/accounts/${ACCT}/keys`, { token: owner, body: { name: 'mine' } });
    expect(mine.status).toBe(201);
    const theirs = await call('POST', `/v1/accounts/${OTHER}/keys`, { body: { name: 'theirs' } });
    const unknown = 'key_000000000000000000000000';
    const a = await call('GET', `/v1/keys/${theirs.body.id}`, { token: owner });
    const b = await call('GET', `/v1/keys/${unknown}`, { token: owner });
    expect(a.status).toBe(404);
    expect(a.body.error.message.replace(theirs.body.id, 'ID')).toBe(b.body.error.message.replace(unknown, 'ID'));
    for (const [m, p] of [
      ['POST', `/v1/keys/${theirs.body.id}/reveal`],
      ['POST', `/v1/keys/${theirs.body.id}/revoke`],
      ['POST', `/v1/keys/${theirs.body.id}/roll`],
      ['GET', `/v1/accounts/${OTHER}/keys`],
      ['GET', `/v1/accounts/${OTHER}`],
      ['GET', `/v1/audit?account=${OTHER}`],
    ] as const) {
      expect((await call(m, p, { token: owner })).status, `${m} ${p}`).toBe(404);
    }
    expect((await call('PATCH', `/v1/keys/${theirs.body.id}`, { token: owner, body: { name: 'x' } })).status).toBe(404);
    expect((await call('GET', `/v1/keys/${theirs.body.id}`)).body.status).toBe('active'); // untouched
    expect((await call('GET', `/v1/accounts/${ACCT}`, { token: owner })).body).toEqual({ id: ACCT, status: 'active', billing: 'metered', wallet: { enforced: false, balance_micros: 0, exists: false, rule: 'not-required' }, rate: null, token_rate: null, rate_use: { requests: null, tokens: null }, tokens: { today: { input: 0, output: 0 }, month: { input: 0, output: 0 } }, currency: 'USD', bare_models: PLAIN_NAMES_UNREAD });
    // Operator operations need an all-accounts token.
    for (const [m, p, body] of [
      ['POST', `/v1/accounts/${ACCT}/disable`, undefined],
      ['POST', `/v1/accounts/${ACCT}/enable`, undefined],
      ['GET', '/v1/tokens', undefined],
      ['POST', '/v1/tokens', { name: 'sneaky', account: null }],
      ['POST', `/v1/tokens/${ownerId}/revoke`, undefined],
      ['POST', `/v1/accounts/${ACCT}/credits`, { amount_micros: 1_000_000, reference: 'self-fund' }],
      ['POST', '/v1/usage', { key_id: mine.body.id, amount_micros: 1, request_id: 'r-1' }],
    ] as const) {
      const r = await call(m, p, { token: owner, body });
      expect([r.status, errCode(r)], `${m} ${p}`).toEqual([403, 'FORBIDDEN']);
    }
    // Its audit view is its own account's.
    const audit = await call('GET', '/v1/audit?limit=50', { token: owner });
    expect(audit.status).toBe(200);
    expect(audit.body.events.every((e: any) => e.account === ACCT)).toBe(true);
  });

  it('accounts: disable and enable (operator), and the sidecar follows', async () => {
    const acct = `dis-${randomBytes(4).toString('hex')}`;
    const k = await call('POST', `/v1/accounts/${acct}/keys`, { body: { name: 'k' } });
    const noWallet = { enforced: false, balance_micros: 0, exists: false, rule: 'not-required' };
    expect((await call('POST', `/v1/accounts/${acct}/disable`)).body).toEqual({ id: acct, status: 'disabled', billing: 'metered', wallet: noWallet, rate: null, token_rate: null, rate_use: { requests: null, tokens: null }, tokens: { today: { input: 0, output: 0 }, month: { input: 0, output: 0 } }, currency: 'USD', bare_models: PLAIN_NAMES_UNREAD });
    expect(await check(k.body.key)).toBe('USER_BLOCKED');
    expect((await call('GET', `/v1/accounts/${acct}`)).body.status).toBe('disabled');
    expect((await call('POST', `/v1/accounts/${acct}/enable`)).body).toEqual({ id: acct, status: 'active', billing: 'metered', wallet: noWallet, rate: null, token_rate: null, rate_use: { requests: null, tokens: null }, tokens: { today: { input: 0, output: 0 }, month: { input: 0, output: 0 } }, currency: 'USD', bare_models: PLAIN_NAMES_UNREAD });
    expect(await check(k.body.key)).toBe('ALLOW');
  });

  it('tokens: create over the API (shown once, digest only), list, revoke', async () => {
    const t = await call('POST', '/v1/tokens', { body: { name: 'pager', account: OTHER } });
    expect(t.status).toBe(201);
    expect(t.body).toMatchObject({ name: 'pager', scope: OTHER, status: 'active' });
    expect(t.body.token).toMatch(/^kgmt_[0-9A-Za-z]{38}$/);
    const list = await call('GET', '/v1/tokens');
    expect(list.body.tokens.map((x: any) => x.id)).toContain(t.body.id);
    expect(JSON.stringify(list.body)).not.toContain(t.body.token);
    const dump = JSON.stringify(await Promise.all((await stack.redis.client().keys('*')).map(async (k) => [k, await stack.redis.client().type(k)])));
    expect(dump).not.toContain(t.body.token);
    expect((await call('POST', `/v1/tokens/${t.body.id}/revoke`)).body.status).toBe('revoked');
  });
});

describe('audit', () => {
  it('records every change and reveal with actor and changes, newest first, never key material', async () => {
    const acct = `aud-${randomBytes(4).toString('hex')}`;
    const c = await call('POST', `/v1/accounts/${acct}/keys`, { body: { name: 'audited' } });
    await call('POST', `/v1/keys/${c.body.id}/reveal`);
    await call('PATCH', `/v1/keys/${c.body.id}`, { body: { expires_at: null } });
    const rolled = await call('POST', `/v1/keys/${c.body.id}/roll`);
    await call('POST', `/v1/keys/${rolled.body.id}/revoke`);
    await call('POST', `/v1/accounts/${acct}/disable`);
    await call('POST', `/v1/accounts/${acct}/enable`);
    await srv.console.createKey({ account: acct, name: 'from cli' }, CLI_ACTOR);
    const r = await call('GET', `/v1/audit?account=${acct}&limit=20`);
    expect(r.status).toBe(200);
    expect(r.body.events.map((e: any) => e.action)).toEqual(['create', 'enable', 'disable', 'revoke', 'roll', 'update', 'reveal', 'create']);
    const [cli, ...rest] = r.body.events;
    expect(cli.actor).toEqual({ type: 'cli', id: null, name: null });
    expect(rest[0].actor).toMatchObject({ type: 'token', name: 'ops' });
    expect(rest.find((e: any) => e.action === 'roll')).toMatchObject({ key_id: c.body.id, changes: { rolled_to: rolled.body.id, grace_seconds: 0 } });
    expect(Date.parse(cli.time)).toBeGreaterThan(Date.now() - 60_000);
    const text = JSON.stringify(r.body);
    expect(text).not.toContain(c.body.key);
    expect(text).not.toContain(rolled.body.key);
    expect((await call('GET', `/v1/audit?account=${acct}&limit=2`)).body.events).toHaveLength(2);
    expect((await call('GET', `/v1/audit?limit=0`)).status).toBe(400);
  });
});

describe('bad input: the right status, the field named, nothing changed', () => {
  const cases: [string, string, string, unknown, number, RegExp][] = [
    ['unknown field', 'POST', 'ACCT/keys', { name: 'x', owner: 'me' }, 400, /unknown field "owner"/],
    ['wrong type', 'POST', 'ACCT/keys', { name: 42 }, 400, /body\.name/],
    ['bad model', 'POST', 'ACCT/keys', { name: 'x', models: ['open ai/*'] }, 400, /model pattern/],
    ['empty models', 'POST', 'ACCT/keys', { name: 'x', models: [] }, 400, /body\.models/],
    ['bad date', 'POST', 'ACCT/keys', { name: 'x', expires_at: '2026-02-30' }, 400, /calendar/],
    ['date without zone', 'POST', 'ACCT/keys', { name: 'x', expires_at: '2999-01-01T10:00:00' }, 400, /body\.expires_at/],
    ['past date', 'POST', 'ACCT/keys', { name: 'x', expires_at: '2001-01-01' }, 400, /not in the future/],
    ['limit: bad period', 'POST', 'ACCT/keys', { name: 'x', limit: { amount_micros: 5, period: 'year' } }, 400, /body\.limit\.period/],
    ['limit: zero amount', 'POST', 'ACCT/keys', { name: 'x', limit: { amount_micros: 0, period: 'day' } }, 400, /body\.limit\.amount_micros/],
    ['limit as a decimal string', 'POST', 'ACCT/keys', { name: 'x', limit: { amount_micros: '5', period: 'day' } }, 400, /body\.limit\.amount_micros/],
    ['blank name', 'POST', 'ACCT/keys', { name: '   ' }, 400, /name must not be empty/],
  ];
  for (const [what, method, path, body, status, msg] of cases) {
    it(what, async () => {
      const acct = `bad-${randomBytes(4).toString('hex')}`;
      const r = await call(method, `/v1/accounts/${path.replace('ACCT', acct)}`, { body });
      expect([r.status, errCode(r)]).toEqual([status, 'INVALID_INPUT']);
      expect(r.body.error.message).toMatch(msg);
      expect((await call('GET', `/v1/accounts/${acct}/keys`)).body.keys).toEqual([]);
    });
  }

  it('bad ids, bad JSON, empty patch, conflicting grace, oversize body, unknown route', async () => {
    expect(errCode(await call('GET', '/v1/keys/nope'))).toBe('INVALID_INPUT');
    expect((await call('GET', '/v1/keys/nope')).body.error.message).toMatch(/params\.id/);
    expect((await call('GET', '/v1/accounts/-bad-/keys')).status).toBe(400);
    expect((await call('POST', `/v1/accounts/${ACCT}/keys`, { raw: '{"name":' })).status).toBe(400);
    const k = await call('POST', `/v1/accounts/${ACCT}/keys`, { body: { name: 'patchme' } });
    expect((await call('PATCH', `/v1/keys/${k.body.id}`, { body: {} })).status).toBe(400);
    expect((await call('POST', `/v1/keys/${k.body.id}/roll`, { body: { grace_seconds: -1 } })).status).toBe(400);
    expect((await call('POST', `/v1/keys/${k.body.id}/roll`, { body: { grace_seconds: 1.5 } })).status).toBe(400);
    const big = await call('POST', `/v1/accounts/${ACCT}/keys`, { raw: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }) });
    expect([big.status, errCode(big)]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
    expect((await call('POST', `/v1/accounts/${ACCT}/keys`, { raw: 'name=x', headers: { 'content-type': 'text/plain' } })).status).toBe(415);
    const nf = await call('GET', '/v1/nothing');
    expect([nf.status, errCode(nf)]).toEqual([404, 'NOT_FOUND']);
    expect((await call('GET', `/v1/keys/${k.body.id}`)).body.name).toBe('patchme');
  });
});

describe('operations', () => {
  it('/healthz, /readyz, /metrics by route and status', async () => {
    expect((await call('GET', '/healthz', { token: null })).body).toEqual({ status: 'ok' });
    expect((await call('GET', '/readyz', { token: null })).status).toBe(200);
    const m = await call('GET', '/metrics', { token: null });
    expect(m.status).toBe(200);
    expect(m.body).toMatch(/keygate_console_requests_total\{method="GET",route="\/v1\/keys\/:id",status="200"\} \d+/);
    expect(m.body).not.toMatch(/key_[0-9A-Za-z]{24}/);
  });

  it('the OpenAPI 3.1 document is valid and lists exactly the routes the server answers', async () => {
    const doc = (await call('GET', '/openapi.json', { token: null })).body;
    expect(doc.openapi).toBe('3.1.0');
    const v = new Validator();
    const res = await v.validate(doc);
    expect(res.errors ?? []).toEqual([]);
    expect(res.valid).toBe(true);
    const documented = new Set<string>();
    for (const [p, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const m of Object.keys(ops)) documented.add(`${m.toUpperCase()} ${p}`);
    }
    const served = new Set<string>();
    for (const r of routesOf(srv)) served.add(r);
    expect([...documented].sort()).toEqual([...served].sort());
    expect(doc.paths['/v1/accounts/{account}/keys'].post.requestBody.content['application/json'].schema.additionalProperties).toBe(false);
  });
});

/** Every method and path the server answers, OpenAPI-style (`{param}`). */
function routesOf(s: ConsoleServer): string[] {
  return s.routes.map((r) => `${r.method} ${r.url.replace(/:(\w+)/g, '{$1}')}`);
}

describe('behind a proxy: X-Forwarded-For only when trusted; the rate limit before authentication is per client', () => {
  async function hammer(trustProxy: string): Promise<number[]> {
    const config = loadConsoleApiConfig({ port: 0, redisUrl: stack.redis.url }, { KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_CONSOLE_RATE_LIMIT: '3', KEYGATE_CONSOLE_TRUST_PROXY: trustProxy });
    const s = await startConsole(config, createLogger('silent'));
    try {
      const out: number[] = [];
      for (let i = 0; i < 5; i++) {
        // Unauthenticated: per address (an authenticated request counts against its token instead).
        const res = await fetch(`http://127.0.0.1:${s.port}/v1/accounts/${ACCT}`, { headers: { authorization: 'Bearer kgmt_unknown', 'x-forwarded-for': `203.0.113.${i}` } });
        out.push(res.status);
        if (res.status === 429) expect(await res.json()).toMatchObject({ error: { code: 'RATE_LIMITED' } });
      }
      return out;
    } finally {
      await s.close();
    }
  }

  it('untrusted: every request is the socket peer, so the fourth is 429', async () => {
    expect(await hammer('false')).toEqual([401, 401, 401, 429, 429]);
  });

  it('trusted (one hop): each forwarded client has its own budget', async () => {
    expect(await hammer('1')).toEqual([401, 401, 401, 401, 401]);
  });

  it('a bad trust setting stops the start with one line naming it', () => {
    expect(() => loadConsoleApiConfig({}, { KEYGATE_CONSOLE_TRUST_PROXY: 'sometimes' })).toThrow(/KEYGATE_CONSOLE_TRUST_PROXY/);
  });
});
