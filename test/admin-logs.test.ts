/**
 * Decision logs through the real logger: one JSON line per deny with code, family, key id or
 * masked key and request id; allows only at debug; and no line, deny or error, ever holds a key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, maskKey } from '../src/keys/format.ts';
import type { Sidecar } from '../src/main.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createLogger, keyScrubber } from '../src/telemetry/logger.ts';
import { waitFor } from './helpers/admin.ts';
import type { EnvoyClient } from './helpers/envoy-client.ts';
import type { RedisServer } from './helpers/redis-server.ts';
import { seedKey, setAccountStatus, type SeededKey } from './helpers/seed.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';

const s = schema();
let stack: Stack;
let redis: RedisServer;
let sidecar: Sidecar;
let client: EnvoyClient;
const lines: string[] = [];
const log = createLogger('info', { write: (line: string) => void lines.push(line) });
const records = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
let valid: SeededKey;
let expired: SeededKey;
let blocked: SeededKey;

beforeAll(async () => {
  stack = await startStack({ adminHost: '127.0.0.1' }, log);
  ({ redis, sidecar, client } = stack);
  const { db } = stack;
  valid = await seedKey(db, s, { account: 'acct-logs' });
  expired = await seedKey(db, s, { account: 'acct-logs', expiresAt: Date.now() - 1000 });
  blocked = await seedKey(db, s, { account: 'acct-off' });
  await setAccountStatus(db, s, 'acct-off', 'disabled');
  await waitFor('store ready', () => sidecar.ready());
});

afterAll(async () => {
  await stack?.close();
});

const check = (key: string, requestId: string, protocol = 'openai') =>
  client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}`, 'x-request-id': requestId }, contextExtensions: { protocol } });
const denyLine = (requestId: string) => {
  const found = records().filter((r) => r.msg === 'deny' && r.requestId === requestId);
  expect(found).toHaveLength(1);
  return found[0]!;
};

describe('deny logs', () => {
  it('logs an unknown key masked, with code, status, family and request id', async () => {
    const unknown = generateKey();
    await check(unknown, 'req-unknown', 'anthropic');
    const r = denyLine('req-unknown');
    expect(r).toMatchObject({ level: 30, decision: 'deny', code: 'INVALID_API_KEY', status: 401, family: 'anthropic', maskedKey: maskKey(unknown) });
    expect(r.keyId).toBeUndefined();
    expect(typeof r.ms).toBe('number');
  });

  it('logs the key id once the key is known (expired, blocked account)', async () => {
    await check(expired.key, 'req-expired', 'google');
    expect(denyLine('req-expired')).toMatchObject({ code: 'API_KEY_EXPIRED', family: 'google', keyId: expired.id });
    await check(blocked.key, 'req-blocked');
    expect(denyLine('req-blocked')).toMatchObject({ code: 'USER_BLOCKED', status: 403, keyId: blocked.id });
  });

  it('does not log allows at info, and logs them at debug', async () => {
    await check(valid.key, 'req-allow-info');
    expect(records().some((r) => r.requestId === 'req-allow-info')).toBe(false);
    log.level = 'debug';
    try {
      await check(valid.key, 'req-allow-debug');
    } finally {
      log.level = 'info';
    }
    const r = records().find((x) => x.requestId === 'req-allow-debug');
    expect(r).toMatchObject({ level: 20, msg: 'allow', keyId: valid.id, accountId: 'acct-logs', family: 'openai' });
  });
});

describe('no key in any line', () => {
  it('keeps keys out of deny lines and of the error lines of a Redis outage', async () => {
    await redis.stop();
    await waitFor('store down', () => !sidecar.ready());
    await check(valid.key, 'req-outage');
    expect(denyLine('req-outage')).toMatchObject({ code: 'AUTH_UNAVAILABLE', status: 503, maskedKey: maskKey(valid.key) });
    await waitFor('a Redis error line', () => records().some((r) => r.level === 40 && r.msg === 'redis connection error'));
    await redis.start();
    await waitFor('store back', () => sidecar.ready());

    const all = lines.join('');
    for (const k of [valid, expired, blocked]) {
      expect(all).not.toContain(k.key);
      expect(all).not.toContain(k.key.slice(3, 20));
    }
  });

  it('masks a key that an error message or stack quotes, and bearer tokens', () => {
    const key = generateKey();
    const err = new Error(`upstream rejected ${key}`);
    log.error({ err: { message: err.message, stack: err.stack }, header: `Bearer ${key}` }, `check failed for ${key}`);
    log.error({ detail: 'Authorization: Bearer sk-proj-abcdefghijklmnopqrstuvwxyz012345' }, 'foreign token');
    const tail = lines.slice(-2).join('');
    expect(tail).not.toContain(key);
    expect(tail).toContain(maskKey(key));
    expect(tail).not.toContain('abcdefghijklmnopqrstuvwxyz012345');
    expect(tail).toContain('Bearer [redacted]');
  });

  it('leaves lines without key-shaped text untouched (and honours a custom prefix)', () => {
    const scrub = keyScrubber('acme-');
    const line = '{"msg":"deny","maskedKey":"acme-…ab12","bearer":"no token here"}';
    expect(scrub(line)).toBe(line);
    const custom = generateKey('acme-');
    expect(scrub(`{"msg":"${custom}"}`)).toBe(`{"msg":"${maskKey(custom, 'acme-')}"}`);
  });
});
