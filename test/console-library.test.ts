/** The console library against a real redis-server: storage, reveal, update, revoke, limits, atomicity. */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ConsoleError } from '../src/console/errors.ts';
import { KeyConsole } from '../src/console/service.ts';
import { isWellFormedKey, keyDigest } from '../src/core/key-format.ts';
import { parseSidecarKey, schema, SIDECAR_KEY_FIELDS } from '../src/schema/redis-schema.ts';
import { expectCode, startConsoleOnRedis, type ConsoleOnRedis } from './helpers/key-console.ts';
import { dumpAllText, snapshot } from './helpers/redis-dump.ts';
import type { RedisServer } from './helpers/redis-server.ts';
import { seedKey } from './helpers/seed.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const s = schema();
let env: ConsoleOnRedis;
let redis: RedisServer;
let db: Redis;
let kc: KeyConsole;

beforeAll(async () => {
  env = await startConsoleOnRedis({ revealKey: REVEAL });
  ({ redis, db, kc } = env);
});

afterAll(() => env?.close());

const acct = () => `acct-${randomBytes(4).toString('hex')}`;

describe('create and reveal', () => {
  it('creates a well-formed key; the sidecar reads it as a grant; reveal returns the same plaintext', async () => {
    const a = acct();
    const c = await kc.createKey({ account: a, name: ' CI ', models: ['OpenAI/*', 'anthropic/claude-3-opus'], expiresAt: '2099-01-01' });
    expect(isWellFormedKey(c.key, 'kg_')).toBe(true);
    expect(c.id).toMatch(/^key_[0-9A-Za-z]{24}$/);
    expect(c.record).toMatchObject({
      id: c.id,
      account: a,
      name: 'CI',
      status: 'active',
      models: ['openai/*', 'anthropic/claude-3-opus'],
      expiresAt: Date.UTC(2099, 0, 1),
      revokedAt: null,
      rev: 1,
      revealable: true,
    });
    expect(c.record.hint).toBe(`kg_…${c.key.slice(-4)}`);
    expect(c.record.createdAt).toBe(c.record.updatedAt);
    expect(Math.abs(c.record.createdAt - Date.now())).toBeLessThan(60_000);

    const parsed = parseSidecarKey(await db.hmget(s.keyRecord(keyDigest(c.key)), ...SIDECAR_KEY_FIELDS));
    expect(parsed).toEqual({ kind: 'grant', grant: { id: c.id, account: a, models: ['openai/*', 'anthropic/claude-3-opus'], expiresAt: Date.UTC(2099, 0, 1) } });
    expect(await db.get(s.keyIdIndex(c.id))).toBe(keyDigest(c.key));
    expect(await db.smembers(s.accountKeys(a))).toEqual([c.id]);
    expect(await db.smembers(s.accountActiveKeys(a))).toEqual([c.id]);

    expect(await kc.revealKey(c.id)).toEqual({ id: c.id, key: c.key });
  });

  it('no plaintext key anywhere in Redis, nor its random part, base64 or hex', async () => {
    const created = await Promise.all(Array.from({ length: 10 }, (_, i) => kc.createKey({ account: acct(), name: `k${i}` })));
    const everything = (await dumpAllText(db)).join('\n');
    for (const { key } of created) {
      const forms = [
        key,
        key.slice(3, 3 + 32), // the random part
        key.slice(10, 30),
        Buffer.from(key).toString('base64'),
        Buffer.from(key).toString('base64url'),
        Buffer.from(key).toString('hex'),
        Buffer.from(key.slice(3)).toString('base64'),
        Buffer.from(key.slice(3)).toString('hex'),
      ];
      for (const f of forms) expect(everything.includes(f), `found a form of a key in Redis`).toBe(false);
      expect(everything).toContain(keyDigest(key)); // sanity: the dump does see the records
    }
  });

  it('reveal works with a rotated keyring, fails clearly without the old KEK', async () => {
    const c = await kc.createKey({ account: acct(), name: 'old kek' });
    const rotated = new KeyConsole({ redis: db, revealKey: `k2:${randomBytes(32).toString('base64')},${REVEAL}` });
    expect((await rotated.revealKey(c.id)).key).toBe(c.key);
    const c2 = await rotated.createKey({ account: acct(), name: 'new kek' });
    expect((await db.hget(s.keyRecord(keyDigest(c2.key)), 'secret'))!.startsWith('enc1:k2:')).toBe(true);
    const lost = new KeyConsole({ redis: db, revealKey: `k3:${randomBytes(32).toString('base64')}` });
    await expectCode(lost.revealKey(c.id), 'REVEAL_KEY', /"k1", which KEYGATE_REVEAL_KEY does not hold/);
  });

  it('an envelope copied onto another key record does not reveal', async () => {
    const a = await kc.createKey({ account: acct(), name: 'a' });
    const b = await kc.createKey({ account: acct(), name: 'b' });
    const envA = (await db.hget(s.keyRecord(keyDigest(a.key)), 'secret'))!;
    await db.hset(s.keyRecord(keyDigest(b.key)), 'secret', envA);
    await expectCode(kc.revealKey(b.id), 'REVEAL_KEY', /does not decrypt/);
  });

  it('create and reveal need KEYGATE_REVEAL_KEY; list, update, revoke and accounts do not', async () => {
    const saved = process.env.KEYGATE_REVEAL_KEY;
    delete process.env.KEYGATE_REVEAL_KEY;
    try {
      const c = await kc.createKey({ account: acct(), name: 'x' });
      const bare = new KeyConsole({ redis: db });
      const before = await snapshot(db);
      await expectCode(bare.createKey({ account: c.record.account, name: 'y' }), 'REVEAL_KEY', /KEYGATE_REVEAL_KEY is not set/);
      await expectCode(new KeyConsole({ redis: db, revealKey: 'base64:short' }).createKey({ account: c.record.account, name: 'y' }), 'REVEAL_KEY');
      expect(await snapshot(db)).toEqual(before);
      await expectCode(bare.revealKey(c.id), 'REVEAL_KEY');
      expect(await bare.listKeys(c.record.account)).toHaveLength(1);
      expect((await bare.updateKey(c.id, { name: 'z' })).name).toBe('z');
      await bare.disableAccount(c.record.account);
      await bare.enableAccount(c.record.account);
      expect((await bare.revokeKey(c.id)).alreadyRevoked).toBe(false);
    } finally {
      if (saved !== undefined) process.env.KEYGATE_REVEAL_KEY = saved;
    }
  });
});

describe('list', () => {
  it("lists an account's keys, oldest first, with revoked ones, never plaintext", async () => {
    const a = acct();
    const k1 = await kc.createKey({ account: a, name: 'one' });
    await new Promise((r) => setTimeout(r, 5)); // created_at has millisecond resolution
    const k2 = await kc.createKey({ account: a, name: 'two', models: ['google/*'] });
    await kc.revokeKey(k1.id);
    await kc.createKey({ account: acct(), name: 'other account' });
    const list = await kc.listKeys(a);
    expect(list.map((r) => [r.id, r.name, r.status, r.revealable])).toEqual([
      [k1.id, 'one', 'revoked', false],
      [k2.id, 'two', 'active', true],
    ]);
    expect(JSON.stringify(list)).not.toContain(k1.key);
    expect(JSON.stringify(list)).not.toContain(k2.key);
    expect(await kc.listKeys(acct())).toEqual([]);
  });

  it('ignores index entries whose record was never written (an interrupted create)', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'real' });
    await db.sadd(s.accountKeys(a), 'key_DanglingDanglingDangling');
    await db.set(s.keyIdIndex('key_DanglingDanglingDangling'), 'f'.repeat(64));
    expect((await kc.listKeys(a)).map((r) => r.id)).toEqual([k.id]);
  });

  it('heals the active set when a revoke was interrupted after its record step', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'x' });
    await kc.revokeKey(k.id);
    await db.sadd(s.accountActiveKeys(a), k.id); // as if the second (Cluster) step never ran
    await kc.listKeys(a);
    expect(await db.smembers(s.accountActiveKeys(a))).toEqual([]);
  });
});

describe('update', () => {
  it('patches only the fields given, bumps updated_at and rev', async () => {
    const c = await kc.createKey({ account: acct(), name: 'orig', models: ['openai/*'], expiresAt: '2099-01-01' });
    await new Promise((r) => setTimeout(r, 5));
    const u1 = await kc.updateKey(c.id, { name: 'renamed' });
    expect(u1).toMatchObject({ name: 'renamed', models: ['openai/*'], expiresAt: Date.UTC(2099, 0, 1), rev: 2 });
    expect(u1.updatedAt).toBeGreaterThan(c.record.updatedAt);
    expect(u1.createdAt).toBe(c.record.createdAt);
    const u2 = await kc.updateKey(c.id, { models: null, expiresAt: null });
    expect(u2).toMatchObject({ name: 'renamed', models: null, expiresAt: null, rev: 3 });
    const u3 = await kc.updateKey(c.id, { models: ['google/gemini-pro'], expiresAt: new Date(Date.UTC(2098, 5, 1)) });
    expect(u3).toMatchObject({ models: ['google/gemini-pro'], expiresAt: Date.UTC(2098, 5, 1), rev: 4 });
    expect((await kc.revealKey(c.id)).key).toBe(c.key);
  });

  it('concurrent updates from many clients never lose a write', async () => {
    const c = await kc.createKey({ account: acct(), name: 'start', models: ['start/model'], expiresAt: '2090-01-01' });
    const clients = Array.from({ length: 12 }, () => new KeyConsole({ redis: redis.url }));
    const names = new Set<string>();
    const models = new Set<string>();
    const expiries = new Set<number>();
    const jobs: Promise<unknown>[] = [];
    const perField = 60;
    for (let i = 0; i < perField; i++) {
      const name = `name-${i}`;
      const model = `p${i}/m`;
      const exp = Date.UTC(2091 + i, 0, 1);
      names.add(name);
      models.add(model);
      expiries.add(exp);
      jobs.push(clients[(3 * i) % clients.length]!.updateKey(c.id, { name }));
      jobs.push(clients[(3 * i + 1) % clients.length]!.updateKey(c.id, { models: [model] }));
      jobs.push(clients[(3 * i + 2) % clients.length]!.updateKey(c.id, { expiresAt: exp }));
    }
    await Promise.all(jobs);
    await Promise.all(clients.map((x) => x.close()));
    const r = await kc.getKey(c.id);
    // every write was applied exactly once: no read-modify-write could have dropped one
    expect(r.rev).toBe(1 + 3 * perField);
    // and no write of one field ever put back a stale value of another
    expect(names.has(r.name)).toBe(true);
    expect(models.has(r.models![0]!)).toBe(true);
    expect(expiries.has(r.expiresAt!)).toBe(true);
    expect(r.status).toBe('active');
    expect((await kc.revealKey(c.id)).key).toBe(c.key);
  });

  it('revoke racing updates: revoked wins and stays revoked', async () => {
    const c = await kc.createKey({ account: acct(), name: 'race' });
    const results = await Promise.allSettled([
      ...Array.from({ length: 20 }, (_, i) => kc.updateKey(c.id, { name: `n${i}` })),
      kc.revokeKey(c.id),
      ...Array.from({ length: 20 }, (_, i) => kc.updateKey(c.id, { name: `m${i}` })),
    ]);
    for (const r of results) if (r.status === 'rejected') expect((r.reason as ConsoleError).code).toBe('REVOKED');
    const rec = await kc.getKey(c.id);
    expect(rec.status).toBe('revoked');
    expect(rec.revealable).toBe(false);
  });

  it('bad updates are refused before any write', async () => {
    const c = await kc.createKey({ account: acct(), name: 'x' });
    const before = await snapshot(db);
    await expectCode(kc.updateKey(c.id, {}), 'INVALID_INPUT', /nothing to update/);
    await expectCode(kc.updateKey(c.id, { name: ' ' }), 'INVALID_INPUT', /empty/);
    await expectCode(kc.updateKey(c.id, { models: ['openai/gpt*'] }), 'INVALID_INPUT', /only/);
    await expectCode(kc.updateKey(c.id, { models: [] }), 'INVALID_INPUT');
    await expectCode(kc.updateKey(c.id, { expiresAt: '2001-01-01' }), 'INVALID_INPUT', /not in the future/);
    await expectCode(kc.updateKey(c.id, { name: 'ok', expiresAt: 'soon' }), 'INVALID_INPUT');
    await expectCode(kc.updateKey('key_UnknownUnknownUnknown', { name: 'y' }), 'NOT_FOUND');
    await expectCode(kc.updateKey('nope', { name: 'y' }), 'INVALID_INPUT');
    expect(await snapshot(db)).toEqual(before);
  });
});

describe('revoke', () => {
  it('keeps the record as revoked, destroys the envelope, the sidecar sees it as absent; idempotent', async () => {
    const c = await kc.createKey({ account: acct(), name: 'bye' });
    const r = await kc.revokeKey(c.id);
    expect(r).toEqual({ id: c.id, account: c.record.account, alreadyRevoked: false });
    const rec = await kc.getKey(c.id);
    expect(rec).toMatchObject({ status: 'revoked', revealable: false, rev: 2 });
    expect(rec.revokedAt).toBe(rec.updatedAt);
    expect(await db.hexists(s.keyRecord(keyDigest(c.key)), 'secret')).toBe(0);
    expect(parseSidecarKey(await db.hmget(s.keyRecord(keyDigest(c.key)), ...SIDECAR_KEY_FIELDS))).toEqual({ kind: 'absent' });
    await expectCode(kc.revealKey(c.id), 'REVOKED', /plaintext was destroyed/);
    await expectCode(kc.updateKey(c.id, { name: 'back' }), 'REVOKED');
    expect((await kc.revokeKey(c.id)).alreadyRevoked).toBe(true);
    expect((await kc.getKey(c.id)).rev).toBe(2);
    await expectCode(kc.revokeKey('key_UnknownUnknownUnknown'), 'NOT_FOUND');
  });
});

describe('limits', () => {
  it('active keys per account are capped; revoked keys free a slot; refused creates write nothing', async () => {
    const small = new KeyConsole({ redis: db, revealKey: REVEAL, maxActiveKeysPerAccount: 3 });
    const a = acct();
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await small.createKey({ account: a, name: `k${i}` }));
    const before = await snapshot(db);
    await expectCode(small.createKey({ account: a, name: 'one too many' }), 'LIMIT', /already has 3 active keys/);
    expect(await snapshot(db)).toEqual(before);
    await small.revokeKey(made[0]!.id);
    await small.createKey({ account: a, name: 'fits again' });
    const byName = Object.fromEntries((await small.listKeys(a)).map((r) => [r.name, r.status]));
    expect(byName).toEqual({ k0: 'revoked', k1: 'active', k2: 'active', 'fits again': 'active' });
  });

  it('concurrent creates never exceed the cap', async () => {
    const small = new KeyConsole({ redis: redis.url, revealKey: REVEAL, maxActiveKeysPerAccount: 5 });
    const a = acct();
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => small.createKey({ account: a, name: `k${i}` })));
    await small.close();
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    expect(await db.scard(s.accountActiveKeys(a))).toBe(5);
    expect(await db.scard(s.accountKeys(a))).toBe(5);
  });
});

describe('accounts', () => {
  it('disable and enable write the account record; repeated calls report no change', async () => {
    const a = acct();
    expect(await kc.accountStatus(a)).toBe('active');
    expect(await kc.disableAccount(a)).toEqual({ account: a, status: 'disabled', changed: true });
    expect(await db.hget(s.account(a), 'status')).toBe('disabled');
    expect(Number(await db.hget(s.account(a), 'updated_at'))).toBeGreaterThan(0);
    expect((await kc.disableAccount(a)).changed).toBe(false);
    expect(await kc.accountStatus(a)).toBe('disabled');
    expect(await kc.enableAccount(a)).toEqual({ account: a, status: 'active', changed: true });
    await expectCode(kc.disableAccount('bad account'), 'INVALID_INPUT');
  });
});

describe('records written by other tools', () => {
  it('a record seeded by the read-side helper (no rev, no hint) can be listed, updated and revoked', async () => {
    const k = await seedKey(db, s);
    expect((await kc.listKeys(k.account)).map((r) => r.id)).toEqual([k.id]);
    expect((await kc.updateKey(k.id, { name: 'adopted' })).rev).toBe(1);
    await kc.revokeKey(k.id);
    expect((await kc.getKey(k.id)).status).toBe('revoked');
  });

  it('a corrupt record is reported, not shown as a key', async () => {
    const c = await kc.createKey({ account: acct(), name: 'x' });
    await db.hset(s.keyRecord(keyDigest(c.key)), 'status', 'weird');
    await expectCode(kc.getKey(c.id), 'CORRUPT');
    await expectCode(kc.updateKey(c.id, { name: 'y' }), 'CORRUPT');
  });
});
