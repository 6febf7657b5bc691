/**
 * The HTTP external-authorization endpoint, over a socket, against a real sidecar and a
 * real redis-server. Proxies are played by hand here (the headers each one sends); the real
 * binaries are driven in the e2e-* tests.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { generateKey } from '../src/core/key-format.ts';
import type { Sidecar } from '../src/main.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { json, send, type RawRequest } from './helpers/http-client.ts';
import type { RedisServer } from './helpers/redis-server.ts';
import { seedKey, setAccountStatus, type SeededKey } from './helpers/seed.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';

const s = schema();
const MAX_BODY = 64 * 1024;
let stack: Stack;
let redis: RedisServer;
let db: Redis;
let sidecar: Sidecar;
let valid: SeededKey;
let restricted: SeededKey;
let checks = 0;

beforeAll(async () => {
  stack = await startStack({ httpMaxBodyBytes: MAX_BODY });
  ({ redis, db, sidecar } = stack);
  sidecar.authorizer.observe(() => void checks++);
  valid = await seedKey(db, s, { account: 'acct-http' });
  restricted = await seedKey(db, s, { account: 'acct-http', models: ['gpt-4o', 'openai/gpt-4o', 'google/gemini-2.0-flash'] });
});

afterAll(async () => {
  await stack?.close();
});

const authz = (r: RawRequest) => send(sidecar.httpPort, r);
const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
/** Caddy forward_auth / Traefik: GET /authz with the original in X-Forwarded-*. */
const forward = (method: string, uri: string, headers: Record<string, string | string[]> = {}) =>
  authz({ path: '/authz', headers: { 'x-forwarded-method': method, 'x-forwarded-uri': uri, ...headers } });
/** nginx auth_request: X-Original-*. */
const nginx = (method: string, uri: string, headers: Record<string, string | string[]> = {}) =>
  authz({ path: '/authz', headers: { 'x-original-method': method, 'x-original-uri': uri, ...headers } });

describe('Envoy http_service (original path after /authz)', () => {
  it('allows a valid key: 200, identity headers, key headers named for removal, empty body', async () => {
    const res = await authz({ method: 'POST', path: '/authz/v1/chat/completions', headers: bearer(valid.key), body: '{"model":"x"}' });
    expect(res.status).toBe(200);
    expect(res.headers['x-keygate-account-id']).toBe('acct-http');
    expect(res.headers['x-keygate-key-id']).toBe(valid.id);
    expect(res.headers['x-envoy-auth-headers-to-remove']).toBe('authorization,x-api-key,x-goog-api-key');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toBe('');
  });

  it('reads the model from the body for a restricted key: allowed → 200, other → 403 naming it', async () => {
    const ok = await authz({ method: 'POST', path: '/authz/v1/chat/completions', headers: { ...bearer(restricted.key), 'content-type': 'application/json' }, body: '{"model":"gpt-4o"}' });
    expect(ok.status).toBe(200);
    const no = await authz({ method: 'POST', path: '/authz/v1/chat/completions', headers: { ...bearer(restricted.key), 'content-type': 'application/json' }, body: '{"model":"gpt-5"}' });
    expect(no.status).toBe(403);
    expect(json(no).error.code).toBe('MODEL_NOT_ALLOWED');
    expect(json(no).error.message).toContain('"gpt-5"');
  });

  it('denies in the family shape taken from the path, with request id and x-should-retry', async () => {
    const res = await authz({ method: 'POST', path: '/authz/v1/messages', headers: { 'x-request-id': 'rid-7' } });
    expect(res.status).toBe(401);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['x-request-id']).toBe('rid-7');
    expect(res.headers['request-id']).toBe('rid-7');
    expect(res.headers['x-should-retry']).toBe('false');
    expect(json(res)).toMatchObject({ type: 'error', error: { type: 'authentication_error', code: 'API_KEY_REQUIRED' }, request_id: 'rid-7' });
  });

  it('x-keygate-protocol sets the family over the path', async () => {
    const res = await authz({ method: 'POST', path: '/authz/v1/chat/completions', headers: { 'x-keygate-protocol': 'google' } });
    expect(res.status).toBe(401);
    expect(json(res).error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED' });
    expect(json(res).error.details[0].reason).toBe('API_KEY_REQUIRED');
  });

  it('a body cut short by Envoy (x-envoy-auth-partial-body) cannot prove the model', async () => {
    const res = await authz({
      method: 'POST',
      // Embeddings: a body the endpoint rule does not read (chat completions' is read for every key: USAGE_NOT_GUARANTEED).
      path: '/authz/v1/embeddings',
      headers: { ...bearer(restricted.key), 'x-envoy-auth-partial-body': 'true', 'content-type': 'application/json' },
      body: '{"model":"gpt-4o"}',
    });
    expect(res.status).toBe(403);
    expect(json(res).error.code).toBe('MODEL_NOT_ALLOWED');
  });
});

describe('Caddy forward_auth / Traefik ForwardAuth (X-Forwarded-*)', () => {
  it('allows a valid key with the identity headers', async () => {
    const res = await forward('POST', '/v1/chat/completions', bearer(valid.key));
    expect(res.status).toBe(200);
    expect(res.headers['x-keygate-key-id']).toBe(valid.id);
  });

  it('takes the family from X-Forwarded-Uri', async () => {
    const res = await forward('POST', '/v1beta/models/gemini-2.0-flash:generateContent?alt=sse', { 'x-goog-api-key': generateKey() });
    expect(res.status).toBe(401);
    expect(json(res).error.status).toBe('UNAUTHENTICATED');
    expect(json(res).error.details[0].reason).toBe('INVALID_API_KEY');
  });

  it('no body: a model-restricted key is denied with a message saying why', async () => {
    const res = await forward('POST', '/v1/chat/completions', bearer(restricted.key));
    expect(res.status).toBe(403);
    expect(res.headers['x-should-retry']).toBe('false');
    expect(json(res).error.code).toBe('MODEL_NOT_ALLOWED');
    expect(json(res).error.message).toMatch(/body/);
  });

  // Unconditional: Gemini names the model in the path (docs/models.md); a reader that stops reading
  // it must fail this test, not skip it.
  it('no body, but the model is in the path: an allowed model passes, another is denied', async () => {
    expect((await forward('POST', '/v1beta/models/gemini-2.0-flash:generateContent', { 'x-goog-api-key': restricted.key })).status).toBe(200);
    const no = await forward('POST', '/v1beta/models/gemini-2.5-pro:generateContent', { 'x-goog-api-key': restricted.key });
    expect(no.status).toBe(403);
    expect(json(no).error.details[0].reason).toBe('MODEL_NOT_ALLOWED');
  });

  it('X-Forwarded-Uri wins over X-Original-URI', async () => {
    const res = await forward('POST', '/v1/messages', { 'x-original-uri': '/v1/chat/completions' });
    expect(json(res).type).toBe('error');
  });
});

describe('nginx auth_request (X-Original-*)', () => {
  it('allows a valid key with the identity headers', async () => {
    const res = await nginx('POST', '/v1/chat/completions', { 'x-api-key': valid.key });
    expect(res.status).toBe(200);
    expect(res.headers['x-keygate-account-id']).toBe('acct-http');
  });

  it.each([
    ['401 stays 401', {}, 401, 401, 'API_KEY_REQUIRED'],
    ['400 travels as 403', { 'x-api-key': 'a', 'x-goog-api-key': 'b' }, 403, 400, 'AMBIGUOUS_API_KEY'],
    ['403 stays 403', 'restricted', 403, 403, 'MODEL_NOT_ALLOWED'],
  ] as const)('%s, with the real status and body in headers', async (_n, h, wire, real, code) => {
    const headers = h === 'restricted' ? bearer(restricted.key) : h;
    const res = await nginx('POST', '/v1/chat/completions', headers);
    expect(res.status).toBe(wire);
    expect(res.headers['x-keygate-status']).toBe(String(real));
    const replayed = JSON.parse(res.headers['x-keygate-body'] as string);
    expect(replayed).toEqual(json(res));
    expect(replayed.error.code).toBe(code);
  });

  it('non-ASCII in a deny body is escaped in the header and decodes to the same JSON', async () => {
    const res = await authz({
      method: 'POST',
      path: '/authz',
      headers: { 'x-original-method': 'POST', 'x-original-uri': '/v1/chat/completions', ...bearer(restricted.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-\u00e9\u4e2d\u{1f600}' }),
    });
    expect(res.status).toBe(403);
    expect(res.headers['x-keygate-body']).toMatch(/^[\x20-\x7e]+$/);
    expect(JSON.parse(res.headers['x-keygate-body'] as string)).toEqual(json(res));
    expect(json(res).error.message).toContain('gpt-\u00e9\u4e2d\u{1f600}');
  });
});

describe('the decision is the same as over gRPC', () => {
  it('a repeated Authorization header is ambiguous (not silently the first)', async () => {
    const res = await forward('POST', '/v1/chat/completions', { authorization: [`Bearer ${valid.key}`, `Bearer ${valid.key}`] });
    expect(res.status).toBe(400);
    expect(json(res).error.code).toBe('AMBIGUOUS_API_KEY');
  });

  it('disabled account → 403 USER_BLOCKED; expired → 401', async () => {
    const k = await seedKey(db, s, { account: 'acct-blocked' });
    await setAccountStatus(db, s, 'acct-blocked', 'disabled');
    expect(json(await forward('POST', '/v1/chat/completions', bearer(k.key))).error.code).toBe('USER_BLOCKED');
    const e = await seedKey(db, s, { expiresAt: Date.now() - 1000 });
    expect(json(await forward('POST', '/v1/chat/completions', bearer(e.key))).error.code).toBe('API_KEY_EXPIRED');
  });

  it('the key never appears in a response', async () => {
    const k = generateKey();
    const res = await forward('POST', '/v1/chat/completions', bearer(k));
    expect(res.status).toBe(401);
    expect(res.body).not.toContain(k);
    expect(JSON.stringify(res.headers)).not.toContain(k);
  });
});

describe('bad input never crashes the server', () => {
  it.each(['/', '/authzx', '/healthz', '/v1/chat/completions', '/authz-foo/v1'])('%s is 404', async (path) => {
    const res = await authz({ path, headers: bearer(valid.key) });
    expect(res.status).toBe(404);
  });

  it.each([
    ['a relative X-Forwarded-Uri', { 'x-forwarded-uri': 'v1/chat', 'x-forwarded-method': 'POST' }, 'X-Forwarded-Uri'],
    ['a bad X-Forwarded-Method', { 'x-forwarded-uri': '/v1/chat', 'x-forwarded-method': 'PO ST' }, 'X-Forwarded-Method'],
    ['a repeated X-Original-URI', { 'x-original-uri': ['/a', '/b'] }, 'x-original-uri'],
  ])('%s → 400 naming the header', async (_n, headers, named) => {
    const before = checks;
    const res = await authz({ path: '/authz', headers });
    expect(res.status).toBe(400);
    expect(json(res).error.code).toBe('BAD_AUTHZ_REQUEST');
    expect(json(res).error.message).toContain(named);
    expect(checks).toBe(before);
  });

  it('a body over the limit is cut: a restricted key is denied, an open key still passes', async () => {
    const big = `{"model":"gpt-4o","pad":"${'x'.repeat(MAX_BODY * 2)}"}`;
    const r = await authz({ method: 'POST', path: '/authz/v1/embeddings', headers: { ...bearer(restricted.key), 'content-type': 'application/json' }, body: big }).catch((e) => e);
    // The server answers before reading the rest and closes; the client may see the answer or a reset.
    if (!(r instanceof Error)) {
      expect(r.status).toBe(403);
      expect(json(r).error.code).toBe('MODEL_NOT_ALLOWED');
      expect(r.headers.connection).toBe('close');
    }
    const open = await authz({ method: 'POST', path: '/authz/v1/embeddings', headers: bearer(valid.key), body: big }).catch((e) => e);
    if (!(open instanceof Error)) expect(open.status).toBe(200);
    expect((await authz({ path: '/authz/v1/models', headers: bearer(valid.key) })).status).toBe(200);
  });

  it('oversized request headers → 431, and the server goes on', async () => {
    const res = await authz({ path: '/authz/v1/models', headers: { 'x-pad': 'x'.repeat(80 * 1024) } });
    expect(res.status).toBe(431);
    expect((await authz({ path: '/authz/v1/models', headers: bearer(valid.key) })).status).toBe(200);
  });

  it('garbage on the socket → 400, and the server goes on', async () => {
    const reply = await new Promise<string>((resolve, reject) => {
      const sock = connect(sidecar.httpPort, '127.0.0.1', () => sock.write('\x16\x03\x01 not http at all\r\n\r\n'));
      let got = '';
      sock.on('data', (d) => (got += d.toString('latin1')));
      sock.on('close', () => resolve(got));
      sock.on('error', reject);
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400 /);
    expect((await authz({ path: '/authz/v1/models', headers: bearer(valid.key) })).status).toBe(200);
  });
});

describe('Redis unreachable', () => {
  it('→ 503 AUTH_UNAVAILABLE, retryable (no x-should-retry: false, retry-after), nginx 403 carrying 503', async () => {
    await redis.stop();
    try {
      const res = await forward('POST', '/v1/chat/completions', bearer(valid.key));
      expect(res.status).toBe(503);
      expect(res.headers['x-should-retry']).toBeUndefined();
      expect(res.headers['retry-after']).toBe('1');
      expect(json(res).error.code).toBe('AUTH_UNAVAILABLE');
      const n = await nginx('POST', '/v1/chat/completions', bearer(valid.key));
      expect(n.status).toBe(403);
      expect(n.headers['x-keygate-status']).toBe('503');
    } finally {
      await redis.start();
    }
  });
});
