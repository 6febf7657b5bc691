/**
 * Accounts' own upstream credentials on every Redis topology (docs/credentials.md): the console's
 * set, change and removal (one script on standalone and Sentinel, two ordered steps on Cluster, where
 * the account record and the credential record are in different slots) are honoured by a real
 * sidecar on its next Check, with its cache tracking; on Cluster for accounts on every master. The
 * console library's rules on a real redis-server: nothing written for a bad secret or a missing key,
 * the record holds the envelope only, list and audit never carry the secret.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleError } from '../src/console/errors.ts';
import { CLI_ACTOR } from '../src/console/management.ts';
import { KeyConsole } from '../src/console/service.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { okHeaders, type CheckResponseMsg } from './helpers/envoy-client.ts';
import { startCluster } from './helpers/redis-cluster.ts';
import { destroyRedis, startRedis } from './helpers/redis-server.ts';
import { startSentinel } from './helpers/redis-sentinel.ts';
import { startTestSidecar, waitTracking, type TestSidecar } from './helpers/sidecars.ts';

const s = schema();
const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const CRED_KEY = `c1:${randomBytes(32).toString('base64')}`;
const secret = () => `sk-topo-${randomBytes(12).toString('hex')}`;

const check = (sc: TestSidecar, key: string): Promise<CheckResponseMsg> =>
  sc.client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` }, contextExtensions: { protocol: 'openai' } });

/** Set, change, remove: each seen by the sidecar on the next Check (after one warm-up, so from the cache). */
async function roundTrip(kc: KeyConsole, sc: TestSidecar, account: string): Promise<void> {
  const { key } = await kc.createKey({ account, name: 'topo' });
  expect(okHeaders(await check(sc, key)).authorization).toBeUndefined();
  const first = secret();
  await kc.setCredential(account, 'openai', first, CLI_ACTOR);
  expect(okHeaders(await check(sc, key)).authorization).toBe(`Bearer ${first}`);
  expect(okHeaders(await check(sc, key)).authorization).toBe(`Bearer ${first}`);
  const second = secret();
  await kc.setCredential(account, 'openai', second, CLI_ACTOR);
  expect(okHeaders(await check(sc, key)).authorization).toBe(`Bearer ${second}`);
  await kc.removeCredential(account, 'openai', CLI_ACTOR);
  const after = await check(sc, key);
  expect(okHeaders(after).authorization).toBeUndefined();
  expect(after.ok_response!.headers_to_remove).toContain('authorization');
}

describe.each([
  ['Redis Cluster (three masters)', () => startCluster()],
  ['Sentinel', () => startSentinel()],
])('on %s', (_name, start) => {
  const f = {} as { dep: { url: string; destroy(): Promise<void> }; sc: TestSidecar; kc: KeyConsole };
  beforeAll(async () => {
    f.dep = await start();
    f.sc = await startTestSidecar(f.dep.url, { credentialKey: CRED_KEY });
    f.kc = new KeyConsole({ redis: f.dep.url, revealKey: REVEAL, credentialKey: CRED_KEY });
    await waitTracking(f.sc);
  }, 90_000);
  afterAll(async () => {
    await f.kc?.close();
    await f.sc?.close();
    await f.dep?.destroy();
  });

  it('a set, a change and a removal are honoured on the next Check (accounts on different slots)', async () => {
    for (let i = 0; i < 3; i++) await roundTrip(f.kc, f.sc, `topo-${i}-${randomBytes(3).toString('hex')}`);
  }, 60_000);

  it('reseal finds the records on every master', async () => {
    const accounts = Array.from({ length: 6 }, (_, i) => `rot-${i}-${randomBytes(3).toString('hex')}`);
    for (const a of accounts) await f.kc.setCredential(a, 'anthropic', secret());
    const rotated = new KeyConsole({ redis: f.dep.url, credentialKey: `c9:${randomBytes(32).toString('base64')},${CRED_KEY}` });
    try {
      expect((await rotated.resealCredentials()).resealed).toBeGreaterThanOrEqual(accounts.length);
    } finally {
      await rotated.close();
    }
  }, 60_000);
});

describe('the console library on a real redis-server', () => {
  const f = {} as { redis: Awaited<ReturnType<typeof startRedis>>; kc: KeyConsole; bare: KeyConsole };
  beforeAll(async () => {
    f.redis = await startRedis();
    f.kc = new KeyConsole({ redis: f.redis.url, revealKey: REVEAL, credentialKey: CRED_KEY });
    f.bare = new KeyConsole({ redis: f.redis.url, revealKey: REVEAL, credentialKey: '' });
  });
  afterAll(async () => {
    await f.kc?.close();
    await f.bare?.close();
    if (f.redis) await destroyRedis(f.redis);
  });

  it('stores the envelope and the account list only; lists and audits without the secret; removes both', async () => {
    const db = f.redis.client();
    const sec = secret();
    const info = await f.kc.setCredential('acct-lib', 'anthropic', sec, CLI_ACTOR);
    expect(info).toMatchObject({ provider: 'anthropic', hint: sec.slice(-4) });
    const rec = await db.hgetall(s.credentials('acct-lib'));
    expect(Object.keys(rec).sort()).toEqual(['anthropic', 'anthropic:hint', 'anthropic:set_at']);
    expect(rec.anthropic).toMatch(/^enc1:c1:/);
    expect(JSON.stringify(rec)).not.toContain(sec);
    expect(await db.hget(s.account('acct-lib'), 'credentials')).toBe('anthropic');
    await f.kc.setCredential('acct-lib', 'openai', secret(), CLI_ACTOR);
    expect(await db.hget(s.account('acct-lib'), 'credentials')).toBe('openai,anthropic');
    expect((await f.kc.listCredentials('acct-lib')).map((c) => c.provider)).toEqual(['openai', 'anthropic']);
    const audit = await f.kc.listAudit({ account: 'acct-lib' });
    expect(audit.map((e) => e.action)).toEqual(['credential_set', 'credential_set']);
    expect(JSON.stringify(audit)).not.toContain(sec);
    await f.kc.removeCredential('acct-lib', 'anthropic', CLI_ACTOR);
    await f.kc.removeCredential('acct-lib', 'openai', CLI_ACTOR);
    expect(await db.hget(s.account('acct-lib'), 'credentials')).toBeNull();
    expect(await db.exists(s.credentials('acct-lib'))).toBe(0);
    await expect(f.kc.removeCredential('acct-lib', 'openai')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    db.disconnect();
  });

  it('a rotation: the new key first, the old kept; reseal moves every envelope to the new key, which alone then opens them at a sidecar', async () => {
    const db = f.redis.client();
    const newKey = `c2:${randomBytes(32).toString('base64')}`;
    const rotated = new KeyConsole({ redis: f.redis.url, credentialKey: `${newKey},${CRED_KEY}` });
    const sec = secret();
    await f.kc.setCredential('acct-rot', 'google', sec, CLI_ACTOR);
    await f.kc.setCredential('acct-rot2', 'openai', secret(), CLI_ACTOR);
    expect(await db.hget(s.credentials('acct-rot'), 'google')).toMatch(/^enc1:c1:/);
    expect(await rotated.resealCredentials(CLI_ACTOR)).toEqual({ resealed: 2 });
    expect(await db.hget(s.credentials('acct-rot'), 'google')).toMatch(/^enc1:c2:/);
    expect(await rotated.resealCredentials()).toEqual({ resealed: 0 }); // nothing left under c1
    expect((await f.kc.listAudit({ account: 'acct-rot' }))[0]).toMatchObject({ action: 'credential_set', changes: { provider: 'google', resealed: 'c1' } });
    // A sidecar holding only the new key opens it (Google entry: x-goog-api-key).
    const sc = await startTestSidecar(f.redis.url, { credentialKey: newKey });
    try {
      await waitTracking(sc);
      const { key } = await f.kc.createKey({ account: 'acct-rot', name: 'rot' });
      const r = await sc.client.check({ path: '/v1beta/models/gemini-2.0-flash:generateContent', headers: { 'x-goog-api-key': key }, contextExtensions: { protocol: 'google' } });
      expect(okHeaders(r)['x-goog-api-key']).toBe(sec);
      expect(r.ok_response!.headers_to_remove).toEqual(['authorization', 'x-api-key']);
    } finally {
      await sc.close();
      await rotated.close();
      db.disconnect();
    }
  });

  it('refuses, writing nothing: a bad secret (never echoed), an unknown provider, a console without the key', async () => {
    const db = f.redis.client();
    const bad = 'sk Qz7distinct 12345';
    const err = await f.kc.setCredential('acct-bad', 'openai', bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConsoleError);
    expect((err as Error).message).not.toContain('Qz7distinct');
    await expect(f.kc.setCredential('acct-bad', 'azure', secret())).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    const saved = process.env.KEYGATE_CREDENTIAL_KEY;
    delete process.env.KEYGATE_CREDENTIAL_KEY;
    try {
      await expect(f.bare.setCredential('acct-bad', 'openai', secret())).rejects.toMatchObject({ code: 'CREDENTIAL_KEY', message: expect.stringContaining('KEYGATE_CREDENTIAL_KEY is not set') });
    } finally {
      if (saved !== undefined) process.env.KEYGATE_CREDENTIAL_KEY = saved;
    }
    expect(await db.exists(s.credentials('acct-bad'), s.account('acct-bad'))).toBe(0);
    db.disconnect();
  });
});
