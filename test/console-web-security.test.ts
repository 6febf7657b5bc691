/**
 * The web console plugin's security, over real sockets and a real redis-server: security headers
 * and CSP, the page free of inline code, cookie flags, CSRF and Origin refusals, session expiry,
 * sign-out, and a revoked token ending its sessions. The plugin checks tokens through its
 * `TokenDirectory`: the first suites give it a small in-memory directory (to play expiry and
 * revocation exactly); the last runs it inside the real `keygate console` with its token store.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleWebPlugin, DEFAULT_STATIC_ROOT, type TokenInfo } from '../src/console-web/plugin.ts';
import { CLI_ACTOR } from '../src/console/management.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startWebConsole, type WebConsole } from './helpers/web-console.ts';

const OWNER_TOKEN = 'kgm_owner_0123456789abcdefghijklmnopqrstuv';
const OPERATOR_TOKEN = 'kgm_operator_0123456789abcdefghijklmnopqrs';

interface Harness {
  app: FastifyInstance;
  base: string;
  tokens: Map<string, TokenInfo>;
  logs: string[];
}

async function startApp(redis: Redis, opts: { sessionTtlMs?: number; trustProxy?: boolean; publicOrigin?: string } = {}): Promise<Harness> {
  const tokens = new Map<string, TokenInfo>([
    [OWNER_TOKEN, { id: 'tok_owner', name: 'owner', account: 'acct-1' }],
    [OPERATOR_TOKEN, { id: 'tok_operator', name: 'ops', account: null }],
  ]);
  const logs: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const app = Fastify({ logger: { level: 'info', stream }, trustProxy: opts.trustProxy ?? false });
  await app.register(consoleWebPlugin, {
    redis,
    namespace: 'kgtest',
    sessionTtlMs: opts.sessionTtlMs,
    publicOrigin: opts.publicOrigin,
    tokens: {
      verify: async (t) => tokens.get(t) ?? null,
      byId: async (id) => [...tokens.values()].find((t) => t.id === id) ?? null,
    },
  });
  // A stand-in for a management API route: authenticated by the session like the console's own.
  const guarded = async (req: import('fastify').FastifyRequest, reply: import('fastify').FastifyReply) => {
    const auth = await app.webSessionAuth(req);
    if (auth.kind === 'none') return reply.code(401).send({ error: { code: 'UNAUTHENTICATED', message: 'no credentials' } });
    if (auth.kind === 'refused') return reply.code(auth.status).send({ error: { code: auth.code, message: auth.message } });
    return { account: auth.principal.account, token_id: auth.principal.token.id };
  };
  app.get('/v1/whoami', guarded);
  app.post('/v1/whoami', guarded);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { app, base: `http://127.0.0.1:${port}`, tokens, logs };
}

interface Signed {
  cookie: string;
  csrf: string;
  setCookie: string;
}

async function signIn(h: Harness, token = OWNER_TOKEN, headers: Record<string, string> = {}): Promise<Signed> {
  const res = await fetch(`${h.base}/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: h.base, ...headers },
    body: JSON.stringify({ token }),
  });
  expect(res.status).toBe(200);
  const setCookie = res.headers.get('set-cookie') ?? '';
  const body = (await res.json()) as { csrf_token: string };
  return { cookie: setCookie.split(';')[0]!, csrf: body.csrf_token, setCookie };
}

const post = (h: Harness, path: string, headers: Record<string, string>, body: unknown = {}) =>
  fetch(`${h.base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

let redis: RedisServer;
let db: Redis;
let h: Harness;

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  h = await startApp(db);
});

afterAll(async () => {
  await h?.app.close();
  await destroyRedis(redis);
});

describe('security headers', () => {
  const CSP = "default-src 'self';script-src 'self';style-src 'self';img-src 'self';font-src 'self';connect-src 'self';object-src 'none';base-uri 'none';form-action 'self';frame-ancestors 'none'";

  it('the page, its assets and the API answers carry a strict CSP and the usual headers', async () => {
    const html = await fetch(`${h.base}/`);
    expect(html.status).toBe(200);
    const page = await html.text();
    const assets = [...page.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.some((a) => a.endsWith('.js'))).toBe(true);
    for (const path of ['/', ...assets, '/session', '/v1/whoami']) {
      const res = await fetch(`${h.base}${path}`);
      const hd = res.headers;
      expect(hd.get('content-security-policy'), path).toBe(CSP);
      expect(hd.get('x-frame-options'), path).toBe('DENY');
      expect(hd.get('x-content-type-options'), path).toBe('nosniff');
      expect(hd.get('referrer-policy'), path).toBe('no-referrer');
      expect(hd.get('cross-origin-opener-policy'), path).toBe('same-origin');
      expect(hd.get('cross-origin-resource-policy'), path).toBe('same-origin');
      expect(hd.get('strict-transport-security'), path).toMatch(/max-age=\d+/);
      expect(hd.get('permissions-policy'), path).toContain('camera=()');
      expect(hd.get('x-powered-by'), path).toBeNull();
    }
  });

  it('caches only the fingerprinted assets; the page and every API answer are no-store or no-cache', async () => {
    expect((await fetch(`${h.base}/`)).headers.get('cache-control')).toBe('no-cache');
    expect((await fetch(`${h.base}/session`)).headers.get('cache-control')).toBe('no-store');
    expect((await fetch(`${h.base}/v1/whoami`)).headers.get('cache-control')).toBe('no-store');
    const page = await (await fetch(`${h.base}/`)).text();
    const js = /src="(\/assets\/[^"]+\.js)"/.exec(page)![1]!;
    expect((await fetch(`${h.base}${js}`)).headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  });

  it('the built page has no inline script, inline style or outside origin (nothing the CSP would have to allow)', () => {
    const files = [join(DEFAULT_STATIC_ROOT, 'index.html'), ...readdirSync(join(DEFAULT_STATIC_ROOT, 'assets')).map((f) => join(DEFAULT_STATIC_ROOT, 'assets', f))];
    const html = readFileSync(files[0]!, 'utf8');
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).toMatch(/\bsrc="\/assets\//);
    expect(html).not.toMatch(/<style\b/);
    expect(html).not.toMatch(/\sstyle=/);
    expect(html).not.toMatch(/\son[a-z]+=/);
    for (const f of files) expect(readFileSync(f, 'utf8'), f).not.toMatch(/(?:src|href|url)\s*[=(]\s*["']?(?:https?:)?\/\//);
  });
});

describe('sign-in', () => {
  it('sets an HttpOnly, SameSite=Strict session cookie, answers the CSRF token, and never echoes the token', async () => {
    const res = await post(h, '/session', { origin: h.base }, { token: OWNER_TOKEN });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain(OWNER_TOKEN);
    const body = JSON.parse(text);
    expect(body).toMatchObject({ signed_in: true, account: 'acct-1', token_name: 'owner' });
    expect(body.csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const sc = res.headers.get('set-cookie')!;
    expect(sc).toMatch(/^keygate_session=[A-Za-z0-9_-]{43};/);
    expect(sc).toMatch(/; HttpOnly/i);
    expect(sc).toMatch(/; SameSite=Strict/i);
    expect(sc).toMatch(/; Path=\//);
    expect(sc).not.toMatch(/; Secure/i); // plain http on loopback
    const sid = sc.split(';')[0]!.split('=')[1]!;
    // Redis holds the session under its digest: neither the session id nor the token is stored.
    const keys = await db.keys('kgtest:v1:{mgmt}:websession:*');
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) {
      expect(k).not.toContain(sid);
      expect(JSON.stringify(await db.hgetall(k))).not.toContain(OWNER_TOKEN);
    }
  });

  it('over https the cookie is Secure and __Host- prefixed', async () => {
    const hs = await startApp(db, { trustProxy: true });
    try {
      const origin = hs.base.replace('http:', 'https:');
      const s = await signIn(hs, OWNER_TOKEN, { 'x-forwarded-proto': 'https', origin });
      expect(s.setCookie).toMatch(/^__Host-keygate_session=/);
      expect(s.setCookie).toMatch(/; Secure/i);
      expect(s.setCookie).toMatch(/; HttpOnly/i);
      // The https cookie is read back on https requests.
      const who = await fetch(`${hs.base}/v1/whoami`, { headers: { cookie: s.cookie, 'x-forwarded-proto': 'https' } });
      expect(who.status).toBe(200);
    } finally {
      await hs.app.close();
    }
  });

  it('behind a proxy, the configured public origin is the only one accepted, and makes the cookie Secure', async () => {
    const hs = await startApp(db, { publicOrigin: 'https://console.example.com' });
    try {
      expect((await post(hs, '/session', { origin: hs.base }, { token: OWNER_TOKEN })).status).toBe(403);
      const s = await signIn(hs, OWNER_TOKEN, { origin: 'https://console.example.com' });
      expect(s.setCookie).toMatch(/^__Host-keygate_session=.*; Secure/i);
      const change = (origin: string) => post(hs, '/v1/whoami', { cookie: s.cookie, origin, 'x-csrf-token': s.csrf });
      expect((await change(hs.base)).status).toBe(403);
      expect((await change('https://console.example.com')).status).toBe(200);
    } finally {
      await hs.app.close();
    }
  });

  it('refuses a wrong token, an all-accounts token, a cross-origin or Origin-less sign-in and bad bodies, creating no session', async () => {
    const before = (await db.keys('kgtest:v1:{mgmt}:websession:*')).length;
    const cases: [Record<string, string>, unknown, number, string][] = [
      [{ origin: h.base }, { token: 'kgm_nope' }, 401, 'UNAUTHENTICATED'],
      [{ origin: h.base }, { token: OPERATOR_TOKEN }, 403, 'FORBIDDEN'],
      [{ origin: 'https://evil.example' }, { token: OWNER_TOKEN }, 403, 'FORBIDDEN'],
      [{}, { token: OWNER_TOKEN }, 403, 'FORBIDDEN'],
      [{ origin: h.base, 'sec-fetch-site': 'cross-site' }, { token: OWNER_TOKEN }, 403, 'FORBIDDEN'],
      [{ origin: h.base }, { token: OWNER_TOKEN, extra: 1 }, 400, 'INVALID_INPUT'],
      [{ origin: h.base }, { token: '' }, 400, 'INVALID_INPUT'],
      [{ origin: h.base }, ['x'], 400, 'INVALID_INPUT'],
    ];
    for (const [headers, body, status, code] of cases) {
      const res = await post(h, '/session', headers, body);
      expect(res.status, JSON.stringify([headers, body])).toBe(status);
      expect(res.headers.get('set-cookie')).toBeNull();
      const json = (await res.json()) as { error: { code: string; message: string } };
      expect(json.error.code).toBe(code);
      expect(json.error.message).not.toContain(OWNER_TOKEN);
    }
    const big = await post(h, '/session', { origin: h.base }, { token: 'x'.repeat(10_000) });
    expect(big.status).toBe(413);
    expect((await db.keys('kgtest:v1:{mgmt}:websession:*')).length).toBe(before);
  });

  it('a new sign-in replaces the browser\'s previous session (no fixation)', async () => {
    const first = await signIn(h);
    const second = await signIn(h, OWNER_TOKEN, { cookie: first.cookie });
    expect(second.cookie).not.toBe(first.cookie);
    expect((await fetch(`${h.base}/v1/whoami`, { headers: { cookie: first.cookie } })).status).toBe(401);
    expect((await fetch(`${h.base}/v1/whoami`, { headers: { cookie: second.cookie } })).status).toBe(200);
  });

  it('logs neither the token nor the session id', async () => {
    const s = await signIn(h);
    await fetch(`${h.base}/v1/whoami`, { headers: { cookie: s.cookie } });
    const all = h.logs.join('');
    expect(all).toContain('signed in');
    expect(all).not.toContain(OWNER_TOKEN);
    expect(all).not.toContain(s.cookie.split('=')[1]!);
    expect(all).not.toContain(s.csrf);
  });
});

describe('CSRF', () => {
  it('reads need only the cookie; every change needs the CSRF token and a same-origin Origin', async () => {
    const s = await signIn(h);
    const get = await fetch(`${h.base}/v1/whoami`, { headers: { cookie: s.cookie } });
    expect(get.status).toBe(200);
    expect(await get.json()).toEqual({ account: 'acct-1', token_id: 'tok_owner' });

    const refused: Record<string, string>[] = [
      { origin: h.base }, // no CSRF token
      { origin: h.base, 'x-csrf-token': 'A'.repeat(43) }, // wrong token
      { origin: h.base, 'x-csrf-token': s.csrf.slice(1) }, // wrong length
      { 'x-csrf-token': s.csrf }, // no Origin
      { origin: 'http://evil.example', 'x-csrf-token': s.csrf },
      { origin: h.base.replace('127.0.0.1', 'localhost'), 'x-csrf-token': s.csrf },
      { origin: h.base, 'sec-fetch-site': 'same-site', 'x-csrf-token': s.csrf },
    ];
    for (const headers of refused) {
      const res = await post(h, '/v1/whoami', { cookie: s.cookie, ...headers });
      expect(res.status, JSON.stringify(headers)).toBe(403);
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('FORBIDDEN');
      expect(error.message).toMatch(/^cross-site request refused/);
    }
    const ok = await post(h, '/v1/whoami', { cookie: s.cookie, origin: h.base, 'sec-fetch-site': 'same-origin', 'x-csrf-token': s.csrf });
    expect(ok.status).toBe(200);
  });

  it("another session's CSRF token does not pass", async () => {
    const a = await signIn(h);
    const b = await signIn(h);
    const res = await post(h, '/v1/whoami', { cookie: a.cookie, origin: h.base, 'x-csrf-token': b.csrf });
    expect(res.status).toBe(403);
  });
});

describe('session end', () => {
  it('sign-out needs the CSRF token, then ends the session in Redis and clears the cookie', async () => {
    const s = await signIn(h);
    const del = (headers: Record<string, string>) => fetch(`${h.base}/session`, { method: 'DELETE', headers: { cookie: s.cookie, ...headers } });
    expect((await del({ origin: h.base })).status).toBe(403);
    expect((await fetch(`${h.base}/v1/whoami`, { headers: { cookie: s.cookie } })).status).toBe(200);
    const out = await del({ origin: h.base, 'x-csrf-token': s.csrf });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toMatch(/^keygate_session=;.*Expires=Thu, 01 Jan 1970/i);
    const after = await fetch(`${h.base}/v1/whoami`, { headers: { cookie: s.cookie } });
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: { code: string } }).error.code).toBe('UNAUTHENTICATED');
    expect(await (await fetch(`${h.base}/session`, { headers: { cookie: s.cookie } })).json()).toEqual({ signed_in: false });
  });

  it('a session expires in Redis at its expiry time and is refused after it', async () => {
    const hs = await startApp(db, { sessionTtlMs: 1500 });
    try {
      const before = new Set(await db.keys('kgtest:v1:{mgmt}:websession:*'));
      const s = await signIn(hs);
      const key = (await db.keys('kgtest:v1:{mgmt}:websession:*')).find((k) => !before.has(k))!;
      const pttl = await db.pttl(key);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(1500);
      expect(s.setCookie).toMatch(/; Expires=/);
      expect((await fetch(`${hs.base}/v1/whoami`, { headers: { cookie: s.cookie } })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1700));
      expect((await fetch(`${hs.base}/v1/whoami`, { headers: { cookie: s.cookie } })).status).toBe(401);
      expect(await db.exists(key)).toBe(0);
    } finally {
      await hs.app.close();
    }
  });

  it('revoking the token ends its sessions on the next request', async () => {
    const hs = await startApp(db);
    try {
      const s = await signIn(hs);
      expect((await fetch(`${hs.base}/v1/whoami`, { headers: { cookie: s.cookie } })).status).toBe(200);
      hs.tokens.delete(OWNER_TOKEN); // the console's token store no longer has it active
      expect((await fetch(`${hs.base}/v1/whoami`, { headers: { cookie: s.cookie } })).status).toBe(401);
      expect(await (await fetch(`${hs.base}/session`, { headers: { cookie: s.cookie } })).json()).toEqual({ signed_in: false });
    } finally {
      await hs.app.close();
    }
  });

  it('a forged or malformed cookie is refused without touching a session', async () => {
    for (const cookie of ['keygate_session=' + 'A'.repeat(43), 'keygate_session=short', 'keygate_session=../../etc']) {
      const res = await fetch(`${h.base}/v1/whoami`, { headers: { cookie } });
      expect(res.status, cookie).toBe(401);
    }
  });
});

describe('inside keygate console (real management API and token store)', () => {
  let r: RedisServer;
  let kc: WebConsole;
  beforeAll(async () => {
    r = await startRedis();
    kc = await startWebConsole(r.url);
  });
  afterAll(async () => {
    await kc?.close();
    await destroyRedis(r);
  });

  async function session(token: string) {
    const res = await fetch(`${kc.url}/session`, { method: 'POST', headers: { 'content-type': 'application/json', origin: kc.url }, body: JSON.stringify({ token }) });
    const body = (await res.json()) as { csrf_token?: string; error?: { code: string } };
    return { status: res.status, body, cookie: (res.headers.get('set-cookie') ?? '').split(';')[0]! };
  }

  it('the API, its document and the page share the security headers', async () => {
    const ops = await kc.createToken('acct-a', 'owner');
    for (const [path, headers] of [
      ['/', {}],
      ['/openapi.json', {}],
      ['/healthz', {}],
      ['/v1/accounts/acct-a/keys', { authorization: `Bearer ${ops.token}` }],
      ['/v1/accounts/acct-a/keys', {}],
    ] as const) {
      const res = await fetch(`${kc.url}${path}`, { headers });
      expect(res.headers.get('content-security-policy'), path).toMatch(/^default-src 'self';script-src 'self';style-src 'self';/);
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
  });

  it('only an active account-scoped management token signs in', async () => {
    const operator = (await kc.server.console.createToken({ name: 'ops', account: null }, CLI_ACTOR)).token;
    expect((await session(operator)).status).toBe(403);
    const created = await kc.server.console.createKey({ account: 'acct-a', name: 'api key' }, CLI_ACTOR);
    const asKey = await session(created.key); // an API key is not a management token
    expect(asKey.status).toBe(401);
    const t = await kc.createToken('acct-a', 'soon revoked');
    await kc.revokeToken(t.id);
    expect((await session(t.token)).status).toBe(401);
  });

  it('a session acts as its token: reads, changes with the CSRF token only, the audit names the token, other accounts stay unknown', async () => {
    const t = await kc.createToken('acct-b', 'owner');
    const s = await session(t.token);
    expect(s.status).toBe(200);
    const key = await kc.server.console.createKey({ account: 'acct-b', name: 'before' }, CLI_ACTOR);
    const other = await kc.server.console.createKey({ account: 'acct-c', name: 'not yours' }, CLI_ACTOR);
    const patch = (id: string, headers: Record<string, string>) =>
      fetch(`${kc.url}/v1/keys/${id}`, { method: 'PATCH', headers: { cookie: s.cookie, 'content-type': 'application/json', origin: kc.url, ...headers }, body: JSON.stringify({ name: 'after' }) });

    const list = await fetch(`${kc.url}/v1/accounts/acct-b/keys`, { headers: { cookie: s.cookie } });
    expect(list.status).toBe(200);
    expect(((await list.json()) as { keys: { id: string }[] }).keys.map((k) => k.id)).toEqual([key.id]);

    const refused = await patch(key.id, {});
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('FORBIDDEN');
    expect((await kc.server.console.getKey(key.id)).name).toBe('before'); // nothing changed

    expect((await patch(key.id, { 'x-csrf-token': s.body.csrf_token! })).status).toBe(200);
    expect((await kc.server.console.getKey(key.id)).name).toBe('after');
    const [event] = await kc.server.console.listAudit({ account: 'acct-b', limit: 1 });
    expect(event).toMatchObject({ action: 'update', actor: { type: 'token', id: t.id, name: 'owner' } });

    expect((await patch(other.id, { 'x-csrf-token': s.body.csrf_token! })).status).toBe(404);
    expect((await fetch(`${kc.url}/v1/accounts/acct-c/keys`, { headers: { cookie: s.cookie } })).status).toBe(404);
  });

  it('revoking the token ends its session on the next request', async () => {
    const t = await kc.createToken('acct-d', 'owner');
    const s = await session(t.token);
    const read = () => fetch(`${kc.url}/v1/accounts/acct-d/keys`, { headers: { cookie: s.cookie } });
    expect((await read()).status).toBe(200);
    await kc.revokeToken(t.id);
    const after = await read();
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: { code: string } }).error.code).toBe('UNAUTHENTICATED');
    expect(await (await fetch(`${kc.url}/session`, { headers: { cookie: s.cookie } })).json()).toEqual({ signed_in: false });
  });
});

describe('web console settings', () => {
  it('KEYGATE_CONSOLE_PUBLIC_ORIGIN and KEYGATE_CONSOLE_SESSION_TTL are checked at start, with the setting named', () => {
    const load = (env: Record<string, string>) => loadConsoleApiConfig({}, env);
    expect(load({}).sessionTtlSeconds).toBe(8 * 3600);
    expect(load({}).publicOrigin).toBeUndefined();
    expect(load({ KEYGATE_CONSOLE_PUBLIC_ORIGIN: 'https://console.example.com/keys/' }).publicOrigin).toBe('https://console.example.com');
    expect(load({ KEYGATE_CONSOLE_SESSION_TTL: '3600' }).sessionTtlSeconds).toBe(3600);
    for (const v of ['ftp://console.example.com', 'console.example.com', 'javascript:alert(1)']) {
      expect(() => load({ KEYGATE_CONSOLE_PUBLIC_ORIGIN: v }), v).toThrow(/KEYGATE_CONSOLE_PUBLIC_ORIGIN/);
    }
    for (const v of ['5', '-1', '1.5', 'soon', String(30 * 86400)]) {
      expect(() => load({ KEYGATE_CONSOLE_SESSION_TTL: v }), v).toThrow(/KEYGATE_CONSOLE_SESSION_TTL/);
    }
  });
});
