/**
 * Section 16 from the console, over a real redis-server, a real management API and the real CLI:
 * the catalog beside the table (`prices list --source`, `GET /v1/prices?source`), how a name
 * resolves (`prices show`, `GET /v1/prices/{model}`), the catalog in use (`prices catalog`,
 * `GET /v1/price-catalog`), and the table taking the new classes, tiers and service tiers
 * (`prices set --tier … --service-tier …`, `PUT /v1/prices/{model}`), validated (a bad one changes
 * nothing), documented in the OpenAPI document, and read by the sidecar's pricing as set.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { priceUsage } from '../src/prices/basis.ts';
import { priceCatalog } from '../src/prices/index.ts';
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
const fx = useTestConsole(`mine-${randomBytes(4).toString('hex')}`);
beforeAll(() => {
  ({ redis, db, srv, base, admin, owner } = fx);
});

function keygate(args: string[], extraEnv: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', KEYGATE_NODE: process.execPath, REDIS_URL: redis.url, ...extraEnv };
  return new Promise((resolve) => execFile(BIN, args, { env, timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr })));
}
const table = async () => PriceTable.fromHash(await db.hgetall(pricesKey(srv.console.schema.ns)));
const VERSION = '@pydantic/genai-prices@0.1.8';

describe('the management API', () => {
  it('GET /v1/price-catalog and GET /v1/prices?source=catalog|all: the catalog beside the table', async () => {
    expect((await callApi(base, 'GET', '/v1/price-catalog', { token: admin })).body).toEqual({ enabled: true, version: VERSION, providers: ['openai', 'anthropic', 'google'], models: expect.any(Number) });
    await callApi(base, 'PUT', '/v1/prices/my-model', { token: admin, body: { input_micros: 1, output_micros: 2 } });
    const cat = (await callApi(base, 'GET', '/v1/prices?source=catalog', { token: admin })).body.prices;
    expect(cat.length).toBeGreaterThan(100);
    expect(cat.find((p: { model: string }) => p.model === 'openai/gpt-4o')).toMatchObject({ source: 'catalog', prices: { input: 2_500_000, cached_input: 1_250_000, output: 10_000_000 } });
    expect(cat.find((p: { model: string }) => p.model === 'google/gemini-2.5-pro')).toMatchObject({ tiers: [{ above: 200_000, prices: { input: 2_500_000, output: 15_000_000 } }] });
    const all = (await callApi(base, 'GET', '/v1/prices?source=all', { token: admin })).body.prices;
    expect(all[0]).toMatchObject({ model: 'my-model', source: 'table' });
    expect(all.length).toBe(cat.length + 1);
    expect((await callApi(base, 'GET', '/v1/prices', { token: admin })).body.prices.map((p: { model: string }) => p.model)).toEqual(['my-model']);
    expect((await callApi(base, 'GET', '/v1/prices?source=both', { token: admin })).status).toBe(400);
  });

  it('GET /v1/prices/{model}: how a dated name resolves, the table winning for its catalog model', async () => {
    const r = await callApi(base, 'GET', `/v1/prices/${encodeURIComponent('claude-3-5-sonnet-20241022')}`, { token: admin });
    expect(r.body).toMatchObject({ provider: 'anthropic', rule: 'catalog', priced_by: 'anthropic/claude-3-5-sonnet', catalog_model: 'anthropic/claude-3-5-sonnet', catalog_version: VERSION, price: { prices: { cache_write_1h: 6_000_000, web_search: 10_000_000 } } });
    await callApi(base, 'PUT', '/v1/prices/claude-3-5-sonnet-latest', { token: admin, body: { input_micros: 1_000_000, output_micros: 2_000_000 } });
    const t = await callApi(base, 'GET', '/v1/prices/claude-3-5-sonnet-20241022', { token: admin });
    expect(t.body).toMatchObject({ rule: 'table-catalog-model', priced_by: 'claude-3-5-sonnet-latest', source: 'table', price: { prices: { input: 1_000_000, output: 2_000_000, cache_write_1h: 1_000_000, web_search: 0 } } });
    const none = await callApi(base, 'GET', '/v1/prices/no-such-model?provider=google', { token: admin });
    expect(none.body).toMatchObject({ provider: 'google', rule: null, priced_by: null, price: null });
    expect((await callApi(base, 'GET', '/v1/prices/gpt-4o?provider=mistral', { token: admin })).status).toBe(400);
    for (const path of ['/v1/prices/gpt-4o', '/v1/price-catalog', '/v1/prices?source=catalog']) expect((await callApi(base, 'GET', path, { token: owner })).status).toBe(403);
  });

  it('PUT takes section 16\'s classes, tiers and service tiers; the sidecar prices by them; bad ones are refused and change nothing', async () => {
    const body = {
      input_micros: 1_000_000, output_micros: 10_000_000, cached_input_micros: 100_000, cache_write_1h_micros: 2_000_000, input_audio_micros: 5_000_000, web_search_micros: 10_000_000,
      tiers: [{ above: 200_000, input_micros: 2_000_000, output_micros: 15_000_000 }], service_tiers: { flex: '0.5', priority: '1.75' },
    };
    const put = await callApi(base, 'PUT', '/v1/prices/openai%2Fo3', { token: admin, body });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ model: 'openai/o3', cache_write_1h_micros: 2_000_000, input_audio_micros: 5_000_000, web_search_micros: 10_000_000, tiers: [{ above: 200_000, input_micros: 2_000_000, output_micros: 15_000_000 }], service_tiers: { flex: '0.5', priority: '1.75' } });
    // what the sidecar reads: 300k input (tier), 1000 output, priority 1.75 → (300000 × 2 + 1000 × 15) × 1.75 = 1 076 250
    const p = priceUsage({ table: await table(), catalog: priceCatalog(true), provider: 'openai', model: 'o3-2025-04-16', requested: null, usage: { input_tokens: 300_000, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 1000, service_tier: 'priority' }, at: Date.now() });
    expect([p.amount, p.basis.rule, p.basis.tier, p.basis.multiplier]).toEqual([1_076_250n, 'table-catalog-model', 200_000, '1.75']);

    const before = await snapshot(db);
    const bad: [unknown, RegExp][] = [
      [{ ...body, tiers: [{ above: 5, input_micros: 1 }, { above: 5, input_micros: 2 }] }, /ascend/],
      [{ ...body, tiers: [{ above: 5 }] }, /prices no class/],
      [{ ...body, tiers: [{ above: 5, reasoning_micros: 1 }] }, /unknown field|reasoning/],
      [{ ...body, service_tiers: { flex: '0.1234567' } }, /multiplier/],
      [{ ...body, service_tiers: { flex: '1e3' } }, /multiplier/],
      [{ ...body, service_tiers: { flex: '1001' } }, /multiplier/],
      [{ ...body, service_tiers: { 'Flex Tier': '1' } }, /service tier/],
      [{ ...body, web_search_micros: -1 }, /web_search_micros/],
      [{ ...body, tiers: Array.from({ length: 9 }, (_, i) => ({ above: i, input_micros: 1 })) }, /tiers/],
    ];
    for (const [b, message] of bad) {
      const r = await callApi(base, 'PUT', '/v1/prices/gpt-4o-mini', { token: admin, body: b });
      expect([r.status, r.body.error.code], JSON.stringify(b).slice(0, 200)).toEqual([400, 'INVALID_INPUT']);
      expect(r.body.error.message).toMatch(message);
    }
    expect(await snapshot(db)).toEqual(before);
  });

  it('PATCH /v1/accounts/{account} {price_multiplier}: set, shown in the account view, audited; bad ones refused, nothing changed; owners may not', async () => {
    const acct = `pm-${randomBytes(3).toString('hex')}`;
    const r = await callApi(base, 'PATCH', `/v1/accounts/${acct}`, { token: admin, body: { price_multiplier: '1.2' } });
    expect([r.status, r.body.price_multiplier]).toEqual([200, '1.2']);
    expect((await callApi(base, 'GET', `/v1/accounts/${acct}`, { token: admin })).body.price_multiplier).toBe('1.2');
    expect((await callApi(base, 'GET', '/v1/audit?limit=1', { token: admin })).body.events[0]).toMatchObject({ action: 'update', account: acct, changes: { price_multiplier: '1.2' } });
    const before = await snapshot(db);
    for (const bad of ['-1', '1.2.3', '1e2', '1001', 'x', '0.0000001']) {
      const b = await callApi(base, 'PATCH', `/v1/accounts/${acct}`, { token: admin, body: { price_multiplier: bad } });
      expect([bad, b.status, b.body.error.code]).toEqual([bad, 400, 'INVALID_INPUT']);
    }
    expect((await callApi(base, 'PATCH', `/v1/accounts/${acct}`, { token: owner, body: { price_multiplier: '0' } })).status).toBe(403);
    // with other changes in the same PATCH: the bad multiplier refuses them all
    const mixed = await callApi(base, 'PATCH', `/v1/accounts/${acct}`, { token: admin, body: { rate: { requests: 10, per: 'second' }, token_rate: { tokens: 1000, per: 'minute' }, billing: 'external', price_multiplier: 'x' } });
    expect([mixed.status, mixed.body.error.code]).toEqual([400, 'INVALID_INPUT']);
    expect(await snapshot(db)).toEqual(before);
    const one = await callApi(base, 'PATCH', `/v1/accounts/${acct}`, { token: admin, body: { price_multiplier: 1 } });
    expect([one.status, one.body.price_multiplier]).toEqual([200, undefined]);
  });

  it('the OpenAPI document describes the new routes and the usage entry\'s price', async () => {
    const doc = (await callApi(base, 'GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/prices/{model}', '/v1/price-catalog']));
    expect(doc.paths['/v1/prices/{model}'].get.operationId).toBe('showPrice');
    expect(JSON.stringify(doc)).toContain('catalog_version');
  });
});

describe('the CLI', () => {
  it('prices set with tiers, service tiers and classes; prices show; prices catalog; prices list --source catalog', async () => {
    const set = await keygate(['prices', 'set', 'gemini-2.5-pro', '--input', '1.25', '--output', '10', '--input-audio', '3', '--tier', '200000:input=2.5,output=15', '--service-tier', 'priority=1.8', '--json']);
    expect([set.code, set.stderr]).toEqual([0, '']);
    expect(JSON.parse(set.stdout)).toMatchObject({ model: 'gemini-2.5-pro', input_audio_micros: 3_000_000, tiers: [{ above: 200_000, input_micros: 2_500_000, output_micros: 15_000_000 }], service_tiers: { priority: '1.8' } });
    const show = await keygate(['prices', 'show', 'models/gemini-2.5-pro', '--provider', 'google']);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain('priced by      gemini-2.5-pro (rule table-catalog-model, source table)');
    expect(show.stdout).toContain('above 200000 input tokens, the whole request: input 2.5,');
    expect(show.stdout).toContain('service tiers: priority ×1.8');
    expect((await keygate(['prices', 'catalog'])).stdout).toContain(`${VERSION}: `);
    const off = await keygate(['prices', 'catalog', '--json'], { KEYGATE_PRICE_CATALOG: 'false' });
    expect(JSON.parse(off.stdout)).toEqual({ enabled: false, version: null, providers: [], models: 0 });
    const offShow = JSON.parse((await keygate(['prices', 'show', 'gpt-4o-2024-08-06', '--json'], { KEYGATE_PRICE_CATALOG: 'false' })).stdout);
    expect(offShow).toMatchObject({ rule: null, catalog_model: null, catalog_version: null });
    const list = await keygate(['prices', 'list', '--source', 'catalog']);
    expect(list.stdout).toMatch(/\nopenai\/gpt-4o +2\.5 +10 +1\.25 +2\.5 +catalog/);
    const before = await snapshot(db);
    for (const args of [['prices', 'set', 'x', '--input', '1', '--output', '1', '--tier', '200000'], ['prices', 'set', 'x', '--input', '1', '--output', '1', '--service-tier', 'flex'], ['prices', 'set', 'x', '--input', '1', '--output', '1', '--service-tier', 'flex=-1'], ['prices', 'list', '--source', 'both']]) {
      const r = await keygate(args);
      expect([args.join(' '), r.code]).toEqual([args.join(' '), 2]);
      expect(r.stderr).toMatch(/^keygate: /);
    }
    expect(await snapshot(db)).toEqual(before);
  }, 120_000);
});
