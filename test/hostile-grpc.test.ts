/**
 * The gRPC surface under hostile input: malformed protobuf, oversize messages, missing parts,
 * unknown fields, many concurrent streams, corrupt store records, and the timing class of
 * unknown vs revoked keys. A real sidecar, a real redis-server, real sockets.
 */
import * as grpc from '@grpc/grpc-js';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../src/core/key-format.ts';
import { KeyField, schema } from '../src/schema/redis-schema.ts';
import { authorizationService } from '../proto/envoy-protos.ts';
import { checkRequest, deniedBody, type EnvoyClient } from './helpers/envoy-client.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';
import { transportFlag } from './helpers/transport.ts';

const s = schema();
const MAX = 256 * 1024;
let stack: Stack;
let db: Redis;
let client: EnvoyClient;
let raw: grpc.Client;
let valid: SeededKey;

/** Calls Check with raw bytes, bypassing any serializer. */
function rawCheck(bytes: Buffer): Promise<{ err: grpc.ServiceError | null; res?: Buffer }> {
  return new Promise((resolve) => {
    raw.makeUnaryRequest(
      '/envoy.service.auth.v3.Authorization/Check',
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      { deadline: Date.now() + 10_000 } as grpc.CallOptions,
      (err: grpc.ServiceError | null, res?: Buffer) => resolve({ err, res }),
    );
  });
}

const encode = (msg: object) => authorizationService().service.Check!.requestSerialize(msg);
const decodeRes = (b: Buffer) => authorizationService().service.Check!.responseDeserialize(b) as any;

beforeAll(async () => {
  stack = await startStack({ ...transportFlag(), grpcMaxReceiveBytes: MAX, redisTimeoutMs: 10_000, stalenessBoundMs: 60_000, countUsage: false });
  ({ db, client } = stack);
  raw = new grpc.Client(`127.0.0.1:${stack.sidecar.grpcPort}`, grpc.credentials.createInsecure());
  valid = await seedKey(db, s);
});

afterAll(async () => {
  raw?.close();
  await stack?.close();
});

async function stillServes() {
  const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key } });
  expect(res.status?.code ?? 0).toBe(0); // proto3: an absent code is 0 (OK)
}

describe('malformed and odd CheckRequests', () => {
  it.each([
    ['truncated varint', Buffer.from([0x0a, 0xff, 0xff, 0xff])],
    ['length past the end', Buffer.from([0x0a, 0x7f, 0x01])],
    ['wrong wire type for attributes', Buffer.from([0x0d, 0x01, 0x02, 0x03, 0x04])],
    ['random garbage', Buffer.from('deadbeefcafebabe00ff10203040', 'hex')],
  ])('%s → a gRPC error or a deny, never an allow, and the server keeps serving', async (_n, bytes) => {
    const { err, res } = await rawCheck(bytes);
    if (err) {
      expect([grpc.status.INTERNAL, grpc.status.INVALID_ARGUMENT]).toContain(err.code);
    } else {
      expect(decodeRes(res!).status?.code ?? 0).not.toBe(0);
    }
    await stillServes();
  });

  it('an empty CheckRequest (no attributes, request or http) → API_KEY_REQUIRED in the OpenAI shape', async () => {
    const { err, res } = await rawCheck(Buffer.alloc(0));
    expect(err).toBeNull();
    const r = decodeRes(res!);
    expect(r.denied_response.status.code).toBe(401);
    expect(JSON.parse(r.denied_response.body).error.code).toBe('API_KEY_REQUIRED');
  });

  it('unknown fields are ignored, the known ones still decide', async () => {
    const known = encode(checkRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key } }));
    // field 99 (length-delimited) and field 100 (varint) appended at the top level
    const extra = Buffer.concat([known, Buffer.from([0x9a, 0x06, 0x03, 0x61, 0x62, 0x63, 0xa0, 0x06, 0x01])]);
    const { err, res } = await rawCheck(extra);
    expect(err).toBeNull();
    expect(decodeRes(res!).status?.code ?? 0).toBe(0);
  });

  it('an oversize message is refused with RESOURCE_EXHAUSTED', async () => {
    const big = encode(checkRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key }, body: Buffer.alloc(MAX + 1024, 0x20) }));
    const { err } = await rawCheck(big);
    expect(err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    await stillServes();
  });

  it('huge header maps and huge header values are denied cleanly', async () => {
    const headers: Record<string, string> = {};
    for (let i = 0; i < 2000; i++) headers[`x-h-${i}`] = 'v'.repeat(50);
    headers['x-api-key'] = 'k'.repeat(100_000);
    const res = await client.check({ path: '/v1/chat/completions', headers });
    expect(deniedBody(res).error.code).toBe('INVALID_API_KEY');
    expect(res.denied_response!.body!.length).toBeLessThan(2000);
  });

  it('thousands of concurrent streams are all answered', { timeout: 120_000 }, async () => {
    const n = 2000;
    const calls = Array.from({ length: n }, (_, i) =>
      client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': i % 2 ? valid.key : generateKey() } }, 90_000),
    );
    const results = await Promise.all(calls);
    expect(results.filter((r) => (r.status?.code ?? 0) === 0 && r.ok_response)).toHaveLength(n / 2);
    expect(results.filter((r) => r.denied_response?.status?.code === 401)).toHaveLength(n / 2);
  });
});

describe('corrupt store records are never an allow', () => {
  const cases: [string, Record<string, string | Buffer>][] = [
    ['missing id', { v: '1', account: 'a', status: 'active' }],
    ['missing account', { v: '1', id: 'key_0123456789abcdef', status: 'active' }],
    ['missing status', { v: '1', id: 'key_0123456789abcdef', account: 'a' }],
    ['unknown schema version', { v: '2', id: 'key_0123456789abcdef', account: 'a', status: 'active' }],
    ['status garbage', { v: '1', id: 'key_0123456789abcdef', account: 'a', status: 'ACTIVE' }],
    ['models not JSON', { v: '1', id: 'key_0123456789abcdef', account: 'a', status: 'active', models: '[openai/*' }],
    ['models not an array', { v: '1', id: 'key_0123456789abcdef', account: 'a', status: 'active', models: '{"a":1}' }],
    ['models of wrong type', { v: '1', id: 'key_0123456789abcdef', account: 'a', status: 'active', models: '[1,2]' }],
    ['expires_at not a number', { v: '1', id: 'key_0123456789abcdef', account: 'a', status: 'active', expires_at: 'soon' }],
    ['garbage bytes', { v: Buffer.from([0xff, 0xfe, 0x00]), id: Buffer.from([0xc3, 0x28]), account: 'a', status: 'active' }],
  ];
  it.each(cases)('%s → INVALID_API_KEY', async (_n, fields) => {
    const k = await seedKey(db, s);
    await db.del(s.keyRecord(k.digest));
    await db.hset(s.keyRecord(k.digest), fields);
    const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': k.key } });
    expect(deniedBody(res).error.code).toBe('INVALID_API_KEY');
  });

  it('a key record of the wrong Redis type → a deny, never an allow', async () => {
    const k = await seedKey(db, s);
    await db.del(s.keyRecord(k.digest));
    await db.set(s.keyRecord(k.digest), 'not a hash');
    const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': k.key } });
    expect(res.status?.code).not.toBe(0);
  });

  it('a corrupt account record → 503 AUTH_UNAVAILABLE (store fault, fail closed)', async () => {
    const k = await seedKey(db, s, { account: 'acct-corrupt' });
    await db.hset(s.account('acct-corrupt'), 'status', 'maybe');
    const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': k.key } });
    expect(deniedBody(res).error.code).toBe('AUTH_UNAVAILABLE');
  });
});

async function commandCounts(): Promise<Record<string, number>> {
  const info = await db.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) out[m[1]!] = Number(m[2]);
  return out;
}

async function storeCallsFor(key: string): Promise<{ body: string; calls: number }> {
  const before = await commandCounts();
  const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': key } });
  const after = await commandCounts();
  let calls = 0;
  for (const c of ['hmget', 'hget', 'hgetall', 'get', 'evalsha', 'eval', 'exists']) calls += (after[c] ?? 0) - (before[c] ?? 0);
  return { body: res.denied_response?.body ?? '', calls };
}

describe('timing class: unknown and revoked keys take the same path', () => {
  it('same code, same message, same number of store round trips', async () => {
    for (let i = 0; i < 5; i++) {
      const revoked = await seedKey(db, s, { status: 'revoked' });
      const unknown = generateKey();
      const a = await storeCallsFor(revoked.key);
      const b = await storeCallsFor(unknown);
      expect(a.body).toBe(b.body);
      expect(a.calls).toBe(b.calls);
      expect(a.calls).toBeLessThanOrEqual(1);
    }
  });

  it('a revoked key with a disabled account is still just INVALID_API_KEY (no account lookup)', async () => {
    const revoked = await seedKey(db, s, { status: 'revoked', account: 'acct-dis' });
    await db.hset(s.account('acct-dis'), KeyField.status, 'disabled');
    const before = await commandCounts();
    const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': revoked.key } });
    const after = await commandCounts();
    expect(deniedBody(res).error.code).toBe('INVALID_API_KEY');
    expect((after.hget ?? 0) - (before.hget ?? 0)).toBe(0);
  });
});
