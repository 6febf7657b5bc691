/**
 * The price conformance suite (docs/metering.md, "Conformance"): recorded responses of each family
 * (test/fixtures/prices, shapes from the official SDKs' types and the providers' references) read
 * by a real MeterSession, priced against the catalog of @pydantic/genai-prices and against explicit
 * tables, → the expected micro-units and the rule that priced them. A price change in the catalog
 * that moves one of these numbers fails here.
 *
 * The bugs of issue 34 are cases (each `bug:`): dated names booking 0; one-hour cache writes at the
 * five-minute rate; Gemini toolUsePromptTokenCount unread; the Gemini 2.5 Pro tier above 200k
 * ignored; OpenAI flex at the standard rate; web-search calls unbilled; audio and image tokens at
 * the text rate.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { calcPrice } from '@pydantic/genai-prices';
import { describe, expect, it } from 'vitest';
import { priceBooking } from '../../src/metering/booker.ts';
import type { Booking } from '../../src/metering/session.ts';
import { encodePrice, PriceTable, type PriceRecord } from '../../src/schema/prices.ts';
import { run, splitAt } from './metering-helpers.ts';

const FIX = join(import.meta.dirname, '..', 'fixtures', 'prices');
/** The booking time of every case: the catalog's prices that change on a date are chosen at it. */
const AT = Date.parse('2026-12-01T12:00:00Z');

// The catalog, loaded through its module (a control: the suite fails if it cannot be loaded).
const { priceCatalog } = await import('../../src/prices/index.ts');
const CATALOG = priceCatalog(true);

const M = 1_000_000; // micro-units of one dollar

interface Case {
  name: string;
  file: string;
  path: string;
  type: string;
  requestModel?: string;
  /** The operator's table (model → price in micro-units per million tokens); none: the catalog alone. */
  table?: Record<string, PriceRecord>;
  want: { amount: number; rule: string; model: string; tier?: number | null; service_tier?: string | null; parts?: Record<string, string> };
}

const CASES: Case[] = [
  // ── dated names ──
  { name: 'catalog: a dated OpenAI name (gpt-4o-2024-08-06) prices as gpt-4o', file: 'openai-chat-dated.json', path: '/v1/chat/completions', type: 'application/json', want: { amount: 3250, rule: 'catalog', model: 'openai/gpt-4o', parts: { input: '2000', cached_input: '250', output: '1000' } } },
  {
    name: 'bug: dated names booked 0 — the table names gpt-4o, the provider answers gpt-4o-2024-08-06',
    file: 'openai-chat-dated.json', path: '/v1/chat/completions', type: 'application/json',
    table: { 'gpt-4o': { input: 5 * M, output: 15 * M, cachedInput: 2.5 * M } },
    want: { amount: 800 * 5 + 200 * 2.5 + 100 * 15, rule: 'table-catalog-model', model: 'gpt-4o' },
  },
  {
    name: 'bug: dated names booked 0 — the table names claude-3-5-sonnet-latest, the provider answers claude-3-5-sonnet-20241022',
    file: 'anthropic-web-search-stream.sse', path: '/v1/messages', type: 'text/event-stream',
    table: { 'claude-3-5-sonnet-latest': { input: 3 * M, output: 15 * M } },
    // the operator's entry overrides the catalog's model whole: it has no web-search price (0)
    want: { amount: 9000 * 3 + 400 * 15, rule: 'table-catalog-model', model: 'claude-3-5-sonnet-latest' },
  },
  // ── one-hour cache writes ──
  {
    name: 'bug: one-hour cache writes at the five-minute rate (catalog)',
    file: 'anthropic-cache-1h.json', path: '/v1/messages', type: 'application/json',
    want: { amount: 100 * 3 + 500 * 0.3 + 1000 * 3.75 + 2000 * 6 + 200 * 15, rule: 'catalog', model: 'anthropic/claude-sonnet-4-5', parts: { input: '300', cached_input: '150', cache_write: '3750', cache_write_1h: '12000', output: '3000' } },
  },
  {
    name: 'one-hour cache writes at the table\'s cache_write_1h price',
    file: 'anthropic-cache-1h.json', path: '/v1/messages', type: 'application/json',
    table: { 'anthropic/claude-sonnet-4-5-20250929': { input: 3 * M, output: 15 * M, cachedInput: 0.3 * M, cacheWrite: 3.75 * M, extra: { cache_write_1h: 6 * M } } },
    want: { amount: 19200, rule: 'table', model: 'anthropic/claude-sonnet-4-5-20250929' },
  },
  // ── Gemini tool-use prompt tokens ──
  {
    name: 'bug: Gemini toolUsePromptTokenCount unread (input outside promptTokenCount)',
    file: 'google-tool-use.json', path: '/v1beta/models/gemini-2.5-flash:generateContent', type: 'application/json',
    want: { amount: (100 + 400) * 0.3 + (50 + 20) * 2.5, rule: 'catalog', model: 'google/gemini-2.5-flash' },
  },
  // ── whole-request tiers ──
  {
    name: 'bug: the Gemini 2.5 Pro tier above 200k input ignored (every class at the tier)',
    file: 'google-pro-long-stream.sse', path: '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse', type: 'text/event-stream',
    want: { amount: 200_000 * 2.5 + 50_000 * 0.25 + 1500 * 15, rule: 'catalog', model: 'google/gemini-2.5-pro', tier: 200_000 },
  },
  {
    name: 'a table tier: above 100000 input tokens, input and output priced anew, cached input at its base',
    file: 'google-pro-long-stream.sse', path: '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse', type: 'text/event-stream',
    table: { 'google/gemini-2.5-pro': { input: 1 * M, output: 10 * M, cachedInput: 0.1 * M, tiers: [{ above: 100_000, input: 2 * M, output: 20 * M }, { above: 300_000, input: 9 * M, output: 90 * M }] } },
    want: { amount: 200_000 * 2 + 50_000 * 0.1 + 1500 * 20, rule: 'table', model: 'google/gemini-2.5-pro', tier: 100_000 },
  },
  // ── service tiers ──
  {
    name: 'bug: OpenAI flex billed at the standard rate (catalog, default flex 0.5)',
    file: 'openai-chat-flex.json', path: '/v1/chat/completions', type: 'application/json',
    want: { amount: (6000 * 2 + 4000 * 0.5 + 2000 * 8) / 2, rule: 'catalog', model: 'openai/o3', service_tier: 'flex' },
  },
  {
    name: 'OpenAI flex, streamed (service_tier on every chunk)',
    file: 'openai-chat-flex-stream.sse', path: '/v1/chat/completions', type: 'text/event-stream',
    want: { amount: 15_000, rule: 'catalog', model: 'openai/o3', service_tier: 'flex' },
  },
  {
    name: 'flex at the operator\'s multiplier for the model (0.4)',
    file: 'openai-chat-flex.json', path: '/v1/chat/completions', type: 'application/json',
    table: { o3: { input: 2 * M, output: 8 * M, cachedInput: 0.5 * M, serviceTiers: { flex: '0.4' } } },
    want: { amount: 12_000, rule: 'table-catalog-model', model: 'o3', service_tier: 'flex' },
  },
  // ── per-call fees ──
  {
    name: 'bug: web-search calls unbilled (3 calls at 10 per thousand)',
    file: 'anthropic-web-search-stream.sse', path: '/v1/messages', type: 'text/event-stream',
    want: { amount: 9000 * 3 + 400 * 15 + 3 * 10_000, rule: 'catalog', model: 'anthropic/claude-3-5-sonnet', parts: { input: '27000', output: '6000', web_search: '30000' } },
  },
  // ── modalities ──
  {
    name: 'bug: OpenAI audio tokens at the text rate (gpt-audio, audio in and out)',
    file: 'openai-chat-audio.json', path: '/v1/chat/completions', type: 'application/json',
    want: { amount: 200 * 2.5 + 1000 * 32 + 100 * 10 + 800 * 64, rule: 'catalog', model: 'openai/gpt-audio' },
  },
  {
    name: 'bug: Gemini image output at the text rate (gemini-2.5-flash-image; audio input without its own price: the input rate)',
    file: 'google-audio-image.json', path: '/v1beta/models/gemini-2.5-flash-image:generateContent', type: 'application/json',
    want: { amount: 1600 * 0.3 + 1290 * 30 + 10 * 2.5, rule: 'catalog', model: 'google/gemini-2.5-flash-image' },
  },
  {
    name: 'Gemini audio input at the table\'s input_audio price',
    file: 'google-audio-image.json', path: '/v1beta/models/gemini-2.5-flash-image:generateContent', type: 'application/json',
    table: { 'gemini-2.5-flash-image': { input: 0.3 * M, output: 2.5 * M, extra: { input_audio: 1 * M, output_image: 30 * M } } },
    want: { amount: 100 * 0.3 + 1500 * 1 + 1290 * 30 + 10 * 2.5, rule: 'table', model: 'gemini-2.5-flash-image' },
  },
  // ── the order of names ──
  {
    name: 'the requested model when the answered one has no price',
    file: 'openai-chat-dated.json', path: '/v1/chat/completions', type: 'application/json',
    requestModel: 'my-alias',
    table: { 'my-alias': { input: 1 * M, output: 1 * M } },
    // gpt-4o-2024-08-06 resolves in the catalog first: the requested name is not reached
    want: { amount: 3250, rule: 'catalog', model: 'openai/gpt-4o' },
  },
  {
    name: 'the table as named wins over the catalog',
    file: 'openai-chat-dated.json', path: '/v1/chat/completions', type: 'application/json',
    table: { 'gpt-4o-2024-08-06': { input: 1 * M, output: 1 * M } },
    want: { amount: 1100, rule: 'table', model: 'gpt-4o-2024-08-06' },
  },
];

async function booking(c: Case): Promise<Booking> {
  const body = readFileSync(join(FIX, c.file));
  const { outcome } = await run({ path: c.path, contentType: c.type, chunks: [body], ...(c.requestModel ? { requestBody: JSON.stringify({ model: c.requestModel, messages: [] }) } : {}) });
  if (outcome.kind !== 'booking') throw new Error(`no booking: ${outcome.reason}`);
  return outcome.booking;
}

function tableOf(t: Record<string, PriceRecord> | undefined): PriceTable {
  return PriceTable.fromHash(Object.fromEntries(Object.entries(t ?? {}).map(([k, v]) => [k.toLowerCase(), encodePrice(v)])));
}

describe('price conformance: recorded responses × prices → micro-units', () => {
  it('the catalog is the pinned package, loaded without the network', () => {
    expect(CATALOG?.version).toBe('@pydantic/genai-prices@0.1.8');
    expect(CATALOG!.models().length).toBeGreaterThan(100);
  });

  it.each(CASES)('$name', async (c) => {
    const b = await booking(c);
    const p = priceBooking(b, tableOf(c.table), AT, CATALOG, c.requestModel ?? null);
    expect(p.amountMicros).toBe(c.want.amount);
    expect(p.unpriced).toBe(false);
    const basis = p.basis!;
    expect(basis).toMatchObject({ rule: c.want.rule, model: c.want.model, source: c.want.rule.includes('table') ? 'table' : 'catalog', catalog_version: '@pydantic/genai-prices@0.1.8' });
    if (c.want.tier !== undefined) expect(basis.tier).toBe(c.want.tier);
    if (c.want.service_tier !== undefined) expect(basis.service_tier).toBe(c.want.service_tier);
    if (c.want.parts !== undefined) expect(basis.parts).toEqual(c.want.parts);
    // the parts make the amount: their exact sum, rounded up once
    const sum = Object.values(basis.parts).reduce((a, v) => a + Number(v), 0);
    expect(Math.ceil(sum - 1e-9)).toBe(p.amountMicros);
  });

  it('every fixture read split at every byte boundary gives the same booking (the new fields included)', async () => {
    for (const file of [...new Set(CASES.map((c) => c.file))]) {
      const c = CASES.find((x) => x.file === file)!;
      const body = readFileSync(join(FIX, file));
      const whole = await booking(c);
      for (let i = 1; i < body.length; i++) {
        const { outcome } = await run({ path: c.path, contentType: c.type, chunks: splitAt(body, [i]) });
        if (outcome.kind !== 'booking') throw new Error(`${file} split at ${i}: no booking`);
        // the same booking but for its id: each metering stream without a forwarded booking id mints its own
        expect({ ...outcome.booking, booking_id: null }, `${file} split at ${i}`).toEqual({ ...whole, booking_id: null });
      }
    }
  });

  it('unpriced: no table, the catalog off, an unknown name → 0, marked, with the rule', async () => {
    const b = await booking(CASES[0]!);
    const p = priceBooking(b, tableOf(undefined), AT, null);
    expect([p.amountMicros, p.unpriced, p.basis?.rule]).toEqual([0, true, 'unpriced']);
  });

  it('the catalog agrees with @pydantic/genai-prices\' own calculation (floats, to within one micro-unit) where it has the classes', async () => {
    const checks: [number, string, Record<string, number>][] = [
      [0, 'gpt-4o-2024-08-06', { input_tokens: 1000, cache_read_tokens: 200, output_tokens: 100 }],
      [3, 'claude-sonnet-4-5-20250929', { input_tokens: 3600, cache_read_tokens: 500, cache_write_tokens: 3000, cache_write_1h_tokens: 2000, output_tokens: 200 }],
      [6, 'gemini-2.5-pro', { input_tokens: 250_000, cache_read_tokens: 50_000, output_tokens: 1500 }],
      [11, 'claude-3-5-sonnet-20241022', { input_tokens: 9000, output_tokens: 400, web_searches: 3 }],
      [12, 'gpt-audio-2025-08-28', { input_tokens: 1200, input_audio_tokens: 1000, output_tokens: 900, output_audio_tokens: 800 }],
      [13, 'gemini-2.5-flash-image', { input_tokens: 1600, output_tokens: 1300, output_image_tokens: 1290 }],
    ];
    for (const [i, model, usage] of checks) {
      const c = CASES[i]!;
      const lib = calcPrice(usage, model, { providerId: c.path.includes('messages') ? 'anthropic' : c.path.includes('models/') ? 'google' : 'openai', timestamp: new Date(AT) });
      expect(lib, model).not.toBeNull();
      expect(Math.abs(lib!.total_price * M - c.want.amount), model).toBeLessThan(1);
    }
  });
});
