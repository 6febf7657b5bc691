/**
 * The console CLI of SPEC §5, run as a child process (`bin/keygate`) against a real redis-server:
 * output formats, and every bad input → one stderr line, non-zero exit, Redis byte-identical.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/key-console.ts';
import { isWellFormedKey } from '../src/keys/format.ts';
import { snapshot } from './helpers/redis-dump.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
const REVEAL = `base64:${randomBytes(32).toString('base64')}`;
let redis: RedisServer;
let db: Redis;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function keygate(args: string[], env: Record<string, string | undefined> = {}): Promise<Result> {
  const base: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    KEYGATE_NODE: process.execPath,
    REDIS_URL: redis.url,
    KEYGATE_REVEAL_KEY: REVEAL,
  };
  const merged = Object.fromEntries(Object.entries({ ...base, ...env }).filter(([, v]) => v !== undefined)) as Record<string, string>;
  return new Promise((resolve) => {
    execFile(BIN, args, { env: merged, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 99) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
});

afterAll(async () => {
  await destroyRedis(redis);
});

const acct = () => `acct-${randomBytes(4).toString('hex')}`;

function ok(r: Result): Result {
  expect(r.stderr, r.stderr).toBe('');
  expect(r.code).toBe(0);
  return r;
}

describe('happy path', () => {
  it('create --json, list, reveal, update, revoke, accounts', async () => {
    const a = acct();
    const created = JSON.parse(
      ok(await keygate(['keys', 'create', '--account', a, '--name', 'CI key', '--models', 'openai/*,Anthropic/claude-3-opus', '--expires', '2099-12-31T23:59:59Z', '--json'])).stdout,
    );
    expect(created).toMatchObject({
      account: a,
      name: 'CI key',
      status: 'active',
      models: ['openai/*', 'anthropic/claude-3-opus'],
      expires_at: '2099-12-31T23:59:59.000Z',
      revoked_at: null,
    });
    expect(created.id).toMatch(/^key_/);
    expect(isWellFormedKey(created.key, 'kg_')).toBe(true);

    const text = ok(await keygate(['keys', 'create', '--account', a, '--name', 'second'])).stdout.trim().split('\n');
    expect(text[0]).toMatch(/^Created key key_\w+ for account acct-\w+ \(models: all, expires: never\)\.$/);
    const secondKey = text.at(-1)!;
    expect(isWellFormedKey(secondKey, 'kg_')).toBe(true);

    const list = JSON.parse(ok(await keygate(['keys', 'list', '--account', a, '--json'])).stdout);
    expect(list.account).toBe(a);
    expect(list.keys.map((k: { name: string }) => k.name)).toEqual(['CI key', 'second']);
    expect(JSON.stringify(list)).not.toContain(created.key);

    const table = ok(await keygate(['keys', 'list', '--account', a])).stdout.trimEnd().split('\n');
    expect(table[0]).toMatch(/^ID\s+NAME\s+STATUS\s+KEY\s+MODELS\s+EXPIRES\s+CREATED$/);
    expect(table).toHaveLength(3);
    expect(table[1]).toContain(created.id);
    expect(table[1]).toContain('2099-12-31T23:59:59Z');
    expect(table.join('\n')).not.toContain(created.key);

    expect(ok(await keygate(['keys', 'reveal', created.id])).stdout).toBe(`${created.key}\n`);
    expect(JSON.parse(ok(await keygate(['keys', 'reveal', created.id, '--json'])).stdout)).toEqual({ id: created.id, key: created.key });

    const upd = ok(await keygate(['keys', 'update', created.id, '--name', 'renamed', '--all-models', '--no-expiry'])).stdout;
    expect(upd).toBe(`Updated key ${created.id}: name "renamed", models all, expires never.\n`);
    const upd2 = JSON.parse(ok(await keygate(['keys', 'update', created.id, '--models', 'google/*', '--expires', '2098-01-01', '--json'])).stdout);
    expect(upd2).toMatchObject({ name: 'renamed', models: ['google/*'], expires_at: '2098-01-01T00:00:00.000Z' });

    expect(ok(await keygate(['keys', 'revoke', created.id])).stdout).toBe(`Revoked key ${created.id}.\n`);
    expect(ok(await keygate(['keys', 'revoke', created.id])).stdout).toBe(`Key ${created.id} was already revoked.\n`);

    expect(ok(await keygate(['accounts', 'disable', a])).stdout).toBe(`Account ${a} disabled.\n`);
    expect(await db.hget(`kg:v1:acct:${a}`, 'status')).toBe('disabled');
    expect(JSON.parse(ok(await keygate(['accounts', 'enable', a, '--json'])).stdout)).toEqual({ account: a, status: 'active', changed: true });

    const kc = new KeyConsole({ redis: db });
    expect((await kc.listKeys(a)).map((r) => r.status)).toEqual(['revoked', 'active']);
  }, 300_000);

  it('--redis wins over REDIS_URL', async () => {
    const a = acct();
    const r = ok(await keygate(['keys', 'list', '--account', a, '--json', '--redis', redis.url], { REDIS_URL: 'redis://127.0.0.1:1' }));
    expect(JSON.parse(r.stdout)).toEqual({ account: a, keys: [] });
  }, 60_000);

  it('--help lists the commands and options', async () => {
    const r = await keygate(['keys', 'update', '--help']);
    expect(r.code).toBe(0);
    for (const o of ['--name', '--models', '--all-models', '--expires', '--no-expiry', '--redis', '--json']) expect(r.stdout).toContain(o);
  }, 60_000);
});

describe('bad input: one stderr line, non-zero exit, nothing changed', () => {
  let active: string;
  let revoked: string;
  let account: string;

  beforeAll(async () => {
    account = acct();
    const kc = new KeyConsole({ redis: db, revealKey: REVEAL });
    active = (await kc.createKey({ account, name: 'active' })).id;
    revoked = (await kc.createKey({ account, name: 'revoked' })).id;
    await kc.revokeKey(revoked);
  });

  const unknown = 'key_UnknownUnknownUnknown';
  const cases: Array<[string, () => string[], Record<string, string | undefined>?, RegExp?]> = [
    ['create without --account', () => ['keys', 'create', '--name', 'x'], {}, /--account/],
    ['create without --name', () => ['keys', 'create', '--account', account], {}, /--name/],
    ['create with an empty name', () => ['keys', 'create', '--account', account, '--name', ''], {}, /name must not be empty/],
    ['create with a blank name', () => ['keys', 'create', '--account', account, '--name', '   '], {}, /name must not be empty/],
    ['create with a too long name', () => ['keys', 'create', '--account', account, '--name', 'n'.repeat(129)], {}, /longer than 128/],
    ['create with a bad account id', () => ['keys', 'create', '--account', 'bad acct', '--name', 'x'], {}, /account id/],
    ['create with a space in a model', () => ['keys', 'create', '--account', account, '--name', 'x', '--models', 'openai/gpt 4o'], {}, /model pattern "openai\/gpt 4o"/],
    ['create with a wildcard inside a model', () => ['keys', 'create', '--account', account, '--name', 'x', '--models', 'openai/gpt-*'], {}, /"\*" only/],
    ['create with an empty model list', () => ['keys', 'create', '--account', account, '--name', 'x', '--models', ''], {}, /empty entry/],
    ['create with an empty model entry', () => ['keys', 'create', '--account', account, '--name', 'x', '--models', 'openai/*,'], {}, /empty entry/],
    ['create with a non-ISO expiry', () => ['keys', 'create', '--account', account, '--name', 'x', '--expires', 'next week'], {}, /ISO-8601/],
    ['create with an impossible date', () => ['keys', 'create', '--account', account, '--name', 'x', '--expires', '2030-02-30'], {}, /real calendar/],
    ['create with a zoneless date-time', () => ['keys', 'create', '--account', account, '--name', 'x', '--expires', '2030-01-01T10:00:00'], {}, /zone/],
    ['create with an expiry in the past', () => ['keys', 'create', '--account', account, '--name', 'x', '--expires', '2001-01-01'], {}, /not in the future/],
    ['create without KEYGATE_REVEAL_KEY', () => ['keys', 'create', '--account', account, '--name', 'x'], { KEYGATE_REVEAL_KEY: undefined }, /KEYGATE_REVEAL_KEY is not set/],
    ['create with a short KEYGATE_REVEAL_KEY', () => ['keys', 'create', '--account', account, '--name', 'x'], { KEYGATE_REVEAL_KEY: 'base64:c2hvcnQ=' }, /must be 32/],
    ['create with an unknown option', () => ['keys', 'create', '--account', account, '--name', 'x', '--colour', 'red'], {}, /unknown option/],
    ['list without --account', () => ['keys', 'list'], {}, /--account/],
    ['list with a bad account id', () => ['keys', 'list', '--account', '-x'], {}, /account id/],
    ['reveal an unknown key id', () => ['keys', 'reveal', unknown], {}, /no key with id/],
    ['reveal a malformed key id', () => ['keys', 'reveal', 'kg_notanid'], {}, /key id/],
    ['reveal without KEYGATE_REVEAL_KEY', () => ['keys', 'reveal', active], { KEYGATE_REVEAL_KEY: undefined }, /KEYGATE_REVEAL_KEY is not set/],
    ['reveal with the wrong KEK', () => ['keys', 'reveal', active], { KEYGATE_REVEAL_KEY: `base64:${randomBytes(32).toString('base64')}` }, /does not hold/],
    ['reveal a revoked key', () => ['keys', 'reveal', revoked], {}, /revoked/],
    ['update an unknown key id', () => ['keys', 'update', unknown, '--name', 'x'], {}, /no key with id/],
    ['update with nothing to change', () => ['keys', 'update', active], {}, /nothing to update/],
    ['update --models with --all-models', () => ['keys', 'update', active, '--models', 'openai/*', '--all-models'], {}, /cannot be used with/],
    ['update --expires with --no-expiry', () => ['keys', 'update', active, '--expires', '2099-01-01', '--no-expiry'], {}, /cannot be used with/],
    ['update with an empty name', () => ['keys', 'update', active, '--name', ''], {}, /empty/],
    ['update with a bad date and a good name', () => ['keys', 'update', active, '--name', 'fine', '--expires', '31/12/2099'], {}, /ISO-8601/],
    ['update with an expiry in the past', () => ['keys', 'update', active, '--expires', '2020-06-01T00:00:00Z'], {}, /not in the future/],
    ['update with a malformed model and a good name', () => ['keys', 'update', active, '--name', 'fine', '--models', 'openai//x'], {}, /model name/],
    ['update a revoked key', () => ['keys', 'update', revoked, '--name', 'x'], {}, /revoked/],
    ['revoke an unknown key id', () => ['keys', 'revoke', unknown], {}, /no key with id/],
    ['revoke without a key id', () => ['keys', 'revoke'], {}, /missing required argument/],
    ['disable a bad account id', () => ['accounts', 'disable', 'has space'], {}, /account id/],
    ['enable without an account id', () => ['accounts', 'enable'], {}, /missing required argument/],
    ['an unknown subcommand', () => ['keys', 'rotate', active], {}, /unknown command/],
    ['a bad REDIS_URL', () => ['keys', 'list', '--account', account], { REDIS_URL: 'http://localhost' }, /REDIS_URL/],
  ];

  it(`${cases.length} cases`, async () => {
    const before = await snapshot(db);
    const results: Array<[string, Result, RegExp | undefined]> = [];
    for (let i = 0; i < cases.length; i += 4) {
      const batch = cases.slice(i, i + 4);
      const rs = await Promise.all(batch.map(([, args, env]) => keygate(args(), env)));
      batch.forEach(([name, , , msg], j) => results.push([name, rs[j]!, msg]));
    }
    for (const [name, r, msg] of results) {
      expect(r.code, `${name}: exit status`).not.toBe(0);
      expect(r.code, `${name}: exit status`).toBeLessThan(3);
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      expect(lines, `${name}: stderr ${JSON.stringify(r.stderr)}`).toHaveLength(1);
      if (msg) expect(lines[0], name).toMatch(msg);
      expect(r.stdout, `${name}: stdout`).toBe('');
    }
    expect(await snapshot(db)).toEqual(before);
  }, 600_000);

  it('Redis unreachable: one line, exit 1, no password echoed', async () => {
    const r = await keygate(['keys', 'list', '--account', account], { REDIS_URL: 'redis://:s3cretpw@127.0.0.1:1' });
    expect(r.code).toBe(1);
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^keygate: Redis error: /);
    expect(r.stderr).not.toContain('s3cretpw');
  }, 60_000);
});
