/**
 * Decision logs through the real logger: one JSON line per deny with code, family, key id or
 * masked key and request id; allows only at debug; and no line, deny or error, ever holds a key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, maskKey } from '../src/core/key-format.ts';

/** What a log must show of a key, written out: its prefix, an ellipsis, its last four characters. */
const shown = (key: string, prefix = 'kg_') => `${prefix}…${key.slice(-4)}`;
import type { Sidecar } from '../src/main.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createLogger, keyScrubber } from '../src/telemetry/logger.ts';
import type { CheckInput } from '../src/authorizer.ts';
import { deny } from '../src/core/decision.ts';
import { DecisionLog } from '../src/telemetry/decision-log.ts';
import { adminGet, sample, waitFor } from './helpers/admin.ts';
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
    expect(r).toMatchObject({ level: 30, decision: 'deny', code: 'INVALID_API_KEY', status: 401, family: 'anthropic', maskedKey: shown(unknown), rule: 'key malformed, unknown or revoked' });
    expect(r.keyId).toBeUndefined();
    expect(typeof r.ms).toBe('number');
  });

  it('logs the key id once the key is known (expired, blocked account)', async () => {
    await check(expired.key, 'req-expired', 'google');
    expect(denyLine('req-expired')).toMatchObject({ code: 'API_KEY_EXPIRED', family: 'google', keyId: expired.id, rule: 'key past its expiry' });
    await check(blocked.key, 'req-blocked');
    expect(denyLine('req-blocked')).toMatchObject({ code: 'USER_BLOCKED', status: 403, keyId: blocked.id, rule: 'account disabled' });
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

describe('repeated denies', () => {
  it('logs the first of a kind at once and the identical ones after it as one count per window; metrics count each', async () => {
    const unknown = generateKey();
    const metric = async () =>
      sample((await adminGet(sidecar.adminPort, '/metrics')).body, 'keygate_decisions_total', { result: 'deny', code: 'INVALID_API_KEY', family: 'openai' }) ?? 0;
    const before = await metric();
    for (let i = 0; i < 30; i++) await check(unknown, `rep-${i}`);
    expect(await metric()).toBe(before + 30);
    const own = records().filter((r) => r.msg === 'deny' && r.maskedKey === shown(unknown));
    expect(own.map((r) => r.requestId)).toEqual(['rep-0']);
    const repeatedLine = () => records().find((r) => r.msg === 'deny repeated' && r.maskedKey === shown(unknown));
    await waitFor('the repeated line', () => repeatedLine() !== undefined, 5000);
    expect(repeatedLine()).toMatchObject({ level: 30, decision: 'deny', code: 'INVALID_API_KEY', status: 401, family: 'openai', rule: 'key malformed, unknown or revoked', repeated: 29, lastRequestId: 'rep-29' });
    expect(lines.join('')).not.toContain(unknown);
  });

  const input = (key: string, requestId: string): CheckInput => ({
    header: (n) => (n === 'authorization' ? `Bearer ${key}` : undefined),
    method: 'POST',
    path: '/v1/chat/completions',
    protocol: undefined,
    body: undefined,
    bodyTruncated: false,
    requestId,
  });
  const own: string[] = [];
  const ownLog = createLogger('info', { write: (line: string) => void own.push(line) });
  const d = deny('INVALID_API_KEY');
  const outcome = (requestId: string, key: string) => ({ decision: d, family: 'openai' as const, requestId, maskedKey: shown(key) });

  it('beyond maxKinds kinds in a window, counts the rest per code, rule and family (every deny in a line or a count)', () => {
    own.length = 0;
    const log = new DecisionLog(ownLog, { windowMs: 60_000, maxKinds: 2 });
    const keys = Array.from({ length: 5 }, () => generateKey());
    for (const [i, k] of keys.entries()) log.observer(outcome(`o-${i}`, k), input(k, `o-${i}`), process.hrtime.bigint());
    log.observer(outcome('o-again', keys[0]!), input(keys[0]!, 'o-again'), process.hrtime.bigint());
    expect(own.map((l) => JSON.parse(l).requestId)).toEqual(['o-0', 'o-1']);
    log.close();
    const parsed = own.map((l) => JSON.parse(l) as Record<string, unknown>);
    const repeated = parsed.filter((r) => r.msg === 'deny repeated');
    expect(repeated).toHaveLength(2);
    expect(repeated.find((r) => r.maskedKey === shown(keys[0]!))).toMatchObject({ repeated: 1, lastRequestId: 'o-again' });
    expect(repeated.find((r) => r.overflow === true)).toMatchObject({ code: 'INVALID_API_KEY', family: 'openai', repeated: 3, lastRequestId: 'o-4' });
    expect(repeated.find((r) => r.overflow === true)!.maskedKey).toBeUndefined();
    // a new window starts empty: the first of a kind gets its own line again
    log.observer(outcome('o-next', keys[0]!), input(keys[0]!, 'o-next'), process.hrtime.bigint());
    expect(JSON.parse(own.at(-1)!)).toMatchObject({ msg: 'deny', requestId: 'o-next' });
    log.close();
  });

  it('windowMs 0 logs every deny on its own line', () => {
    own.length = 0;
    const log = new DecisionLog(ownLog, { windowMs: 0 });
    const k = generateKey();
    for (let i = 0; i < 4; i++) log.observer(outcome(`z-${i}`, k), input(k, `z-${i}`), process.hrtime.bigint());
    log.close();
    expect(own.map((l) => JSON.parse(l).requestId)).toEqual(['z-0', 'z-1', 'z-2', 'z-3']);
  });
});

describe('no key in any line', () => {
  it('keeps keys out of deny lines and of the error lines of a Redis outage', async () => {
    await redis.stop();
    await waitFor('store down', () => !sidecar.ready());
    await check(valid.key, 'req-outage');
    expect(denyLine('req-outage')).toMatchObject({ code: 'AUTH_UNAVAILABLE', status: 503, maskedKey: shown(valid.key), rule: 'key store unavailable' });
    const outageLine = (r: Record<string, unknown>) => r.level === 50 && String(r.msg).startsWith('cannot reach Redis at redis://127.0.0.1:');
    await waitFor('a Redis error line', () => records().some(outageLine));
    // /readyz says why, in its body. (While redis-server shuts down, a reconnect can still be accepted
    // for a moment and say "ready" once: on a loaded machine that moment is long enough to be read.)
    let ready: { ready: boolean; reason?: string } = { ready: true };
    await waitFor('/readyz naming the Redis it cannot reach', async () => {
      ready = (await (await fetch(`http://127.0.0.1:${sidecar.adminPort}/readyz`)).json()) as typeof ready;
      return ready.reason?.startsWith('cannot reach Redis') === true;
    }, 10_000);
    expect(ready.ready).toBe(false);
    expect(ready.reason).toMatch(/^cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+: /);
    // Reconnect attempts keep failing (several per second), yet the error is said once and names what to do.
    await new Promise((r) => setTimeout(r, 1500));
    const said = records().filter(outageLine);
    expect(said).toHaveLength(1);
    expect(String(said[0]!.msg)).toContain('REDIS_URL');
    expect(records().filter((r) => (r.level as number) >= 40 && r.msg === 'redis connection error')).toHaveLength(0);
    await redis.start();
    await waitFor('store back', () => sidecar.ready());
    await waitFor('a recovery line', () => records().some((r) => r.level === 30 && String(r.msg).endsWith('answers again')));

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
    expect(tail).toContain(shown(key));
    expect(tail).not.toContain('abcdefghijklmnopqrstuvwxyz012345');
    expect(tail).toContain('Bearer [redacted]');
  });

  it('maskKey keeps the prefix and the last four characters only, and nothing of a short or foreign text', () => {
    expect(maskKey('kg_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789wxyz')).toBe('kg_…wxyz');
    expect(maskKey('acme-ABCDEFGHIJKLMNOPQRSTUVWXYZ01234567', 'acme-')).toBe('acme-…4567');
    expect(maskKey('sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')).toBe('sk-…6789');
    expect(maskKey('kg_short')).toBe('[redacted]');
    expect(maskKey('kg_ABCDEFGHIJKLMNOPQR"}\n')).toBe('kg_…R???');
  });

  it('leaves lines without key-shaped text untouched (and honours a custom prefix)', () => {
    const scrub = keyScrubber('acme-');
    const line = '{"msg":"deny","maskedKey":"acme-…ab12","bearer":"no token here"}';
    expect(scrub(line)).toBe(line);
    const custom = generateKey('acme-');
    expect(scrub(`{"msg":"${custom}"}`)).toBe(`{"msg":"${shown(custom, 'acme-')}"}`);
  });
});
