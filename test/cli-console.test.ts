/**
 * The console CLI, run as a child process (`bin/keygate`) against a real redis-server:
 * output formats, and every bad input → one stderr line, non-zero exit, Redis byte-identical.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { isWellFormedKey } from '../src/core/key-format.ts';
import { rateKeys } from '../src/schema/rates.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { RateLimiter } from '../src/store/rate-limiter.ts';
import { PLAIN_NAMES_UNREPORTED } from './helpers/console-api.ts';
import { awayFromWindowEnd } from './helpers/rate-window.ts';
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
    expect(table[0]).toMatch(/^ID\s+NAME\s+STATUS\s+KEY\s+MODELS\s+EXPIRES\s+CREATED\s+LAST USED\s+REQUESTS TODAY\s+SPEND\s+TOKENS TODAY\s+LIMIT\s+RATE\s+TOKEN RATE$/);
    expect(table[1]).toMatch(/ 0 in, 0 out  /);
    expect(table).toHaveLength(3);
    expect(table[1]).toContain(created.id);
    expect(table[1]).toContain('2099-12-31T23:59:59Z');
    expect(table.join('\n')).not.toContain(created.key);

    expect(ok(await keygate(['keys', 'reveal', created.id])).stdout).toBe(`${created.key}\n`);
    expect(JSON.parse(ok(await keygate(['keys', 'reveal', created.id, '--json'])).stdout)).toEqual({ id: created.id, key: created.key });

    const upd = ok(await keygate(['keys', 'update', created.id, '--name', 'renamed', '--all-models', '--no-expiry'])).stdout;
    expect(upd).toBe(`Updated key ${created.id}: name "renamed", models all, expires never, limit none, rate none; token rate none.\n`);
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

  it('wallet flow: credit, keys create --limit, usage record, keys show, accounts show, usage export', async () => {
    const a = acct();
    const created = JSON.parse(ok(await keygate(['keys', 'create', '--account', a, '--name', 'metered', '--limit', '1.5', '--limit-period', 'month', '--json'])).stdout);
    expect(created).toMatchObject({ limit: { amount_micros: 1_500_000, period: 'month' }, spend: { period: 'month', period_micros: 0, total_micros: 0 }, requests: { today: 0, month: 0 }, last_used_at: null });
    expect(ok(await keygate(['accounts', 'show', a])).stdout).toBe(`Account ${a}: active; no wallet (not metered); rate none; token rate none; tokens 0 in, 0 out today; 0 in, 0 out this month; billing metered.\n`);
    expect(ok(await keygate(['accounts', 'credit', a, '--amount', '12.50', '--reference', 'inv-1'])).stdout).toBe(`Credited 12.5 to account ${a}; balance 12.5.\n`);
    const again = JSON.parse(ok(await keygate(['accounts', 'credit', a, '--amount', '12.50', '--reference', 'inv-1', '--json'])).stdout);
    expect(again).toEqual({ account: a, reference: 'inv-1', amount_micros: 12_500_000, credited: false, balance_micros: 12_500_000 });
    const rec = ['usage', 'record', '--key', created.id, '--amount', '0.000001', '--request-id', 'req-a', '--model', 'openai/gpt-4o', '--input-tokens', '3', '--json'];
    expect(JSON.parse(ok(await keygate(rec)).stdout)).toEqual({ booked: true, key_id: created.id, account: a, request_id: 'req-a', amount_micros: 1, balance_micros: 12_499_999 });
    expect(JSON.parse(ok(await keygate(rec)).stdout)).toMatchObject({ booked: false });
    ok(await keygate(['usage', 'record', '--key', created.id, '--amount', '1.5', '--request-id', 'req-b']));
    const shown = JSON.parse(ok(await keygate(['keys', 'show', created.id, '--json'])).stdout);
    expect(shown).toMatchObject({ id: created.id, limit: { amount_micros: 1_500_000, period: 'month' }, spend: { period_micros: 1_500_001, total_micros: 1_500_001 } });
    expect(ok(await keygate(['keys', 'show', created.id])).stdout).toContain('limit: 1.5/month; spend: 1.500001 of 1.5 this month');
    expect(JSON.parse(ok(await keygate(['accounts', 'show', a, '--json'])).stdout)).toEqual({
      id: a,
      status: 'active',
      billing: 'metered',
      wallet: { enforced: true, balance_micros: 10_999_999, rule: 'credited' },
      tokens: { today: { input: 3, output: 0 }, month: { input: 3, output: 0 } },
      rate: null,
      token_rate: null,
      rate_use: { requests: null, tokens: null },
      bare_models: PLAIN_NAMES_UNREPORTED,
    });
    expect(ok(await keygate(['accounts', 'show', a])).stdout).toBe(
      `Account ${a}: active; balance 10.999999 (enforced); rate none; token rate none; tokens 3 in, 0 out today; 3 in, 0 out this month; billing metered.\n`,
    );
    expect(ok(await keygate(['keys', 'show', created.id])).stdout).toContain('\n  tokens: 3 in, 0 out today; 3 in, 0 out this month\n');
    const list = JSON.parse(ok(await keygate(['keys', 'list', '--account', a, '--json'])).stdout);
    expect(list.keys[0]).toMatchObject({ id: created.id, spend: { total_micros: 1_500_001 }, requests: { today: 0, month: 0 } });
    const lines = ok(await keygate(['usage', 'export', '--since', '2000-01-01', '--account', a])).stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.request_id, l.amount_micros, l.model, l.input_tokens])).toEqual([
      ['req-a', 1, 'openai/gpt-4o', 3],
      ['req-b', 1_500_000, null, null],
    ]);
    expect(lines[0]).toMatchObject({ account: a, key_id: created.id });
    const upd = JSON.parse(ok(await keygate(['keys', 'update', created.id, '--no-limit', '--json'])).stdout);
    expect(upd).toMatchObject({ limit: null });
  }, 180_000); // 14 CLI starts: about 5 s each on a loaded machine

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

const DAY = 86_400_000;

describe('rates through bin/keygate', () => {
  it("accounts show: the account's rates with the current window's use (text and --json rate_use)", async () => {
    await awayFromWindowEnd('day');
    const a = acct();
    const kc = new KeyConsole({ redis: db, revealKey: REVEAL });
    const k = await kc.createKey({ account: a, name: 'r' });
    ok(await keygate(['accounts', 'limit', a, '--rate', '5/d', '--token-rate', '1000/d']));
    // Two requests counted in the account's window by the sidecars' limiter, 300 tokens booked.
    const limiter = new RateLimiter(db);
    try {
      const req = { keyWindow: null, keyRate: null, accountWindow: rateKeys(schema()).requests(a), accountRate: { count: 5, per: 'day' as const } };
      for (let i = 0; i < 2; i++) expect((await limiter.take(req)).kind).toBe('allow');
    } finally {
      await limiter.close();
    }
    await kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: 'tok-1', inputTokens: 200, outputTokens: 100 });
    const dayEnd = new Date((Math.floor(Date.now() / DAY) + 1) * DAY).toISOString();
    expect(ok(await keygate(['accounts', 'show', a])).stdout).toBe(
      `Account ${a}: active; no wallet (not metered); rate 5/d (2 used this window); token rate 1000/d (300 used this window); tokens 200 in, 100 out today; 200 in, 100 out this month; billing metered.\n`,
    );
    expect(JSON.parse(ok(await keygate(['accounts', 'show', a, '--json'])).stdout)).toMatchObject({
      rate: { requests: 5, per: 'day' },
      token_rate: { tokens: 1000, per: 'day' },
      rate_use: { requests: { used: 2, held: 0, resets_at: dayEnd }, tokens: { used: 300, resets_at: dayEnd } },
    });
  }, 120_000);
});

describe('rate settings through bin/keygate', () => {
  const acctRates = (a: string) => db.hmget(`kg:v1:acct:${a}`, 'rate', 'token_rate');
  const keyRates = async (id: string) => db.hmget(`kg:v1:key:${(await db.get(`kg:v1:keyid:${id}`))!}`, 'rate', 'token_rate');
  const mirror = async (rec: string) => {
    const m = await db.hgetall(rec);
    return [m.limit ?? null, m.per ?? null];
  };

  it('accounts limit sets and removes the account rates; keys update --rate/--token-rate/--no-rate/--no-token-rate the key rates', async () => {
    const a = acct();
    const k = JSON.parse(ok(await keygate(['keys', 'create', '--account', a, '--name', 'r', '--json'])).stdout);
    expect(ok(await keygate(['accounts', 'limit', a, '--rate', '100/s', '--token-rate', '1000000/h'])).stdout).toBe(
      `Account ${a}: rate 100/s (0 used this window); token rate 1000000/h (0 used this window).\n`,
    );
    expect(await acctRates(a)).toEqual(['100/s', '1000000/h']);
    expect(await mirror(`kg:v1:tokrate:{${a}}`)).toEqual(['1000000', 'hour']);
    expect(JSON.parse(ok(await keygate(['accounts', 'limit', a, '--no-rate', '--json'])).stdout)).toMatchObject({ rate: null, token_rate: { tokens: 1_000_000, per: 'hour' } });
    expect(await acctRates(a)).toEqual([null, '1000000/h']);
    expect(ok(await keygate(['accounts', 'limit', a, '--no-token-rate'])).stdout).toBe(`Account ${a}: rate none; token rate none.\n`);
    expect(await acctRates(a)).toEqual([null, null]);
    expect(await mirror(`kg:v1:tokrate:{${a}}`)).toEqual([null, null]);

    expect(ok(await keygate(['keys', 'update', k.id, '--rate', '5/s', '--token-rate', '1000/m'])).stdout).toBe(
      `Updated key ${k.id}: name "r", models all, expires never, limit none, rate 5/s (0 used this window); token rate 1000/m (0 used this window).\n`,
    );
    expect(await keyRates(k.id)).toEqual(['5/s', '1000/m']);
    expect(await mirror(`kg:v1:tokrate:{${a}}:${k.id}`)).toEqual(['1000', 'minute']);
    expect(JSON.parse(ok(await keygate(['keys', 'update', k.id, '--no-rate', '--json'])).stdout)).toMatchObject({ rate: null, token_rate: { tokens: 1000, per: 'minute' } });
    expect(await keyRates(k.id)).toEqual([null, '1000/m']);
    expect(ok(await keygate(['keys', 'show', k.id])).stdout).toContain('rate none; token rate 1000/m (0 used this window)');
    ok(await keygate(['keys', 'update', k.id, '--no-token-rate']));
    expect(await keyRates(k.id)).toEqual([null, null]);
    expect(await mirror(`kg:v1:tokrate:{${a}}:${k.id}`)).toEqual([null, null]);
  }, 180_000);

  it('a refused rate: exit status 2, one stderr line naming it, nothing on stdout, Redis unchanged', async () => {
    const a = acct();
    const kc = new KeyConsole({ redis: db, revealKey: REVEAL });
    const k = await kc.createKey({ account: a, name: 'r', rates: { requests: { count: 7, per: 'minute' } } });
    await kc.setAccountRates(a, { tokens: { count: 5000, per: 'hour' } });
    const before = await snapshot(db);
    const cases: Array<[string[], RegExp]> = [
      ...['0/s', '-1/s', '5/week', '2.5/s', '05/s', '1000000001/s', 'abc', ''].map((bad): [string[], RegExp] => [['keys', 'update', k.id, '--rate', bad], /--rate: rate must be/]),
      [['accounts', 'limit', a, '--rate', '0/m'], /--rate: rate must be/],
      [['accounts', 'limit', a, '--token-rate', '1000000000001/d'], /--token-rate: .*at most/],
      [['keys', 'update', k.id, '--token-rate', '10/w'], /--token-rate: token rate must be/],
      [['keys', 'create', '--account', a, '--name', 'x', '--rate', '5/sec'], /--rate: rate must be/],
      [['accounts', 'limit', a], /nothing to change/],
    ];
    const results: Result[] = [];
    for (let i = 0; i < cases.length; i += 4) results.push(...(await Promise.all(cases.slice(i, i + 4).map(([args]) => keygate(args)))));
    cases.forEach(([args, msg], i) => {
      const r = results[i]!;
      const name = args.join(' ');
      expect(r.code, `${name}: exit status`).toBe(2);
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      expect(lines, `${name}: stderr ${JSON.stringify(r.stderr)}`).toHaveLength(1);
      expect(lines[0], name).toMatch(msg);
      expect(r.stdout, `${name}: stdout`).toBe('');
    });
    expect(await snapshot(db)).toEqual(before);
  }, 300_000);
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
    ['create with --limit but no period', () => ['keys', 'create', '--account', account, '--name', 'x', '--limit', '5'], {}, /go together/],
    ['create with a bad limit period', () => ['keys', 'create', '--account', account, '--name', 'x', '--limit', '5', '--limit-period', 'year'], {}, /--limit-period/],
    ['create with a negative limit', () => ['keys', 'create', '--account', account, '--name', 'x', '--limit', '-5', '--limit-period', 'day'], {}, /positive amount/],
    ['update --no-limit with a period', () => ['keys', 'update', active, '--no-limit', '--limit-period', 'day'], {}, /--no-limit/],
    ['update the limit of a revoked key', () => ['keys', 'update', revoked, '--limit', '1', '--limit-period', 'day'], {}, /revoked/],
    ['show an unknown key id', () => ['keys', 'show', unknown], {}, /no key with id/],
    ['credit without a reference', () => ['accounts', 'credit', account, '--amount', '5'], {}, /--reference/],
    ['credit with an empty reference', () => ['accounts', 'credit', account, '--amount', '5', '--reference', ''], {}, /reference/],
    ...['0', '0.0', '-1', '+1', '1e3', '.5', '1.0000001', 'ten', '1,5'].map(
      (amount): [string, () => string[], Record<string, string | undefined>, RegExp] => [
        `credit ${amount}`,
        () => ['accounts', 'credit', account, '--amount', amount, '--reference', 'r'],
        {},
        /positive amount/,
      ],
    ),
    ['credit a bad account id', () => ['accounts', 'credit', 'bad acct', '--amount', '1', '--reference', 'r'], {}, /account id/],
    ['usage for an unknown key id', () => ['usage', 'record', '--key', unknown, '--amount', '1', '--request-id', 'r1'], {}, /no key with id/],
    ['usage without a request id', () => ['usage', 'record', '--key', active, '--amount', '1'], {}, /--request-id/],
    ['usage with an empty request id', () => ['usage', 'record', '--key', active, '--amount', '1', '--request-id', ''], {}, /request id/],
    ['usage with a zero amount', () => ['usage', 'record', '--key', active, '--amount', '0', '--request-id', 'r1'], {}, /positive amount/],
    ['usage with a negative amount', () => ['usage', 'record', '--key', active, '--amount', '-0.5', '--request-id', 'r1'], {}, /positive amount/],
    ['usage with bad tokens', () => ['usage', 'record', '--key', active, '--amount', '1', '--request-id', 'r1', '--input-tokens', '-3'], {}, /tokens/],
    ['usage with a token count past 10^12', () => ['usage', 'record', '--key', active, '--amount', '1', '--request-id', 'r1', '--output-tokens', '1000000000001'], {}, /^keygate: output tokens must be a non-negative integer, at most 1000000000000$/],
    ['export without --since', () => ['usage', 'export'], {}, /--since/],
    ['export with a bad --since', () => ['usage', 'export', '--since', 'yesterday'], {}, /ISO-8601/],
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

describe('management commands: keys roll, tokens, audit list, console', () => {
  it('keys roll keeps the settings and links both keys; the audit log names the cli', async () => {
    const a = acct();
    const c = JSON.parse(ok(await keygate(['keys', 'create', '--account', a, '--name', 'rolling', '--models', 'openai/*', '--json'])).stdout);
    const r = JSON.parse(ok(await keygate(['keys', 'roll', c.id, '--grace', '60', '--json'])).stdout);
    expect(r).toMatchObject({ account: a, name: 'rolling (rolled)', models: ['openai/*'], rolled_from: c.id, old: { id: c.id, status: 'active', rolled_to: r.id, name: 'rolling' } });
    expect(isWellFormedKey(r.key, 'kg_')).toBe(true);
    const text = ok(await keygate(['keys', 'roll', r.id, '--name', 'rolling, second'])).stdout;
    expect(text).toMatch(/is revoked/);
    const named = JSON.parse(ok(await keygate(['keys', 'list', '--account', a, '--json'])).stdout);
    expect(JSON.stringify(named)).toContain('"name":"rolling, second"');
    const events = JSON.parse(ok(await keygate(['audit', 'list', '--account', a, '--json'])).stdout).events;
    expect(events.map((e: { action: string }) => e.action)).toEqual(['roll', 'roll', 'create']);
    expect(events[0].actor).toEqual({ type: 'cli', id: null, name: null });
    expect(JSON.stringify(events)).not.toContain(c.key);
    expect(ok(await keygate(['audit', 'list', '--account', a, '--limit', '1'])).stdout).toMatch(/^TIME\s+ACTION/);
  }, 60_000);

  it('tokens create (shown once), list, revoke; bad input changes nothing', async () => {
    const t = JSON.parse(ok(await keygate(['tokens', 'create', '--name', 'ops', '--all-accounts', '--json'])).stdout);
    expect(t).toMatchObject({ name: 'ops', scope: 'all' });
    expect(t.token).toMatch(/^kgmt_/);
    const s = JSON.parse(ok(await keygate(['tokens', 'create', '--name', 'owner', '--account', 'acct-x', '--json'])).stdout);
    expect(s.scope).toBe('acct-x');
    const list = ok(await keygate(['tokens', 'list', '--json'])).stdout;
    expect(list).toContain(t.id);
    expect(list).not.toContain(t.token);
    expect(ok(await keygate(['tokens', 'revoke', t.id])).stdout).toMatch(/Revoked token/);
    const before = await snapshot(db);
    for (const args of [
      ['tokens', 'create', '--name', 'x'],
      ['tokens', 'create', '--name', 'x', '--all-accounts', '--account', 'a'],
      ['tokens', 'create', '--name', 'x', '--account', '-bad'],
      ['tokens', 'revoke', 'tok_nope'],
      ['keys', 'roll', 'key_nope'],
      ['keys', 'roll', 'key_000000000000000000000000', '--grace', '-1'],
      ['audit', 'list', '--limit', '0'],
    ]) {
      const r = await keygate(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
    }
    expect(await snapshot(db)).toEqual(before);
  }, 60_000);

  it('keygate console serves, answers a token, and stops on SIGTERM', async () => {
    const { freePort } = await import('./helpers/redis-server.ts');
    const { spawn } = await import('node:child_process');
    const t = JSON.parse(ok(await keygate(['tokens', 'create', '--name', 'srv', '--all-accounts', '--json'])).stdout);
    const port = await freePort();
    const child = spawn(BIN, ['console', '--port', String(port)], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, KEYGATE_NODE: process.execPath, REDIS_URL: redis.url, KEYGATE_REVEAL_KEY: REVEAL, KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_DRAIN_DELAY_MS: '0' },
      stdio: 'ignore',
    });
    try {
      const deadline = Date.now() + 30_000;
      let ready = false;
      while (!ready && Date.now() < deadline) {
        ready = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false);
        if (!ready) await new Promise((r) => setTimeout(r, 100));
      }
      expect(ready).toBe(true);
      const res = await fetch(`http://127.0.0.1:${port}/v1/accounts/acct-srv/keys`, { method: 'POST', headers: { authorization: `Bearer ${t.token}`, 'content-type': 'application/json' }, body: '{"name":"via api"}' });
      expect(res.status).toBe(201);
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 60_000);
});

describe('conflicting options: refused in every command, exit 2 (a usage error), one line, nothing changed', () => {
  let key: string;
  let account: string;

  beforeAll(async () => {
    account = acct();
    const kc = new KeyConsole({ redis: db, revealKey: REVEAL });
    key = (
      await kc.createKey({
        account,
        name: 'rated',
        models: ['openai/*'],
        expiresAt: Date.now() + 86_400_000,
        limit: { amountMicros: 5_000_000, period: 'day' },
        rates: { requests: { count: 10, per: 'second' }, tokens: { count: 1000, per: 'minute' } },
      })
    ).id;
    await kc.setAccountRates(account, { requests: { count: 100, per: 'second' }, tokens: { count: 100_000, per: 'minute' } });
    await kc.setWalletLow(account, 10_000_000);
  });

  const pairs: Array<[string, () => string[], RegExp]> = [
    ['keys update --rate with --no-rate', () => ['keys', 'update', key, '--rate', '5/s', '--no-rate'], /'--rate <N\/UNIT>' cannot be used with option '--no-rate'/],
    ['keys update --no-rate with --rate', () => ['keys', 'update', key, '--no-rate', '--rate', '5/s'], /cannot be used with/],
    ['keys update --token-rate with --no-token-rate', () => ['keys', 'update', key, '--token-rate', '100/m', '--no-token-rate'], /'--token-rate <N\/UNIT>' cannot be used with option '--no-token-rate'/],
    ['keys update --no-token-rate with --token-rate', () => ['keys', 'update', key, '--no-token-rate', '--token-rate', '100/m'], /cannot be used with/],
    ['keys update --limit with --no-limit', () => ['keys', 'update', key, '--limit', '5', '--no-limit'], /'--limit <amount>' cannot be used with option '--no-limit'/],
    ['keys update --no-limit with --limit and a period', () => ['keys', 'update', key, '--no-limit', '--limit', '5', '--limit-period', 'week'], /cannot be used with|--no-limit/],
    ['keys update --models with --all-models', () => ['keys', 'update', key, '--models', 'anthropic/*', '--all-models'], /cannot be used with/],
    ['keys update --expires with --no-expiry', () => ['keys', 'update', key, '--expires', '2099-01-01', '--no-expiry'], /cannot be used with/],
    ['keys update --rate twice, two values', () => ['keys', 'update', key, '--rate', '5/s', '--rate', '6/s'], /'--rate <N\/UNIT>' given more than once with different values/],
    ['keys update --name twice, two values', () => ['keys', 'update', key, '--name', 'a', '--name', 'b'], /given more than once/],
    ['keys create --token-rate twice, two values', () => ['keys', 'create', '--account', account, '--name', 'x', '--token-rate', '1/s', '--token-rate', '2/s'], /given more than once/],
    ['accounts limit --rate with --no-rate', () => ['accounts', 'limit', account, '--rate', '5/s', '--no-rate'], /'--rate <N\/UNIT>' cannot be used with option '--no-rate'/],
    ['accounts limit --no-rate with --rate', () => ['accounts', 'limit', account, '--no-rate', '--rate', '5/s'], /cannot be used with/],
    ['accounts limit --token-rate with --no-token-rate', () => ['accounts', 'limit', account, '--token-rate', '5/s', '--no-token-rate'], /cannot be used with/],
    ['accounts limit --no-token-rate with --token-rate', () => ['accounts', 'limit', account, '--no-token-rate', '--token-rate', '5/s'], /cannot be used with/],
    ['accounts alert --wallet-low with --no-wallet-low', () => ['accounts', 'alert', account, '--wallet-low', '3.00', '--no-wallet-low'], /'--wallet-low <amount>' cannot be used with option '--no-wallet-low'/],
    ['webhooks create --account with --all-accounts', () => ['webhooks', 'create', '--url', 'https://93.184.216.34/k', '--account', account, '--all-accounts'], /cannot be used with/],
    ['tokens create --account with --all-accounts', () => ['tokens', 'create', '--name', 't', '--account', account, '--all-accounts'], /cannot be used with/],
  ];

  it(`${pairs.length} pairs`, async () => {
    const before = await snapshot(db);
    const results: Array<[string, Result, RegExp]> = [];
    for (let i = 0; i < pairs.length; i += 4) {
      const batch = pairs.slice(i, i + 4);
      const rs = await Promise.all(batch.map(([, args]) => keygate(args())));
      batch.forEach(([name, , msg], j) => results.push([name, rs[j]!, msg]));
    }
    for (const [name, r, msg] of results) {
      expect(r.code, `${name}: exit status (${r.stdout})`).toBe(2);
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      expect(lines, name).toHaveLength(1);
      expect(lines[0], name).toMatch(msg);
      expect(r.stdout, `${name}: stdout`).toBe('');
    }
    expect(await snapshot(db)).toEqual(before);
  }, 120_000);

  it('an option given twice with the same value, and each form alone, still work', async () => {
    ok(await keygate(['keys', 'update', key, '--rate', '7/s', '--rate', '7/s']));
    ok(await keygate(['keys', 'update', key, '--no-token-rate']));
    const shown = JSON.parse(ok(await keygate(['keys', 'show', key, '--json'])).stdout);
    expect({ rate: shown.rate, token_rate: shown.token_rate }).toEqual({ rate: { requests: 7, per: 'second' }, token_rate: null });
    ok(await keygate(['accounts', 'limit', account, '--no-rate', '--token-rate', '9/m']));
  }, 60_000);
});
