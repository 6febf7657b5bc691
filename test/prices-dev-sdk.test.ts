/**
 * Issue 34's "Done when": with nothing but the price catalog and `keygate dev`'s stack (no price
 * table at all), the official OpenAI, Anthropic and Google SDKs, streamed and not, each answered with
 * a dated model name (gpt-4o-2024-08-06, claude-haiku-4-5-20251001, gemini-2.0-flash-001), debit
 * the demo wallet by the provider's list price to the micro-unit; `keygate prices show` (the real
 * CLI) explains it; every usage entry says why (`price`: rule, model, source, catalog version,
 * parts that make the amount); and `keygate dev` printed what one demo request costs.
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import type { Redis } from 'ioredis';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STUB_USAGE, UPSTREAM_TEXT } from '../src/dev/stub-upstream.ts';
import type { UsageEntry } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { expectDebit as debit, startDevStack, type DevStack } from './helpers/dev-stack.ts';

const s = schema();
const account = 'demo';
const VERSION = '@pydantic/genai-prices@0.1.8';
let stack: DevStack | undefined;
let db: Redis;
let key: string;
let base: string;

beforeAll(async () => {
  stack = await startDevStack('kg-prices-dev-');
  ({ db, key, base } = stack);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

const expectDebit = (cost: number, call: () => Promise<void>) => debit(db, account, cost, call);

const keygate = (args: string[]) => stack!.keygate(args);

// The providers' list prices (per million tokens, in dollars: the published pricing pages, as the
// catalog carries them), for the stub's 12 input and 5 output tokens, in micro-units:
const { input: IN, output: OUT } = STUB_USAGE;
/** OpenAI gpt-4o: $2.50 in, $10 out → 30 + 50. */
const GPT_4O = IN * 2.5 + OUT * 10;
/** Anthropic Claude Haiku 4.5: $1 in, $5 out → 12 + 25. */
const HAIKU_45 = IN * 1 + OUT * 5;
/** Google Gemini 2.0 Flash: $0.10 in, $0.40 out → 1.2 + 2 = 3.2 → 4 (one ceiling). */
const FLASH_20 = Math.ceil(IN * 0.1 + OUT * 0.4);

function expectWhy(e: UsageEntry, want: { answered: string; pricedBy: string; parts: Record<string, string> }): void {
  expect(e.model).toBe(want.answered);
  expect(e.unpriced).toBe(false);
  expect(e.price).toMatchObject({ rule: 'catalog', model: want.pricedBy, source: 'catalog', catalog_version: VERSION, tier: null, multiplier: '1', parts: want.parts });
  const sum = Object.values(e.price!.parts as Record<string, string>).reduce((a, v) => a + Number(v), 0);
  expect(Math.ceil(sum - 1e-9)).toBe(e.amountMicros);
}

describe('the provider\'s list price, with nothing but the catalog and keygate dev', () => {
  it('no price table: dev set none, and printed what one demo request costs', async () => {
    expect(await db.hlen(s.prices())).toBe(0);
    expect(stack!.dev.banner.join('\n')).toContain(`one demo request (gpt-4o, answered gpt-4o-2024-08-06, 12 input + 5 output tokens) costs 0.00008 (80 micro-units) from the catalog, ${VERSION}`);
  });

  it('OpenAI chat, not streamed and streamed, answered gpt-4o-2024-08-06', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    const e1 = await expectDebit(GPT_4O, async () => {
      const r = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
      expect(r.model).toBe('gpt-4o-2024-08-06');
      expect(r.choices[0]!.message.content).toBe(UPSTREAM_TEXT);
    });
    expectWhy(e1, { answered: 'gpt-4o-2024-08-06', pricedBy: 'openai/gpt-4o', parts: { input: '30', output: '50' } });
    const e2 = await expectDebit(GPT_4O, async () => {
      let model = '';
      for await (const c of await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], stream: true })) model = c.model;
      expect(model).toBe('gpt-4o-2024-08-06');
    });
    expectWhy(e2, { answered: 'gpt-4o-2024-08-06', pricedBy: 'openai/gpt-4o', parts: { input: '30', output: '50' } });
  });

  it('Anthropic messages, not streamed and streamed, answered claude-haiku-4-5-20251001', async () => {
    const client = new Anthropic({ apiKey: key, baseURL: `${base}/anthropic`, maxRetries: 0 });
    const e1 = await expectDebit(HAIKU_45, async () => {
      const r = await client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
      expect(r.model).toBe('claude-haiku-4-5-20251001');
    });
    expectWhy(e1, { answered: 'claude-haiku-4-5-20251001', pricedBy: 'anthropic/claude-haiku-4-5', parts: { input: '12', output: '25' } });
    const e2 = await expectDebit(HAIKU_45, async () => {
      const final = await client.messages.stream({ model: 'claude-haiku-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
      expect(final.model).toBe('claude-haiku-4-5-20251001');
    });
    expectWhy(e2, { answered: 'claude-haiku-4-5-20251001', pricedBy: 'anthropic/claude-haiku-4-5', parts: { input: '12', output: '25' } });
  });

  it('Google generateContent, not streamed and streamed, answered gemini-2.0-flash-001', async () => {
    const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: `${base}/google` } });
    const e1 = await expectDebit(FLASH_20, async () => {
      const r = await ai.models.generateContent({ model: 'gemini-2.0-flash', contents: 'hi' });
      expect(r.modelVersion).toBe('gemini-2.0-flash-001');
    });
    expectWhy(e1, { answered: 'gemini-2.0-flash-001', pricedBy: 'google/gemini-2.0-flash', parts: { input: '1.2', output: '2' } });
    const e2 = await expectDebit(FLASH_20, async () => {
      let text = '';
      for await (const c of await ai.models.generateContentStream({ model: 'gemini-2.0-flash', contents: 'hi' })) text += c.text ?? '';
      expect(text).toBe(UPSTREAM_TEXT);
    });
    expectWhy(e2, { answered: 'gemini-2.0-flash-001', pricedBy: 'google/gemini-2.0-flash', parts: { input: '1.2', output: '2' } });
  });

  it('the account\'s price multiplier (`accounts update --price-multiplier`) applies last: 1.5 × 80 = 120; 0 makes it free', async () => {
    expect(await keygate(['accounts', 'update', account, '--price-multiplier', '1.5'])).toBe(`Account ${account}: price multiplier 1.5.\n`);
    expect(JSON.parse(await keygate(['accounts', 'show', account, '--json']))).toMatchObject({ id: account, price_multiplier: '1.5' });
    await new Promise((r) => setTimeout(r, 500)); // the sidecar sees the account change within its staleness bound
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    const chat = async () => void (await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }));
    const e = await expectDebit(GPT_4O * 1.5, chat);
    expect(e.price).toMatchObject({ rule: 'catalog', multiplier: '1.5', account_multiplier: '1.5', service_tier_multiplier: '1', parts: { input: '45', output: '75' } });
    await keygate(['accounts', 'update', account, '--price-multiplier', '0']);
    await new Promise((r) => setTimeout(r, 500));
    expect((await expectDebit(0, chat)).price).toMatchObject({ multiplier: '0', parts: { input: '0', output: '0' } });
    await keygate(['accounts', 'update', account, '--price-multiplier', '1']);
    expect(JSON.parse(await keygate(['accounts', 'show', account, '--json'])).price_multiplier).toBeUndefined();
    await expect(keygate(['accounts', 'update', account, '--price-multiplier', '1.0000001'])).rejects.toThrow(/price multiplier must be a decimal/);
  });

  it('`keygate prices show` explains each dated name; `prices catalog` names the version; the usage export carries the price', async () => {
    const shown = JSON.parse(await keygate(['prices', 'show', 'gpt-4o-2024-08-06', '--json']));
    expect(shown).toMatchObject({ model: 'gpt-4o-2024-08-06', provider: 'openai', rule: 'catalog', priced_by: 'openai/gpt-4o', source: 'catalog', catalog_model: 'openai/gpt-4o', catalog_version: VERSION, price: { prices: { input: 2_500_000, output: 10_000_000, cached_input: 1_250_000 } } });
    const claude = JSON.parse(await keygate(['prices', 'show', 'claude-haiku-4-5-20251001', '--json']));
    expect(claude).toMatchObject({ provider: 'anthropic', rule: 'catalog', priced_by: 'anthropic/claude-haiku-4-5', price: { prices: { input: 1_000_000, output: 5_000_000, cache_write: 1_250_000, cache_write_1h: 2_000_000, web_search: 10_000_000 } } });
    const text = await keygate(['prices', 'show', 'gemini-2.0-flash-001']);
    expect(text).toContain('gemini-2.0-flash-001 (provider google)');
    expect(text).toContain('priced by      google/gemini-2.0-flash (rule catalog, source catalog)');
    expect(text).toMatch(/input 0\.1\b/);
    expect(await keygate(['prices', 'catalog'])).toContain(VERSION);
    // the account's ledger (the page's source) names the rule and the priced model of each metered charge
    const ledger = await fetch(`${stack!.dev.ctx.console!.url}/v1/accounts/${account}/ledger?limit=50`, { headers: { authorization: `Bearer ${stack!.dev.ctx.console!.token}` } });
    const charges = ((await ledger.json()) as { entries: { type: string; model: string | null; price_rule?: string; priced_by?: string | null }[] }).entries.filter((e) => e.type === 'charge');
    expect(charges.length).toBeGreaterThanOrEqual(6);
    expect(charges.find((e) => e.model === 'claude-haiku-4-5-20251001')).toMatchObject({ price_rule: 'catalog', priced_by: 'anthropic/claude-haiku-4-5' });
    const lines = (await keygate(['usage', 'export', '--account', account, '--since', new Date(Date.now() - 3_600_000).toISOString()])).trim().split('\n').map((l) => JSON.parse(l) as { price?: { rule: string } });
    expect(lines.length).toBeGreaterThanOrEqual(6);
    expect(lines.every((l) => l.price?.rule === 'catalog')).toBe(true);
  });
});
