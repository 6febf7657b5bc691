/**
 * `keygate dev` meters like Envoy: the official OpenAI, Anthropic and Google SDKs, streamed and
 * not, call the dev gateway with the demo key; the gateway opens a Process stream to the sidecar
 * per allowed request (request headers, the OpenAI request body, response headers, body chunks,
 * the identity forwarded as ext_authz metadata) and the stub upstream answers with usage in each
 * family's shape. Each call debits the demo wallet by exactly its priced amount (dev's price
 * table), and the OpenAI stream got its usage because the sidecar asked for it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { Redis } from 'ioredis';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_DEMO_CREDIT_MICROS, startDev } from '../src/dev/index.ts';
import { STUB_USAGE, UPSTREAM_TEXT } from '../src/dev/stub-upstream.ts';
import { parseUsageEntry } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { freePort } from './helpers/redis-server.ts';
import { waitFor } from './helpers/sidecars.ts';

const s = schema();
let dir: string;
let dev: Awaited<ReturnType<typeof startDev>> | undefined;
let db: Redis;
let key: string;
let base: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kg-meter-dev-'));
  const p: number[] = [];
  while (p.length < 6) {
    const n = await freePort();
    if (!p.includes(n)) p.push(n);
  }
  dev = await startDev({ dir, redisPort: p[0]!, grpcPort: p[1]!, httpPort: p[2]!, adminPort: p[3]!, gatewayPort: p[4]!, consolePort: p[5]! }, createLogger('silent'));
  key = dev.ctx.demoKey!.key;
  base = `http://127.0.0.1:${p[4]}`;
  db = new Redis({ port: p[0]!, host: '127.0.0.1' });
}, 120_000);

afterAll(async () => {
  db?.disconnect();
  await dev?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const account = 'demo';
const balance = async () => Number(await db.hget(s.wallet(account), 'balance'));

/** Runs `call`, then waits for its booking: the wallet must go down by exactly `cost`, once. */
async function expectDebit(cost: number, call: () => Promise<void>): Promise<Record<string, unknown>> {
  const before = await balance();
  const entries = await db.xlen(s.usageLog(account));
  await call();
  await waitFor(async () => (await db.xlen(s.usageLog(account))) > entries, 'the booking', 10_000);
  await new Promise((r) => setTimeout(r, 300));
  expect(before - (await balance())).toBe(cost);
  expect(await db.xlen(s.usageLog(account))).toBe(entries + 1);
  const [id, flat] = ((await db.xrevrange(s.usageLog(account), '+', '-', 'COUNT', 1)) as [string, string[]][])[0]!;
  return parseUsageEntry(account, id, flat) as unknown as Record<string, unknown>;
}

// dev's prices (DEV_PRICES), 12 input and 5 output tokens each:
/** openai/*: 12 × 2.5 + 5 × 10 = 80 micro-units. */
const OPENAI = 80;
/** anthropic/*: 12 × 3 + 5 × 15 = 111. */
const ANTHROPIC = 111;
/** google/*: 12 × 0.3 + 5 × 2.5 = 16.1 → 17. */
const GOOGLE = 17;

describe('keygate dev meters the official SDKs', () => {
  it('the demo wallet starts funded', async () => {
    expect(await balance()).toBeLessThanOrEqual(DEV_DEMO_CREDIT_MICROS);
    expect(await balance()).toBeGreaterThan(0);
  });

  it('OpenAI chat, not streamed', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    const e = await expectDebit(OPENAI, async () => {
      const r = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
      expect(r.choices[0]!.message.content).toBe(UPSTREAM_TEXT);
    });
    expect(e).toMatchObject({ inputTokens: STUB_USAGE.input, outputTokens: STUB_USAGE.output, source: 'meter', estimated: false, model: 'gpt-4o' });
  });

  it('OpenAI chat, streamed: keygate asked for usage, the SDK still reads the stream', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    const e = await expectDebit(OPENAI, async () => {
      const stream = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], stream: true });
      let text = '';
      let usage: unknown = null;
      for await (const c of stream) {
        text += c.choices[0]?.delta?.content ?? '';
        if (c.usage) usage = c.usage;
      }
      expect(text).toBe(UPSTREAM_TEXT);
      expect(usage).toMatchObject({ prompt_tokens: STUB_USAGE.input, completion_tokens: STUB_USAGE.output });
    });
    expect(e).toMatchObject({ estimated: false });
  });

  it('Anthropic messages, not streamed and streamed', async () => {
    const client = new Anthropic({ apiKey: key, baseURL: `${base}/anthropic`, maxRetries: 0 });
    await expectDebit(ANTHROPIC, async () => {
      const r = await client.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
      expect(r.content[0]).toMatchObject({ text: UPSTREAM_TEXT });
    });
    const e = await expectDebit(ANTHROPIC, async () => {
      const stream = client.messages.stream({ model: 'claude-sonnet-4-6', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
      const final = await stream.finalMessage();
      expect(final.content[0]).toMatchObject({ text: UPSTREAM_TEXT });
    });
    expect(e).toMatchObject({ inputTokens: STUB_USAGE.input, outputTokens: STUB_USAGE.output, estimated: false });
  });

  it('Google generateContent, not streamed and streamed', async () => {
    const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: `${base}/google` } });
    await expectDebit(GOOGLE, async () => {
      const r = await ai.models.generateContent({ model: 'gemini-2.0-flash', contents: 'hi' });
      expect(r.text).toBe(UPSTREAM_TEXT);
    });
    const e = await expectDebit(GOOGLE, async () => {
      let text = '';
      for await (const c of await ai.models.generateContentStream({ model: 'gemini-2.0-flash', contents: 'hi' })) text += c.text ?? '';
      expect(text).toBe(UPSTREAM_TEXT);
    });
    expect(e).toMatchObject({ inputTokens: STUB_USAGE.input, outputTokens: STUB_USAGE.output, model: 'gemini-2.0-flash' });
  });
});
