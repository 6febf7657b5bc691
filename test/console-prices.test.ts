/**
 * The price table from the console: the CLI (`keygate prices …`, a real process) and the management
 * API (`/v1/prices…`, a real server), over a real redis-server. Operator tokens only; every change
 * audited in its own script; a bad model or amount changes nothing (a byte snapshot of the store);
 * what is set is what the sidecar's pricing reads from the table (`resolvePrice`).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import { validatePriceModel } from '../src/console/prices.ts';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { resolvePrice } from '../src/prices/resolve.ts';
import { pricesKey, PriceTable } from '../src/schema/prices.ts';
import { callApi, useTestConsole } from './helpers/console-api.ts';
import { snapshot } from './helpers/redis-dump.ts';
import type { RedisServer } from './helpers/redis-server.ts';

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
let redis: RedisServer;
let db: Redis;
let srv: ConsoleServer;
let base: string;
let admin: string;
let owner: string;
const MINE = `mine-${randomBytes(4).toString('hex')}`;

function keygate(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', KEYGATE_NODE: process.execPath, REDIS_URL: redis.url };
  return new Promise((resolve) => {
    execFile(BIN, args, { env, timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr }));
  });
}

const table = async () => PriceTable.fromHash(await db.hgetall(pricesKey(srv.console.schema.ns)));
/** What the sidecar's pricing takes for a model from the table (no catalog): the field it matched and its base prices. */
const priced = async (model: string, provider: string) => {
  const r = resolvePrice(await table(), null, provider, model, null, 0);
  return r && { matched: r.model, base: r.spec.base };
};
const auditHead = async () => (await callApi(base, 'GET', '/v1/audit?limit=1', { token: admin })).body.events[0];

const fx = useTestConsole(MINE);
beforeAll(() => {
  ({ redis, db, srv, base, admin, owner } = fx);
});

describe('model names', () => {
  it('bare, provider/model, provider/*, * (lower-cased); anything else is refused naming the rule', () => {
    expect(['GPT-4o-Mini', 'openai/gpt-4o', 'Anthropic/*', '*', 'meta-llama/llama-3.1-70b@v2', 'together/meta-llama/llama-3'].map(validatePriceModel)).toEqual([
      'gpt-4o-mini', 'openai/gpt-4o', 'anthropic/*', '*', 'meta-llama/llama-3.1-70b@v2', 'together/meta-llama/llama-3',
    ]);
    for (const bad of ['', ' gpt-4o', 'gpt 4o', 'gpt-*', '*/gpt-4o', 'mistral/*', 'openai/', '/gpt', 'a//b', 'x'.repeat(129), 'gpt-4o\n', 'é', '-gpt']) {
      expect(() => validatePriceModel(bad), JSON.stringify(bad)).toThrow(/model/);
    }
  });
});

describe('the management API', () => {
  it('PUT sets what the sidecar\'s pricing reads (case-insensitive, URL-encoded /), GET lists it, DELETE removes it; each audited', async () => {
    const put = await callApi(base, 'PUT', `/v1/prices/${encodeURIComponent('OpenAI/GPT-4o')}`, { token: admin, body: { input_micros: 2_500_000, output_micros: 10_000_000, cached_input_micros: 1_250_000 } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ model: 'openai/gpt-4o', input_micros: 2_500_000, output_micros: 10_000_000, cached_input_micros: 1_250_000, cache_write_micros: null });
    expect(Date.parse(put.body.updated_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(await priced('gpt-4o', 'openai')).toEqual({ matched: 'openai/gpt-4o', base: { input: 2_500_000n, output: 10_000_000n, cached_input: 1_250_000n } });
    expect(await auditHead()).toMatchObject({ action: 'price_set', account: null, actor: { type: 'token', name: 'ops' }, changes: { model: 'openai/gpt-4o', input_micros: 2_500_000, cached_input_micros: 1_250_000 } });

    // A free model and a catch-all.
    expect((await callApi(base, 'PUT', '/v1/prices/*', { token: admin, body: { input_micros: 0, output_micros: 0 } })).status).toBe(200);
    expect((await priced('unknown-model', 'google'))?.matched).toBe('*');

    const list = await callApi(base, 'GET', '/v1/prices', { token: admin });
    expect(list.status).toBe(200);
    expect(list.body.prices.map((p: { model: string }) => p.model)).toEqual(['*', 'openai/gpt-4o']);

    const del = await callApi(base, 'DELETE', `/v1/prices/${encodeURIComponent('openai/GPT-4o')}`, { token: admin });
    expect(del.status).toBe(204);
    expect((await priced('gpt-4o', 'openai'))?.matched).toBe('*');
    expect(await auditHead()).toMatchObject({ action: 'price_remove', changes: { model: 'openai/gpt-4o' } });
    const again = await callApi(base, 'DELETE', `/v1/prices/${encodeURIComponent('openai/gpt-4o')}`, { token: admin });
    expect([again.status, again.body.error.code]).toEqual([404, 'NOT_FOUND']);
  });

  it('an account-scoped token gets 403 on every price route, and changes nothing', async () => {
    const before = await snapshot(db);
    for (const [method, path, body] of [['GET', '/v1/prices'], ['PUT', '/v1/prices/gpt-4o-mini', { input_micros: 1, output_micros: 1 }], ['DELETE', '/v1/prices/*']] as const) {
      const r = await callApi(base, method, path, { token: owner, body });
      expect([method, r.status, r.body.error?.code]).toEqual([method, 403, 'FORBIDDEN']);
    }
    expect(await snapshot(db)).toEqual(before);
  });

  it('bad models and prices: 400 naming the field, nothing changed', async () => {
    await callApi(base, 'PUT', '/v1/prices/gpt-4o-mini', { token: admin, body: { input_micros: 150_000, output_micros: 600_000 } });
    const before = await snapshot(db);
    const cases: [string, unknown, RegExp][] = [
      ['mistral%2F*', { input_micros: 1, output_micros: 1 }, /a wildcard needs a provider/],
      ['gpt%20x', { input_micros: 1, output_micros: 1 }, /not a model name/],
      ['gpt-4o-mini', { input_micros: -1, output_micros: 1 }, /^body\.input_micros: /],
      ['gpt-4o-mini', { input_micros: 1.5, output_micros: 1 }, /^body\.input_micros: /],
      ['gpt-4o-mini', { input_micros: 1, output_micros: 10 ** 12 + 1 }, /^body\.output_micros: /],
      ['gpt-4o-mini', { input_micros: 1 }, /^body\.output_micros: /],
      ['gpt-4o-mini', { input_micros: 1, output_micros: 1, reasoning_micros: 1 }, /unknown field/],
    ];
    for (const [model, body, message] of cases) {
      const r = await callApi(base, 'PUT', `/v1/prices/${model}`, { token: admin, body });
      expect([model, r.status, r.body.error.code]).toEqual([model, 400, 'INVALID_INPUT']);
      expect(r.body.error.message).toMatch(message);
    }
    expect(await snapshot(db)).toEqual(before);
  });
});

describe('the CLI', () => {
  it('set (decimal AMOUNT per million → micro-units), list, remove; audited as the cli; bad input changes nothing', async () => {
    const set = await keygate(['prices', 'set', 'Anthropic/*', '--input', '3', '--output', '15.000001', '--cache-write', '3.75', '--json']);
    expect([set.code, set.stderr]).toEqual([0, '']);
    expect(JSON.parse(set.stdout)).toMatchObject({ model: 'anthropic/*', input_micros: 3_000_000, output_micros: 15_000_001, cached_input_micros: null, cache_write_micros: 3_750_000 });
    expect(await priced('claude-sonnet-4', 'anthropic')).toEqual({ matched: 'anthropic/*', base: { input: 3_000_000n, output: 15_000_001n, cache_write: 3_750_000n } });
    expect(await auditHead()).toMatchObject({ action: 'price_set', actor: { type: 'cli' }, changes: { model: 'anthropic/*' } });

    const before = await snapshot(db);
    for (const args of [
      ['prices', 'set', 'gpt 4o', '--input', '1', '--output', '1'],
      ['prices', 'set', 'gpt-4o', '--input', '1.0000001', '--output', '1'],
      ['prices', 'set', 'gpt-4o', '--input', '-1', '--output', '1'],
      ['prices', 'set', 'gpt-4o', '--input', '1000001', '--output', '1'],
    ]) {
      const r = await keygate(args);
      expect([args.join(' '), r.code, r.stdout]).toEqual([args.join(' '), 2, '']);
      expect(r.stderr).toMatch(/^keygate: (model|--input)/);
    }
    expect(await snapshot(db)).toEqual(before);

    const list = await keygate(['prices', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^MODEL +INPUT +OUTPUT +CACHED INPUT +CACHE WRITE +UPDATED\n/);
    expect(list.stdout).toMatch(/\nanthropic\/\* +3 +15\.000001 +\(input\) +3\.75 /);
    const rm = await keygate(['prices', 'remove', 'anthropic/*']);
    expect([rm.code, rm.stdout]).toEqual([0, 'Removed the price of anthropic/*.\n']);
    expect((await priced('claude-sonnet-4', 'anthropic'))?.matched).not.toBe('anthropic/*');
    const json = JSON.parse((await keygate(['prices', 'list', '--json'])).stdout);
    expect(json.prices.map((p: { model: string }) => p.model)).not.toContain('anthropic/*');
  }, 120_000);
});
