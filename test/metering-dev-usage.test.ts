/**
 * Through `keygate dev` (its gateway plays Envoy: HTTP authz, then ext_proc with the allow's booking
 * id forwarded as metadata), the red-team cases of SPEC 15 as a client would try them:
 * - the booking id is keygate's: five requests sent with one `x-request-id` are booked five times
 *   (before: once), each entry labelled with that id;
 * - usage cannot be switched off: a streamed chat body padded past 4 MiB with whitespace still asks
 *   for usage, so a reasoning model's answer is booked from its real usage (4000 output tokens, 3995
 *   reasoning), not from the visible text (5 tokens); `stream_options` twice is refused with 400
 *   `USAGE_NOT_GUARANTEED` in OpenAI's shape and reaches no upstream;
 * - background responses (OpenAI SDK `responses.create({background: true})`, then
 *   `responses.retrieve` until completed): the wallet debited once by the full usage; the queued
 *   answer booked nothing; a second retrieve books nothing more.
 */
import type { Redis } from 'ioredis';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STUB_AUDIO_USAGE, STUB_BACKGROUND_USAGE, STUB_IMAGE_USAGE, STUB_REASONING_USAGE } from '../src/dev/stub-upstream.ts';
import { OWNED_TTL_SECONDS } from '../src/schema/owned.ts';
import { BOOKING_ID_PATTERN } from '../src/core/booking-id.ts';
import { parseUsageEntry, type UsageEntry } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { startDevStack, type DevStack } from './helpers/dev-stack.ts';
import { waitFor } from './helpers/sidecars.ts';

const s = schema();
const account = 'demo';
let stack: DevStack | undefined;
let db: Redis;
let key: string;
let base: string;

beforeAll(async () => {
  stack = await startDevStack('kg-dev-usage-');
  ({ db, key, base } = stack);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

const balance = async () => Number(await db.hget(s.wallet(account), 'balance'));
const entries = async (): Promise<UsageEntry[]> => ((await db.xrange(s.usageLog(account), '-', '+')) as [string, string[]][]).map(([id, f]) => parseUsageEntry(account, id, f));

/** Runs `call`, waits for `n` new usage entries (and a little more, to see nothing else comes): the new entries. */
async function booked(n: number, call: () => Promise<void>): Promise<UsageEntry[]> {
  const before = (await entries()).length;
  await call();
  if (n > 0) await waitFor(async () => (await entries()).length >= before + n, `${n} bookings`, 15_000);
  await new Promise((r) => setTimeout(r, 700));
  const after = await entries();
  expect(after.length).toBe(before + n);
  return after.slice(before);
}

const chat = (body: string, headers: Record<string, string> = {}) =>
  fetch(`${base}/openai/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body });

describe('the booking id is keygate\'s', () => {
  it('five requests sent with one x-request-id are booked five times, each labelled with it', async () => {
    const before = await balance();
    const got = await booked(5, async () => {
      for (let i = 0; i < 5; i++) {
        const r = await chat(JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }), { 'x-request-id': 'one-id-for-all' });
        expect(r.status).toBe(200);
        await r.text();
      }
    });
    expect(got.map((e) => e.requestId)).toEqual(Array(5).fill('one-id-for-all'));
    expect(new Set(got.map((e) => e.bookingId)).size).toBe(5);
    expect(got.every((e) => BOOKING_ID_PATTERN.test(e.bookingId))).toBe(true);
    expect(before - (await balance())).toBe(got.reduce((a, e) => a + e.amountMicros, 0));
    expect(got[0]!.amountMicros).toBeGreaterThan(0);
  });
});

describe('usage cannot be switched off', () => {
  it('a reasoning model\'s stream padded past 4 MiB with whitespace is booked from its real usage, not the visible text', async () => {
    const pad = ' '.repeat(4 * 1024 * 1024 + 17);
    const [e] = await booked(1, async () => {
      const r = await chat(`{"model":"o3-mini","stream":true,${pad}"messages":[{"role":"user","content":"think hard"}]}`);
      expect(r.status).toBe(200);
      const text = await r.text();
      expect(text).toContain('"reasoning_tokens":3995'); // the upstream was asked for usage
    });
    expect(e).toMatchObject({ model: 'o3-mini', outputTokens: STUB_REASONING_USAGE.output, reasoningTokens: STUB_REASONING_USAGE.reasoning, estimated: false, source: 'meter' });
  });

  it('stream_options twice: 400 USAGE_NOT_GUARANTEED in OpenAI\'s shape, naming why; nothing upstream, nothing booked', async () => {
    await booked(0, async () => {
      const r = await chat('{"model":"o3-mini","stream":true,"stream_options":{"include_usage":false},"stream_options":{"include_usage":false},"messages":[]}');
      expect(r.status).toBe(400);
      expect(r.headers.get('x-should-retry')).toBe('false');
      const body = (await r.json()) as { error: { code: string; type: string; message: string } };
      expect(body.error).toMatchObject({ code: 'USAGE_NOT_GUARANTEED', type: 'invalid_request_error' });
      expect(body.error.message).toMatch(/"stream_options" more than once/);
    });
  });
});

describe('background responses are booked once, at their first terminal state', () => {
  it('the official SDK: create in the background, retrieve until completed; the wallet debited once by the full usage', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    const before = await balance();
    // the create answers queued: recorded as the account's, nothing booked or estimated
    const created = await booked(0, async () => {
      const r = await client.responses.create({ model: 'gpt-4o', input: 'write a long report', background: true });
      expect(r.status).toBe('queued');
      createdId = r.id;
    });
    expect(created).toEqual([]);
    const owned = await db.hgetall(s.owned('openai', createdId));
    expect(owned).toMatchObject({ account, key_id: stack!.dev.ctx.demoKey!.id });
    const ttl = await db.ttl(s.owned('openai', createdId));
    expect(ttl).toBeGreaterThan(OWNED_TTL_SECONDS - 60);
    // still running: nothing
    await booked(0, async () => {
      expect((await client.responses.retrieve(createdId)).status).toBe('in_progress');
    });
    // completed: booked once, from its usage, under a booking id of the response
    const [e] = await booked(1, async () => {
      const done = await client.responses.retrieve(createdId);
      expect(done.status).toBe('completed');
      expect(done.usage?.output_tokens).toBe(STUB_BACKGROUND_USAGE.output);
    });
    // priced from the catalog: gpt-4o's list price, $2.50 in and $10 out per million tokens
    const cost = Math.ceil(STUB_BACKGROUND_USAGE.input * 2.5 + STUB_BACKGROUND_USAGE.output * 10);
    expect(e).toMatchObject({ inputTokens: STUB_BACKGROUND_USAGE.input, outputTokens: STUB_BACKGROUND_USAGE.output, amountMicros: cost, estimated: false });
    expect(e!.bookingId).toMatch(/^r:[0-9a-f]{64}$/);
    expect(before - (await balance())).toBe(cost);
    // retrieved again (JSON, and a resumed stream): nothing more
    await booked(0, async () => {
      expect((await client.responses.retrieve(createdId)).status).toBe('completed');
      const stream = await client.responses.retrieve(createdId, { stream: true });
      for await (const ev of stream) expect(ev.type).toBe('response.completed');
    });
    expect(before - (await balance())).toBe(cost);
  });
});

let createdId = '';

describe('images and audio are metered', () => {
  it('the official SDK: image generation and edit, transcription and translation, each booked from its token usage', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 });
    const png = await toFile(Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=', 'base64'), 'a.png', { type: 'image/png' });
    const wav = await toFile(Buffer.alloc(2048), 'a.wav', { type: 'audio/wav' });
    const got = await booked(4, async () => {
      await client.images.generate({ model: 'gpt-image-1', prompt: 'a lighthouse' });
      await client.images.edit({ model: 'gpt-image-1', image: png, prompt: 'at night' });
      expect((await client.audio.transcriptions.create({ model: 'gpt-4o-transcribe', file: wav })).text).toBeTruthy();
      await client.audio.translations.create({ model: 'gpt-4o-transcribe', file: wav });
    });
    const image = { inputTokens: STUB_IMAGE_USAGE.input, outputTokens: STUB_IMAGE_USAGE.output, estimated: false, source: 'meter' };
    const audio = { inputTokens: STUB_AUDIO_USAGE.input, outputTokens: STUB_AUDIO_USAGE.output, estimated: false, source: 'meter' };
    expect(got).toMatchObject([image, image, audio, audio]);
    // the answers name no model: each booked and priced (from the catalog) by the model the request
    // asked for, read from its body (JSON for generations, the multipart form's field otherwise)
    expect(got.map((e) => e.model)).toEqual(['gpt-image-1', 'gpt-image-1', 'gpt-4o-transcribe', 'gpt-4o-transcribe']);
    expect(got.every((e) => e.amountMicros > 0 && !e.unpriced)).toBe(true);
    // gpt-image-1: 40 text tokens at $5/M, 10 image tokens at $10/M, 4160 output (image) tokens at $40/M
    expect(got[0]!.amountMicros).toBe(40 * 5 + 10 * 10 + 4160 * 40);
  });

  it('a form whose model cannot be learned (the model field twice) is booked with its tokens, unpriced and marked so', async () => {
    const b = 'kg-test-boundary';
    const field = (n: string, v: string) => `--${b}\r\nContent-Disposition: form-data; name="${n}"\r\n\r\n${v}\r\n`;
    const body = `${field('model', 'gpt-4o-transcribe')}${field('model', 'gpt-4o-mini-transcribe')}--${b}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n--${b}--\r\n`;
    const [e] = await booked(1, async () => {
      const r = await fetch(`${base}/openai/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${b}` }, body });
      expect(r.status).toBe(200);
      await r.text();
    });
    expect(e).toMatchObject({ model: null, inputTokens: STUB_AUDIO_USAGE.input, outputTokens: STUB_AUDIO_USAGE.output, amountMicros: 0, unpriced: true });
  });
});
