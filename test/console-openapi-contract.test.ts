/**
 * The OpenAPI document against the server: for every operation the document lists, requests are
 * generated from the document (its paths, parameters, bodies and `x-body-limit-bytes`) and sent to a
 * real console on a real redis-server. Every answer must be one the document lists for that
 * operation, in the error shape it documents; every status it lists must be produced by some probe
 * (except 429 and 500, which need a rate-limited server or a corrupt record); the store stopped,
 * every operation answers the API's own 503.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { MAX_MEMBERS } from '../src/console/members.ts';
import { eventsSchema } from '../src/schema/events.ts';
import { MAX_PRICES, pricesKey } from '../src/schema/prices.ts';
import { callApi, startTestConsole, type ApiCallOptions, type ApiResponse } from './helpers/console-api.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

let redis: RedisServer;
let srv: ConsoleServer;
let base: string;
let admin: string;
let owner: string;
let doc: any;
const MINE = `mine-${randomBytes(4).toString('hex')}`;
const OTHER = `other-${randomBytes(4).toString('hex')}`;
const UNKNOWN_KEY = `key_${'Q'.repeat(24)}`;
const UNKNOWN_TOKEN = `tok_${'Q'.repeat(24)}`;
const UNKNOWN_WEBHOOK = `wh_${'Q'.repeat(20)}`;
const UNKNOWN_MEMBER = `mem_${'Q'.repeat(16)}`;
const UNKNOWN_EVENT = 'evt_1_1_00000000';
/** A model without a price (a new one each time: a PUT probe prices the one it names). */
const unknownModel = () => `no-such-model-${randomBytes(4).toString('hex')}`;
/** A webhook URL the server takes without resolving it (public host; delivery never runs here). */
// a public literal: a name is resolved at creation, and this machine may have no DNS (example.com's documentation address)
const HOOK_URL = 'https://93.184.216.34/keygate';

interface Op {
  readonly method: string;
  readonly path: string;
  readonly id: string;
  readonly documented: Set<number>;
  readonly bodyLimit: number | undefined;
  readonly hasBody: boolean;
  readonly hasQuery: boolean;
  /** Authenticated by an API key (GET /v1/key), not a management token. */
  readonly byKey: boolean;
}
let ops: Op[];
/** Statuses each operation was seen to answer. */
const seen = new Map<string, Set<number>>();

beforeAll(async () => {
  redis = await startRedis();
  ({ srv, base, admin, owner } = await startTestConsole(redis.url, MINE));
  doc = (await callApi(base, 'GET', '/openapi.json')).body;
  ops = [];
  for (const [path, methods] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(methods)) {
      if (op.tags?.includes('operations')) continue;
      ops.push({
        method: method.toUpperCase(),
        path,
        id: op.operationId ?? `${method} ${path}`,
        documented: new Set(Object.keys(op.responses ?? {}).map(Number)),
        bodyLimit: op['x-body-limit-bytes'],
        hasBody: op.requestBody !== undefined,
        hasQuery: (op.parameters ?? []).some((p: { in: string }) => p.in === 'query'),
        byKey: (op.security ?? []).some((s: Record<string, unknown>) => 'apiKey' in s),
      });
    }
  }
}, 60_000);

afterAll(async () => {
  await srv?.close();
  if (redis) await destroyRedis(redis);
});

/** A valid body per operation with a request body (the test fails for an operation missing here). */
const BODIES: Record<string, (k: Keys) => unknown> = {
  createKey: () => ({ name: 'contract' }),
  updateKey: () => ({ name: 'renamed' }),
  updateAccount: () => ({ rate: { requests: 100, per: 'second' }, token_rate: null }),
  rollKey: () => ({}),
  creditAccount: () => ({ amount_micros: 5, reference: `ref-${randomBytes(4).toString('hex')}` }),
  recordUsage: (k) => ({ key_id: k.key, amount_micros: 1, request_id: `req-${randomBytes(4).toString('hex')}` }),
  createToken: () => ({ name: 'contract', account: MINE }),
  createWebhook: (k) => ({ url: HOOK_URL, account: k.account }),
  setAccountAlerts: () => ({ wallet_low_micros: 1_000 }),
  setPrice: () => ({ input_micros: 150_000, output_micros: 600_000 }),
  setCredential: () => ({ secret: `sk-contract-${randomBytes(8).toString('hex')}` }),
  'post /session': () => ({ token: owner }),
  addMember: () => ({ email: `m-${randomBytes(4).toString('hex')}@example.com`, role: 'viewer' }),
  updateMember: () => ({ role: 'developer' }),
};

interface Keys {
  readonly key: string;
  /** The key's plaintext (GET /v1/key authenticates with it). */
  readonly plaintext?: string;
  readonly token: string;
  readonly account: string;
  readonly webhook?: string;
  /** A dead letter of the webhook. */
  readonly event?: string;
  /** A member of the account (the members routes). */
  readonly member?: string;
  /** A model with a price. */
  readonly model?: string;
}

/** A key and a token on the account; for a webhook route also a webhook with one dead letter (at most 20 webhooks an account). */
async function fresh(account = MINE, op?: Op): Promise<Keys> {
  const created = await srv.console.createKey({ account, name: 'probe' }, CLI_ACTOR);
  if (op?.path.includes('/members/')) {
    const member = (await srv.console.members.add(account, { email: `p-${randomBytes(4).toString('hex')}@example.com` }, 'viewer', CLI_ACTOR)).id;
    return { key: created.id, plaintext: created.key, token: '', account, member };
  }
  const token = (await srv.console.createToken({ name: 'probe', account }, CLI_ACTOR)).record.id;
  if (op?.path.startsWith('/v1/prices/')) {
    const model = `probe-${randomBytes(4).toString('hex')}`;
    await srv.console.setPrice(model, { input: 1, output: 1 }, CLI_ACTOR);
    return { key: created.id, plaintext: created.key, token, account, model };
  }
  // The credential routes: one credential on the account, for a valid DELETE to remove.
  if (op?.path.includes('/credentials/')) await srv.console.setCredential(account, 'openai', `sk-probe-${randomBytes(8).toString('hex')}`, CLI_ACTOR);
  if (!op?.path.startsWith('/v1/webhooks/')) return { key: created.id, plaintext: created.key, token, account };
  const webhook = (await srv.console.createWebhook({ url: HOOK_URL, account }, undefined, { allowPrivate: false })).endpoint.id;
  const event = `evt_${Date.now()}_1_${randomBytes(4).toString('hex')}`;
  const dead = { event: { id: event, type: 'key.created', created_at: new Date().toISOString(), account, data: {} }, attempts: 8, last_error: 'HTTP 500', dead_at: Date.now() };
  await redis.client().lpush(eventsSchema(srv.console.schema.ns).dead(webhook), JSON.stringify(dead));
  return { key: created.id, plaintext: created.key, token, account, webhook, event };
}

function fill(path: string, k: Keys): string {
  return path
    .replace('{account}', k.account)
    .replace('{event_id}', k.event ?? UNKNOWN_EVENT)
    .replace('{model}', k.model ?? unknownModel())
    .replace('{provider}', 'openai')
    .replace('{id}', path.startsWith('/v1/tokens') ? k.token : path.startsWith('/v1/webhooks') ? (k.webhook ?? UNKNOWN_WEBHOOK) : path.includes('/members/') ? (k.member ?? UNKNOWN_MEMBER) : k.key);
}

/** The credential of a valid request: the key itself for GET /v1/key, else the management token given. */
const credential = (op: Op, k: Keys, token: string) => (op.byKey ? k.plaintext! : token);

function query(op: Op, account: string): string {
  if (op.id === 'exportUsage') return `?since=${new Date(Date.now() - 3600_000).toISOString()}&account=${account}`;
  if (op.id === 'listAudit') return `?account=${account}`;
  if (op.id === 'summarizeUsage') return `?since=${new Date(Date.now() - 3600_000).toISOString()}`;
  return '';
}

async function probe(op: Op, path: string, opts: ApiCallOptions, what: string): Promise<ApiResponse> {
  const r = await callApi(base, op.method, path, opts);
  if (!seen.has(op.id)) seen.set(op.id, new Set());
  seen.get(op.id)!.add(r.status);
  expect(op.documented.has(r.status), `${op.id} (${what}) answered ${r.status}, not in its document: ${JSON.stringify(r.body).slice(0, 200)}`).toBe(true);
  if (r.status >= 400) {
    expect(r.body, `${op.id} (${what})`).toMatchObject({ error: { code: expect.any(String), message: expect.any(String) } });
    // Nothing beyond what the document shows for that answer.
    const props = Object.keys(doc.paths[op.path][op.method.toLowerCase()].responses[r.status].content?.['application/json']?.schema?.properties ?? { error: 1 });
    expect(Object.keys(r.body).filter((p) => !props.includes(p)), `${op.id} (${what})`).toEqual([]);
  }
  return r;
}

const valid = (op: Op, k: Keys) => (op.hasBody ? BODIES[op.id] ?? BODIES[`${op.method.toLowerCase()} ${op.path}`] : undefined)?.(k);
const isV1 = (op: Op) => op.path.startsWith('/v1/');

describe('the OpenAPI document predicts every answer', () => {
  it('lists every operation with a body in the table of valid bodies, and a body limit for each', () => {
    for (const op of ops.filter((o) => o.hasBody)) {
      expect(BODIES[op.id] ?? BODIES[`${op.method.toLowerCase()} ${op.path}`], op.id).toBeDefined();
    }
    for (const op of ops.filter((o) => o.method !== 'GET')) expect(op.bodyLimit, op.id).toBeGreaterThan(0);
    expect(ops.length).toBeGreaterThan(15);
  });

  it('valid requests, no token, bad parameters, bad bodies, oversize and non-JSON bodies', async () => {
    for (const op of ops) {
      const k = await fresh(MINE, op);
      const path = fill(op.path, k) + query(op, k.account);
      const body = valid(op, k);
      const headers = op.path === '/session' ? { origin: base } : undefined;
      // Valid, as the all-accounts token (or the key, for the key's own route).
      await probe(op, path, { token: credential(op, k, admin), body, headers }, 'valid');
      if (!isV1(op)) continue;
      await probe(op, path, { token: null, body }, 'no token');
      await probe(op, path, { token: 'kgmt_notatoken', body }, 'bad token');
      if (op.path.includes('{')) await probe(op, op.path.replace(/\{\w+\}/g, 'bad%20id!') + query(op, k.account), { token: admin, body }, 'bad parameter');
      if (op.hasBody) await probe(op, path, { token: admin, body: { unknown_field: 1 } }, 'unknown field');
      if (op.hasQuery) await probe(op, `${path}${path.includes('?') ? '&' : '?'}unknown_param=1`, { token: admin, body }, 'unknown query parameter');
      if (op.method !== 'GET') {
        await probe(op, path, { token: admin, raw: 'x'.repeat(op.bodyLimit! + 1), headers: { 'content-type': 'application/json' } }, 'one byte over the limit');
        await probe(op, path, { token: admin, raw: 'hello', headers: { 'content-type': 'text/plain' } }, 'text/plain');
      }
    }
  }, 120_000);

  it('scope: an account-scoped token on another account, unknown ids, operator routes', async () => {
    for (const op of ops.filter(isV1)) {
      const theirs = await fresh(OTHER, op);
      const path = fill(op.path, theirs) + query(op, OTHER);
      await probe(op, path, { token: owner, body: valid(op, theirs) }, "another account's");
      const unknown = { key: UNKNOWN_KEY, token: UNKNOWN_TOKEN, account: OTHER, webhook: UNKNOWN_WEBHOOK, event: UNKNOWN_EVENT };
      await probe(op, fill(op.path, unknown) + query(op, OTHER), { token: admin, body: valid(op, unknown) }, 'unknown ids');
    }
  }, 120_000);

  it('a web session without its CSRF token: 403 on every change', async () => {
    const signIn = await callApi(base, 'POST', '/session', { body: { token: owner }, headers: { origin: base } });
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    for (const op of ops.filter((o) => isV1(o) && o.method !== 'GET')) {
      const k = await fresh(MINE, op);
      await probe(op, fill(op.path, k), { token: null, body: valid(op, k), headers: { cookie, origin: base } }, 'no CSRF token');
    }
    const sessionOp = ops.find((o) => o.path === '/session' && o.method === 'POST')!;
    await probe(sessionOp, '/session', { token: null, body: { token: owner } }, 'no Origin');
    await probe(sessionOp, '/session', { token: null, body: { token: 'kgmt_nope' }, headers: { origin: base } }, 'bad token');
    await probe(sessionOp, '/session', { token: null, body: { nope: 1 }, headers: { origin: base } }, 'bad body');
    await probe(sessionOp, '/session', { token: null, raw: 'x'.repeat(sessionOp.bodyLimit! + 1), headers: { origin: base, 'content-type': 'application/json' } }, 'oversize');
    await probe(sessionOp, '/session', { token: null, raw: 'x', headers: { origin: base, 'content-type': 'text/plain' } }, 'text/plain');
    const del = ops.find((o) => o.path === '/session' && o.method === 'DELETE')!;
    await probe(del, '/session', { token: null, headers: { cookie } }, 'no CSRF token');
    await probe(del, '/session', { token: null, raw: 'x'.repeat(del.bodyLimit! + 1), headers: { 'content-type': 'application/json' } }, 'oversize');
    await probe(del, '/session', { token: null, raw: 'x', headers: { 'content-type': 'text/plain' } }, 'text/plain');
  }, 60_000);

  it('conflicts and limits: 409 and 422 where documented', async () => {
    const byId = (id: string) => ops.find((o) => o.id === id)!;
    const a = `full-${randomBytes(4).toString('hex')}`;
    for (let i = 0; i < 99; i++) await srv.console.createKey({ account: a, name: `k${i}` }, CLI_ACTOR);
    const k = await fresh(a); // the 100th
    await probe(byId('createKey'), `/v1/accounts/${a}/keys`, { token: admin, body: { name: 'over' } }, 'at the cap');
    const idem = { 'idempotency-key': 'contract-idem' };
    await probe(byId('createKey'), `/v1/accounts/${MINE}/keys`, { token: admin, body: { name: 'a' }, headers: idem }, 'first');
    await probe(byId('createKey'), `/v1/accounts/${MINE}/keys`, { token: admin, body: { name: 'b' }, headers: idem }, 'same key, other body');
    await probe(byId('rollKey'), `/v1/keys/${k.key}/roll`, { token: admin, body: { grace_seconds: 60 } }, 'at the cap with a grace');
    await srv.console.revokeKey(k.key, CLI_ACTOR);
    for (const id of ['updateKey', 'revealKey', 'rollKey']) await probe(byId(id), fill(byId(id).path, k), { token: admin, body: valid(byId(id), k) }, 'revoked');
    const u = await fresh();
    const first = { key_id: u.key, amount_micros: 5, request_id: 'contract-req' };
    await probe(byId('recordUsage'), '/v1/usage', { token: admin, body: first }, 'first');
    await probe(byId('recordUsage'), '/v1/usage', { token: admin, body: { ...first, amount_micros: 6 } }, 'same id, other amount');
    const db = redis.client();
    const s = srv.console.schema;
    await db.hset(s.keySpend(MINE, u.key), 'total', String(Number.MAX_SAFE_INTEGER - 1));
    await probe(byId('recordUsage'), '/v1/usage', { token: admin, body: { ...first, request_id: 'contract-range' } }, 'total out of range');
    await db.hset(s.wallet(MINE), 'balance', String(Number.MAX_SAFE_INTEGER - 1));
    await probe(byId('creditAccount'), `/v1/accounts/${MINE}/credits`, { token: admin, body: { amount_micros: 5, reference: 'contract-range' } }, 'balance out of range');
    await db.del(s.wallet(MINE));
    // Webhooks: an all-accounts webhook needs an all-accounts token; at most 20 an account.
    await probe(byId('createWebhook'), '/v1/webhooks', { token: owner, body: { url: HOOK_URL, account: null } }, 'all accounts, scoped token');
    const w = `hooks-${randomBytes(4).toString('hex')}`;
    for (let i = 0; i < 20; i++) await srv.console.createWebhook({ url: HOOK_URL, account: w }, undefined, { allowPrivate: false });
    await probe(byId('createWebhook'), '/v1/webhooks', { token: admin, body: { url: HOOK_URL, account: w } }, 'at the cap');
    // The price table at its size bound: a new model is refused, a priced one still changes.
    const prices = pricesKey(s.ns);
    const filler = db.pipeline();
    for (let i = (await db.hlen(prices)); i < MAX_PRICES; i++) filler.hset(prices, `filler-${i}`, '{"input":1,"output":1}');
    await filler.exec();
    await probe(byId('setPrice'), '/v1/prices/one-too-many', { token: admin, body: valid(byId('setPrice'), u) }, 'table full');
    await db.del(prices);
    // Members: one membership per email; at most MAX_MEMBERS an account.
    const m = `members-${randomBytes(4).toString('hex')}`;
    await probe(byId('addMember'), `/v1/accounts/${m}/members`, { token: admin, body: { email: 'twice@example.com', role: 'owner' } }, 'first');
    await probe(byId('addMember'), `/v1/accounts/${m}/members`, { token: admin, body: { email: 'twice@example.com', role: 'viewer' } }, 'the same email again');
    for (let i = 1; i < MAX_MEMBERS; i++) await srv.console.members.add(m, { subject: `s-${i}` }, 'viewer', CLI_ACTOR);
    await probe(byId('addMember'), `/v1/accounts/${m}/members`, { token: admin, body: { email: 'one-too-many@example.com', role: 'viewer' } }, 'at the cap');
  }, 60_000);

  it('every documented status was answered by some probe (but 429, 500, 503: next test)', () => {
    for (const op of ops) {
      const missing = [...op.documented].filter((c) => ![429, 500, 503].includes(c) && !seen.get(op.id)?.has(c));
      expect([op.id, missing]).toEqual([op.id, []]);
    }
  });

  it('the store stopped: every operation answers 503 in the API error shape', async () => {
    const k = await fresh();
    await redis.stop();
    try {
      const answers = await Promise.all(
        // Without a session cookie the session routes read nothing from the store.
        ops.filter((op) => !(op.path === '/session' && op.method !== 'POST')).map(async (op) => {
          const headers = op.path === '/session' ? { origin: base } : undefined;
          const r = await callApi(base, op.method, fill(op.path, k) + query(op, k.account), { token: admin, body: valid(op, k), headers });
          return { op, r };
        }),
      );
      for (const { op, r } of answers) {
        expect([op.id, r.status], JSON.stringify(r.body)).toEqual([op.id, 503]);
        expect(op.documented.has(503), op.id).toBe(true);
        expect(r.body).toEqual({ error: { code: 'STORE_UNAVAILABLE', message: expect.any(String) } });
      }
    } finally {
      await redis.start();
      // The restarted store is empty (no persistence): the fixture's tokens are made again.
      admin = (await srv.console.createToken({ name: 'ops', account: null }, CLI_ACTOR)).token;
      owner = (await srv.console.createToken({ name: 'owner page', account: MINE }, CLI_ACTOR)).token;
    }
  }, 60_000);
});

describe('the document and the server agree on limits', () => {
  it("every route's body limit is exact: a body of exactly x-body-limit-bytes is not refused for its size, one byte more is 413", async () => {
    const limited = ops.filter((o) => o.bodyLimit !== undefined);
    expect(limited.map((o) => o.id)).toEqual(ops.filter((o) => o.method !== 'GET').map((o) => o.id));
    const a = `edge-${randomBytes(4).toString('hex')}`;
    for (const op of limited) {
      const k = await fresh(a, op);
      const path = fill(op.path, k) + query(op, k.account);
      const headers = { 'content-type': 'application/json', ...(op.path === '/session' ? { origin: base } : {}) };
      const token = op.path === '/session' ? null : credential(op, k, admin);
      // A valid body (or {}) padded with JSON whitespace to the byte: only its size differs.
      const json = JSON.stringify(valid(op, k) ?? {});
      const padded = (n: number) => json + ' '.repeat(n - Buffer.byteLength(json));
      const at = await probe(op, path, { token, raw: padded(op.bodyLimit!), headers }, 'exactly the limit');
      expect([op.id, at.status], JSON.stringify(at.body).slice(0, 200)).not.toEqual([op.id, 413]);
      const over = await probe(op, path, { token, raw: padded(op.bodyLimit! + 1), headers }, 'one byte over the limit');
      expect([op.id, over.status, over.body.error.code]).toEqual([op.id, 413, 'PAYLOAD_TOO_LARGE']);
      // The answer names the route's own limit (a sign-in's is smaller than the API's).
      expect(over.body.error.message, op.id).toBe(`request body is larger than ${op.bodyLimit} bytes`);
    }
  }, 120_000);

  it("a key name: the document's maxLength is accepted (in characters), one more is refused naming body.name", async () => {
    const schema = doc.paths['/v1/accounts/{account}/keys'].post.requestBody.content['application/json'].schema;
    const max = schema.properties.name.maxLength as number;
    expect(max).toBe(128);
    const ok = await callApi(base, 'POST', `/v1/accounts/${MINE}/keys`, { token: admin, body: { name: '😀'.repeat(max) } });
    expect(ok.status).toBe(201);
    const over = await callApi(base, 'POST', `/v1/accounts/${MINE}/keys`, { token: admin, body: { name: 'n'.repeat(max + 1) } });
    expect([over.status, over.body.error.code]).toEqual([400, 'INVALID_INPUT']);
    expect(over.body.error.message).toMatch(/^body\.name: /);
    const patched = await callApi(base, 'PATCH', `/v1/keys/${ok.body.id}`, { token: admin, body: { name: 'x'.repeat(max + 1) } });
    expect(patched.body.error.message).toMatch(/^body\.name: /);
  });

  it('an impossible date names expires_at, on create and on PATCH', async () => {
    const k = await fresh();
    for (const date of ['2031-02-30', '2031-13-01', '2031-01-01T25:00:00Z']) {
      const p = await callApi(base, 'PATCH', `/v1/keys/${k.key}`, { token: admin, body: { expires_at: date } });
      expect([p.status, p.body.error.code, p.body.error.message]).toEqual([400, 'INVALID_INPUT', 'body.expires_at: is not a real calendar date and time']);
      const c = await callApi(base, 'POST', `/v1/accounts/${MINE}/keys`, { token: admin, body: { name: 'n', expires_at: date } });
      expect(c.body.error.message).toBe('body.expires_at: is not a real calendar date and time');
    }
  });

  it('an unknown field and a body that is not JSON: 400 naming them, told by the error kind, not its text', async () => {
    const path = `/v1/accounts/${MINE}/keys`;
    const one = await callApi(base, 'POST', path, { token: admin, body: { name: 'n', bogus: 1 } });
    expect([one.status, one.body.error.code, one.body.error.message]).toEqual([400, 'INVALID_INPUT', 'body: unknown field "bogus"']);
    const two = await callApi(base, 'POST', path, { token: admin, body: { name: 'n', b1: 1, b2: 2 } });
    expect(two.body.error.message).toBe('body: unknown field "b1", "b2"');
    const nested = await callApi(base, 'POST', path, { token: admin, body: { name: 'n', limit: { amount_micros: 1, period: 'day', x: 1 } } });
    expect(nested.body.error.message).toBe('body.limit: unknown field "x"');
    const broken = await callApi(base, 'POST', path, { token: admin, raw: '{"name": ' });
    expect([broken.status, broken.body.error.code, broken.body.error.message]).toEqual([400, 'INVALID_INPUT', 'body: not valid JSON']);
  });
});
