/**
 * The gRPC contract end to end: a real sidecar (in process), a real redis-server, and a client built from
 * Envoy's own protos calling Check over a socket.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { schema } from '../src/schema/redis-schema.ts';
import { generateKey } from '../src/core/key-format.ts';
import { deniedBody, deniedHeaders, okHeaders, type CheckResponseMsg, type EnvoyClient } from './helpers/envoy-client.ts';
import { seedKey, setAccountStatus, type SeededKey } from './helpers/seed.ts';
import { startSidecarWith, startStack, type Stack } from './helpers/sidecars.ts';
import { transportFlag } from './helpers/transport.ts';

const s = schema();
let stack: Stack;
let db: Redis;
let client: EnvoyClient;
let valid: SeededKey;

beforeAll(async () => {
  stack = await startStack({ ...transportFlag(), redisTimeoutMs: 10_000 });
  ({ db, client } = stack);
  valid = await seedKey(db, s, { account: 'acct-1' });
});

afterAll(async () => {
  await stack?.close();
});

const chat = (headers: Record<string, string | string[]>, extra: object = {}) =>
  client.check({ path: '/v1/chat/completions', headers: { 'x-request-id': 'req-1', ...headers }, ...extra });

function expectDeny(res: CheckResponseMsg, status: number, code: string) {
  expect(res.ok_response).toBeUndefined();
  expect(res.denied_response?.status?.code).toBe(status);
  expect(res.status?.code).not.toBe(0);
  expect(deniedBody(res).error.code).toBe(code);
}

describe('allow', () => {
  it.each([
    ['authorization', (k: string) => ({ authorization: `Bearer ${k}` })],
    ['authorization, lower-case scheme and padding', (k: string) => ({ authorization: `  bearer   ${k}  ` })],
    ['x-api-key', (k: string) => ({ 'x-api-key': k })],
    ['x-goog-api-key', (k: string) => ({ 'x-goog-api-key': k })],
  ])('accepts a valid key in %s with identity headers, stripped key headers and metadata', async (_n, h) => {
    const res = await chat(h(valid.key));
    expect(res.status?.code ?? 0).toBe(0); // proto3: an absent code is 0 (OK)
    expect(res.denied_response).toBeUndefined();
    const headers = okHeaders(res);
    expect(headers['x-keygate-account-id']).toBe('acct-1');
    expect(headers['x-keygate-key-id']).toBe(valid.id);
    for (const h of res.ok_response!.headers!) {
      expect(h.append).toBeDefined(); // BoolValue present: overwrite, never append
      expect(h.append?.value ?? false).toBe(false);
    }
    expect(res.ok_response!.headers_to_remove).toEqual(['authorization', 'x-api-key', 'x-goog-api-key']);
    expect(res.dynamic_metadata?.fields?.account_id?.stringValue).toBe('acct-1');
    expect(res.dynamic_metadata?.fields?.key_id?.stringValue).toBe(valid.id);
  });

  it('overwrites forged identity headers rather than appending', async () => {
    const res = await chat({ authorization: `Bearer ${valid.key}`, 'x-keygate-account-id': 'forged' });
    expect(okHeaders(res)['x-keygate-account-id']).toBe('acct-1');
  });

  it('accepts the key at any entry, whatever header the family usually uses', async () => {
    const res = await client.check({ path: '/v1/messages', headers: { authorization: `Bearer ${valid.key}` } });
    expect(res.status?.code ?? 0).toBe(0); // proto3: an absent code is 0 (OK)
  });

  it('reads headers from header_map (raw values) too', async () => {
    const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key }, rawHeaders: true });
    expect(res.status?.code ?? 0).toBe(0); // proto3: an absent code is 0 (OK)
  });
});

describe('row 1: API_KEY_REQUIRED', () => {
  it.each([
    ['no headers', {}],
    ['empty authorization', { authorization: '' }],
    ['whitespace x-api-key', { 'x-api-key': '   ' }],
    ['Bearer with no token', { authorization: 'Bearer ' }],
    ['empty in all three', { authorization: '', 'x-api-key': '', 'x-goog-api-key': ' ' }],
  ])('%s → 401', async (_n, h) => {
    const res = await chat(h);
    expectDeny(res, 401, 'API_KEY_REQUIRED');
    expect(res.status?.code).toBe(16);
  });
});

describe('row 2: AMBIGUOUS_API_KEY', () => {
  it.each([
    ['two headers', (k: string) => ({ authorization: `Bearer ${k}`, 'x-api-key': k })],
    ['three headers', (k: string) => ({ authorization: `Bearer ${k}`, 'x-api-key': k, 'x-goog-api-key': k })],
    ['repeated header joined by Envoy', (k: string) => ({ 'x-api-key': [k, k] })],
    ['comma-joined authorization', (k: string) => ({ authorization: `Bearer ${k}, Bearer ${k}` })],
    ['a non-Bearer authorization and a key', (k: string) => ({ authorization: 'Basic Zm9vOmJhcg==', 'x-goog-api-key': k })],
  ])('%s → 400', async (_n, h) => {
    expectDeny(await chat(h(valid.key)), 400, 'AMBIGUOUS_API_KEY');
  });

  it('repeated headers in header_map are ambiguous too', async () => {
    const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': [valid.key, valid.key] }, rawHeaders: true });
    expectDeny(res, 400, 'AMBIGUOUS_API_KEY');
  });
});

describe('row 3: INVALID_API_KEY', () => {
  it('unknown well-formed key', async () => {
    expectDeny(await chat({ authorization: `Bearer ${generateKey()}` }), 401, 'INVALID_API_KEY');
  });
  it('revoked key, same code and message as unknown', async () => {
    const revoked = await seedKey(db, s, { status: 'revoked' });
    const a = await chat({ authorization: `Bearer ${revoked.key}` });
    const b = await chat({ authorization: `Bearer ${generateKey()}` });
    expectDeny(a, 401, 'INVALID_API_KEY');
    expect(deniedBody(a)).toEqual(deniedBody(b));
  });
  it.each([
    ['bad checksum', (k: string) => k.slice(0, -1) + (k.endsWith('A') ? 'B' : 'A')],
    ['wrong prefix', (k: string) => 'xx_' + k.slice(3)],
    ['too short', (k: string) => k.slice(0, -2)],
    ['non-base62', (k: string) => k.slice(0, 10) + '!' + k.slice(11)],
  ])('malformed key (%s)', async (_n, mangle) => {
    expectDeny(await chat({ 'x-api-key': mangle(valid.key) }), 401, 'INVALID_API_KEY');
  });
  it('non-Bearer scheme', async () => {
    const res = await chat({ authorization: `Basic ${valid.key}` });
    expectDeny(res, 401, 'INVALID_API_KEY');
    expect(deniedBody(res).error.message).toContain('Bearer');
  });
  it('corrupt record is an invalid key, never an allow', async () => {
    const k = await seedKey(db, s);
    await db.hset(s.keyRecord(k.digest), 'v', '99');
    expectDeny(await chat({ 'x-api-key': k.key }), 401, 'INVALID_API_KEY');
  });
});

describe('row 4: API_KEY_EXPIRED', () => {
  it('expired in the past', async () => {
    const k = await seedKey(db, s, { expiresAt: Date.now() - 1000 });
    expectDeny(await chat({ 'x-api-key': k.key }), 401, 'API_KEY_EXPIRED');
  });
  it('expiry in the future is fine', async () => {
    const k = await seedKey(db, s, { expiresAt: Date.now() + 3_600_000 });
    expect((await chat({ 'x-api-key': k.key })).status?.code ?? 0).toBe(0); // proto3: an absent code is 0 (OK)
  });
});

describe('row 5: USER_BLOCKED', () => {
  it('disabled account → 403, re-enabled → allow', async () => {
    const k = await seedKey(db, s, { account: 'acct-blocked' });
    await setAccountStatus(db, s, 'acct-blocked', 'disabled');
    expectDeny(await chat({ 'x-api-key': k.key }), 403, 'USER_BLOCKED');
    await setAccountStatus(db, s, 'acct-blocked', 'active');
    expect((await chat({ 'x-api-key': k.key })).status?.code ?? 0).toBe(0); // proto3: an absent code is 0 (OK)
  });
  it('expired beats blocked (contract order)', async () => {
    const k = await seedKey(db, s, { account: 'acct-blocked-2', expiresAt: Date.now() - 1 });
    await setAccountStatus(db, s, 'acct-blocked-2', 'disabled');
    expectDeny(await chat({ 'x-api-key': k.key }), 401, 'API_KEY_EXPIRED');
  });
});

describe('row 6: MODEL_NOT_ALLOWED', () => {
  it('model outside the allowed set → 403; inside → allow with model metadata', async () => {
    const k = await seedKey(db, s, { models: ['openai/gpt-4o-mini'] });
    const denied = await chat({ 'x-api-key': k.key }, { body: JSON.stringify({ model: 'openai/gpt-4o', messages: [] }) });
    expectDeny(denied, 403, 'MODEL_NOT_ALLOWED');
    const ok = await chat({ 'x-api-key': k.key }, { body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [] }) });
    expect(ok.status?.code ?? 0).toBe(0); // proto3: an absent code is 0 (OK)
    expect(ok.dynamic_metadata?.fields?.model?.stringValue).toBe('openai/gpt-4o-mini');
  });
  it('no body sent for a restricted key → 403', async () => {
    const k = await seedKey(db, s, { models: ['openai/*'] });
    expectDeny(await chat({ 'x-api-key': k.key }), 403, 'MODEL_NOT_ALLOWED');
  });
});

describe('row 7: AUTH_UNAVAILABLE', () => {
  it('Redis unreachable → 503 in the entry shape, no retry header false', async () => {
    const down = await startSidecarWith({ redisUrl: 'redis://127.0.0.1:1', ...transportFlag() });
    const c = down.client;
    try {
      const res = await c.check({ path: '/v1/messages', headers: { 'x-api-key': valid.key } });
      expect(res.denied_response?.status?.code).toBe(503);
      expect(res.status?.code).toBe(14);
      const body = JSON.parse(res.denied_response!.body!);
      expect(body.error.type).toBe('api_error');
      expect(body.error.code).toBe('AUTH_UNAVAILABLE');
      expect(deniedHeaders(res)['x-should-retry']).toBeUndefined();
      // decisions that need no store still answer normally
      const missing = await c.check({ path: '/v1/messages', headers: {} });
      expect(missing.denied_response?.status?.code).toBe(401);
    } finally {
      await down.close();
    }
  });
});

describe('error shapes', () => {
  it('OpenAI', async () => {
    const res = await chat({});
    expect(deniedBody(res)).toEqual({
      error: { message: expect.any(String), type: 'authentication_error', param: null, code: 'API_KEY_REQUIRED' },
    });
    const h = deniedHeaders(res);
    expect(h['content-type']).toBe('application/json');
    expect(h['x-request-id']).toBe('req-1');
    expect(h['x-should-retry']).toBe('false');
  });

  it('Anthropic (by path)', async () => {
    const res = await client.check({ path: '/v1/messages', headers: { 'x-request-id': 'req-a', 'x-api-key': generateKey() } });
    expect(deniedBody(res)).toEqual({
      type: 'error',
      error: { type: 'authentication_error', message: expect.any(String), code: 'INVALID_API_KEY' },
      request_id: 'req-a',
    });
  });

  it('Google (by path), with ErrorInfo', async () => {
    const res = await client.check({ path: '/v1beta/models/gemini-2.0-flash:generateContent', headers: { 'x-request-id': 'req-g' } });
    expect(deniedBody(res)).toEqual({
      error: {
        code: 401,
        message: expect.any(String),
        status: 'UNAUTHENTICATED',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'API_KEY_REQUIRED',
            domain: 'keygate',
            metadata: { code: 'API_KEY_REQUIRED', request_id: 'req-g' },
          },
        ],
      },
    });
  });

  it('context_extensions.protocol wins over the path', async () => {
    const res = await client.check({ path: '/v1/chat/completions', headers: {}, contextExtensions: { protocol: 'anthropic' } });
    expect(deniedBody(res).type).toBe('error');
  });

  it('permission and bad-request types per family', async () => {
    const res = await client.check({ path: '/v1/messages', headers: { 'x-api-key': 'a', authorization: 'Bearer b' } });
    expect(deniedBody(res).error.type).toBe('invalid_request_error');
    const g = await client.check({ path: '/v1beta/models/x:generateContent', headers: { 'x-api-key': 'a', authorization: 'Bearer b' } });
    expect(deniedBody(g).error.status).toBe('INVALID_ARGUMENT');
  });

  it('never echoes the key beyond a masked form', async () => {
    const k = generateKey();
    const res = await chat({ authorization: `Bearer ${k}` });
    expect(res.denied_response!.body).not.toContain(k.slice(3, -4));
  });
});
