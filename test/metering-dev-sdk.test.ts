/**
 * `keygate dev` meters like Envoy: the official OpenAI (chat, Responses, completions, embeddings),
 * Anthropic and Google SDKs, streamed and not, call the dev gateway with the demo key; the gateway opens a Process stream to the sidecar
 * per allowed request (request headers, the OpenAI request body, response headers, body chunks,
 * the identity forwarded as ext_authz metadata) and the stub upstream answers with usage in each
 * family's shape, naming the dated snapshot as the real APIs do (gpt-4o → gpt-4o-2024-08-06). Each
 * call debits the demo wallet by exactly its priced amount (dev prices from the catalog of
 * @pydantic/genai-prices), and the OpenAI stream got its usage because the sidecar asked for it.
 *
 * Then the rest of what a user sees (the "Done when" of metering and of token rates): the demo
 * key's tokens and spend in `keygate keys show` (the real CLI, text and --json) and on the "API
 * keys" page (a real Chromium signed in with dev's token: the row and the 30-day panel); a key
 * with a token rate refused (429, every SDK) once metered answers used it up; the demo wallet
 * driven below zero by metered answers (an operator's `keygate prices set` makes them dear), then
 * 402 on the next request in every SDK, nothing more booked.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import type { Redis } from 'ioredis';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_DEMO_CREDIT_MICROS } from '../src/dev/index.ts';
import { startDevStack, type DevStack } from './helpers/dev-stack.ts';
import { STUB_USAGE, UPSTREAM_TEXT } from '../src/dev/stub-upstream.ts';
import { formatAmount } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { freePort } from './helpers/redis-server.ts';
import { expectDebit as debit } from './helpers/dev-stack.ts';
import { waitFor } from './helpers/sidecars.ts';
import { launchBrowser, type TestBrowser } from './helpers/browser.ts';
import { money } from '../web/src/format.ts';

const s = schema();
let stack: DevStack | undefined;
let dev: DevStack['dev'] | undefined;
let db: Redis;
let key: string;
let base: string;
let browser: TestBrowser | undefined;

beforeAll(async () => {
  stack = await startDevStack('kg-meter-dev-');
  ({ dev, db, key, base } = stack);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

const account = 'demo';
const balance = async () => Number(await db.hget(s.wallet(account), 'balance'));

/** What the bookings of this file put on each key: spend, tokens and the number of bookings. */
const booked = new Map<string, { micros: number; input: number; output: number; count: number }>();

/** Runs `call`, then waits for its booking: the wallet must go down by exactly `cost`, once. */
async function expectDebit(cost: number, call: () => Promise<void>): Promise<Record<string, unknown>> {
  const e = (await debit(db, account, cost, call)) as unknown as Record<string, unknown>;
  const b = booked.get(e.keyId as string) ?? { micros: 0, input: 0, output: 0, count: 0 };
  booked.set(e.keyId as string, { micros: b.micros + cost, input: b.input + (e.inputTokens as number), output: b.output + (e.outputTokens as number), count: b.count + 1 });
  return e;
}

/** The status of the SDK error `call` throws (it must throw one). */
async function refusal(call: () => Promise<unknown>): Promise<{ status: number; message: string }> {
  try {
    await call();
  } catch (err) {
    if (err instanceof OpenAI.APIError || err instanceof Anthropic.APIError || err instanceof ApiError) return { status: err.status ?? 0, message: err.message };
    throw err;
  }
  throw new Error('the call succeeded');
}

/** One non-streamed call per family with `k`, no SDK retries (a refusal is seen as it is). */
const sdk = (k: string) => ({
  openai: async () => {
    await new OpenAI({ apiKey: k, baseURL: `${base}/openai/v1`, maxRetries: 0 }).chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
  },
  anthropic: async () => {
    await new Anthropic({ apiKey: k, baseURL: `${base}/anthropic`, maxRetries: 0 }).messages.create({ model: 'claude-sonnet-4-6', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
  },
  google: async () => {
    await new GoogleGenAI({ apiKey: k, httpOptions: { baseUrl: `${base}/google` } }).models.generateContent({ model: 'gemini-2.0-flash', contents: 'hi' });
  },
});

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));

/** The real CLI against dev's Redis (its reveal key too, for `keys create`); stdout, or the failure. */
function keygate(args: string[]): Promise<string> {
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', KEYGATE_NODE: process.execPath, REDIS_URL: dev!.ctx.redisUrl, KEYGATE_REVEAL_KEY: dev!.ctx.revealKey! };
  return new Promise((resolve, reject) =>
    execFile(BIN, args, { env, timeout: 60_000 }, (err, stdout, stderr) => (err ? reject(new Error(`keygate ${args.join(' ')}: ${stderr || err.message}`)) : resolve(stdout))),
  );
}

// The catalog's list prices (issue 34: dev prices from the catalog, no table), 12 input and 5 output tokens each:
/** gpt-4o (answered gpt-4o-2024-08-06): 12 × 2.5 + 5 × 10 = 80 micro-units. */
const OPENAI = 80;
/** gpt-3.5-turbo-instruct: 12 × 1.5 + 5 × 2 = 28. */
const OPENAI_INSTRUCT = 28;
/** text-embedding-3-small: 12 × 0.02 = 0.24 → 1 (no output tokens). */
const OPENAI_EMBEDDING = 1;
/** claude-sonnet-4-6: 12 × 3 + 5 × 15 = 111. */
const ANTHROPIC = 111;
/** gemini-2.0-flash (answered gemini-2.0-flash-001): 12 × 0.1 + 5 × 0.4 = 3.2 → 4. */
const GOOGLE = 4;

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
    expect(e).toMatchObject({ inputTokens: STUB_USAGE.input, outputTokens: STUB_USAGE.output, source: 'meter', estimated: false, model: 'gpt-4o-2024-08-06' });
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

  it('OpenAI Responses, not streamed and streamed (usage in response.completed)', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    await expectDebit(OPENAI, async () => {
      const r = await client.responses.create({ model: 'gpt-4o', input: 'hi' });
      expect(r.output_text).toBe(UPSTREAM_TEXT);
      expect(r.usage).toMatchObject({ input_tokens: STUB_USAGE.input, output_tokens: STUB_USAGE.output });
    });
    const e = await expectDebit(OPENAI, async () => {
      let text = '';
      let done = false;
      for await (const ev of await client.responses.create({ model: 'gpt-4o', input: 'hi', stream: true })) {
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.completed') done = ev.response.usage?.output_tokens === STUB_USAGE.output;
      }
      expect(text).toBe(UPSTREAM_TEXT);
      expect(done).toBe(true);
    });
    expect(e).toMatchObject({ inputTokens: STUB_USAGE.input, outputTokens: STUB_USAGE.output, model: 'gpt-4o-2024-08-06', estimated: false });
  });

  it('OpenAI completions, not streamed and streamed (keygate asked the stream for usage)', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    await expectDebit(OPENAI_INSTRUCT, async () => {
      const r = await client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'hi' });
      expect(r.choices[0]!.text).toBe(UPSTREAM_TEXT);
    });
    const e = await expectDebit(OPENAI_INSTRUCT, async () => {
      let text = '';
      for await (const c of await client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'hi', stream: true })) text += c.choices[0]?.text ?? '';
      expect(text).toBe(UPSTREAM_TEXT);
    });
    expect(e).toMatchObject({ inputTokens: STUB_USAGE.input, outputTokens: STUB_USAGE.output, estimated: false });
  });

  it('OpenAI embeddings (input tokens only), with the SDK\'s default base64 encoding and with floats', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    for (const encoding_format of [undefined, 'float'] as const) {
      const e = await expectDebit(OPENAI_EMBEDDING, async () => {
        const r = await client.embeddings.create({ model: 'text-embedding-3-small', input: 'hi', ...(encoding_format ? { encoding_format } : {}) });
        expect(r.data[0]!.embedding.length).toBeGreaterThan(0);
        expect(r.usage.prompt_tokens).toBe(STUB_USAGE.input);
      });
      expect(e).toMatchObject({ inputTokens: STUB_USAGE.input, outputTokens: 0, model: 'text-embedding-3-small', estimated: false });
    }
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
    expect(e).toMatchObject({ inputTokens: STUB_USAGE.input, outputTokens: STUB_USAGE.output, model: 'gemini-2.0-flash-001' });
  });
});

describe('what a user of keygate dev sees of metered answers', () => {
  it('a key with a token rate is refused (429 RATE_LIMITED, every SDK) on its next request once metered answers used the rate up; its answers carried x-ratelimit-*', async () => {
    // 30 tokens a day (UTC): each OpenAI answer is 12 + 5 = 17 tokens, so the second one uses it up.
    const created = JSON.parse(await keygate(['keys', 'create', '--account', account, '--name', 'token rated', '--rate', '50/m', '--token-rate', '30/d', '--json'])) as { id: string; key: string };
    const calls = sdk(created.key);
    const client = new OpenAI({ apiKey: created.key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    const answers: Headers[] = [];
    const withHeaders = async () => {
      const { response } = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
      answers.push(response.headers);
    };
    await expectDebit(OPENAI, withHeaders);
    await expectDebit(OPENAI, withHeaders);
    // As Envoy adds ext_authz's response_headers_to_add to the client's response, the dev gateway does.
    for (const h of answers) {
      expect(h.get('x-ratelimit-limit-requests')).toBe('50');
      expect(Number(h.get('x-ratelimit-remaining-requests'))).toBeLessThan(50);
      expect(h.get('x-ratelimit-reset-requests')).toMatch(/^\d/);
    }
    // token headers from the first request (the limit from the key; the count as of the last background read of the window)
    for (const h of answers) {
      expect(h.get('x-ratelimit-limit-tokens')).toBe('30');
      expect(Number(h.get('x-ratelimit-remaining-tokens'))).toBeLessThanOrEqual(30);
    }
    const before = await balance();
    for (const call of Object.values(calls)) {
      const r = await refusal(call);
      expect(r.status).toBe(429);
      expect(r.message).toMatch(/token rate/i);
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(await balance()).toBe(before); // refused requests book nothing
    const shown = JSON.parse(await keygate(['keys', 'show', created.id, '--json']));
    const used = 2 * (STUB_USAGE.input + STUB_USAGE.output);
    expect(shown).toMatchObject({ token_rate: { tokens: 30, per: 'day' }, rate_use: { tokens: { used } } });
    // the text forms show each rate with its window's use (the request window is a minute: at most 2 used: the minute may turn)
    expect(await keygate(['keys', 'show', created.id])).toMatch(new RegExp(`\\n  rate 50/m \\([0-2] used this window\\); token rate 30/d \\(${used} used this window\\)\\n`));
    expect(await keygate(['keys', 'list', '--account', account])).toMatch(new RegExp(`token rated .* 50/m \\([0-2] used this window\\)  30/d \\(${used} used this window\\)\\n`));
  });

  it("the demo key's tokens and spend: in `keys show` (text and --json) and on the API keys page, as text beside the chart", async () => {
    const id = dev!.ctx.demoKey!.id;
    const b = booked.get(id)!;
    expect(b.count).toBeGreaterThan(0);
    const shown = JSON.parse(await keygate(['keys', 'show', id, '--json']));
    expect(shown).toMatchObject({ tokens: { today: { input: b.input, output: b.output }, month: { input: b.input, output: b.output } }, spend: { total_micros: b.micros } });
    const text = await keygate(['keys', 'show', id]);
    expect(text).toContain(`spend: ${formatAmount(b.micros)} this month, ${formatAmount(b.micros)} in total`);
    expect(text).toContain(`tokens: ${b.input} in, ${b.output} out today; ${b.input} in, ${b.output} out this month`);

    browser = await launchBrowser({ baseURL: dev!.ctx.console!.url });
    const { page } = browser;
    await page.goto('/');
    await page.getByLabel('Token').fill(dev!.ctx.console!.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const row = page.locator(`#key-${id}`);
    await row.waitFor();
    const cells = await row.innerText();
    expect(cells).toContain(`${b.input} in · ${b.output} out today`);
    expect(cells).toContain(`${money(b.micros)} USD`);
    await row.getByRole('button', { name: '30 days' }).click();
    const summary = `Last 30 days: ${money(b.micros)} USD spent, ${b.count} requests, ${b.input} input and ${b.output} output tokens.`;
    await page.locator(`#key-${id}-usage`).getByText(summary).waitFor();
    // issue 34: the ledger shows how each metered charge was priced (the name that priced it, the rule)
    await page.locator('.ledger').getByText('priced as openai/gpt-4o (catalog)').first().waitFor();
    await page.locator('.ledger').getByText('priced as google/gemini-2.0-flash (catalog)').first().waitFor({ state: 'attached' });
  }, 60_000);

  it('a wallet driven below zero by metered answers gets 402 on the next request, in every SDK; nothing more is booked', async () => {
    // An operator makes gpt-4o dear: 17 tokens at 1,000,000 per million tokens = 17.000000 a call.
    await keygate(['prices', 'set', 'openai/gpt-4o', '--input', '1000000', '--output', '1000000']);
    const DEAR = 17_000_000;
    await new Promise((r) => setTimeout(r, 500)); // the sidecar sees the change within its staleness bound (250 ms by default)
    const calls = sdk(key);
    let n = 0;
    while ((await balance()) > 0) {
      await expectDebit(DEAR, calls.openai);
      n++;
      expect(n).toBeLessThan(10);
    }
    expect(await balance()).toBeLessThanOrEqual(0);
    const after = await balance();
    const entries = await db.xlen(s.usageLog(account));
    for (const call of Object.values(calls)) {
      const r = await refusal(call);
      expect(r.status).toBe(402);
    }
    await new Promise((r) => setTimeout(r, 500));
    expect(await balance()).toBe(after);
    expect(await db.xlen(s.usageLog(account))).toBe(entries);
  }, 60_000);
});
