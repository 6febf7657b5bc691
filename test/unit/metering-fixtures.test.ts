/**
 * Every recorded response (test/fixtures/metering, in the shapes the providers send) through a
 * MeterSession, split at every byte boundary and at many random places, plain and gzip/deflate/br
 * encoded: the normalised counts are exact every time.
 */
import * as zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ACCOUNT, fixture, KEY_ID, randomCuts, rng, run, splitAt, type Exchange } from './metering-helpers.ts';

const cp = (s: string) => [...s].length;
const est = (s: string) => Math.ceil(cp(s) / 4);

interface Case {
  file: string;
  path: string;
  type: string;
  requestBody?: string;
  want: Record<string, unknown>;
}

const CHAT_REQUEST = '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Hello there"}]}';
const STREAM_TEXT = 'Hello! How can I assist you today? Ça va 🙂';

const CASES: Case[] = [
  { file: 'openai-chat.json', path: '/v1/chat/completions', type: 'application/json', want: { model: 'gpt-4o-2024-08-06', input_tokens: 1117, cached_input_tokens: 1024, cache_write_tokens: 0, output_tokens: 46, reasoning_tokens: 12, estimated: false } },
  { file: 'openai-chat-stream.sse', path: '/v1/chat/completions', type: 'text/event-stream; charset=utf-8', requestBody: CHAT_REQUEST, want: { model: 'gpt-4o-mini-2024-07-18', input_tokens: 19, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 10, reasoning_tokens: 0, estimated: false } },
  {
    file: 'openai-chat-stream-no-usage.sse',
    path: '/v1/chat/completions',
    type: 'text/event-stream',
    requestBody: CHAT_REQUEST,
    // roles are strings of the messages too: "user" + "Hello there"
    want: { model: 'gpt-4o-mini-2024-07-18', input_tokens: est('userHello there'), cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: est(STREAM_TEXT), reasoning_tokens: 0, estimated: true },
  },
  { file: 'openai-chat-stream-300.sse', path: '/v1/chat/completions', type: 'text/event-stream', want: { input_tokens: 19, output_tokens: 10, estimated: false } },
  { file: 'openai-completions.json', path: '/v1/completions', type: 'application/json', want: { model: 'gpt-3.5-turbo-instruct', input_tokens: 5, cached_input_tokens: 0, output_tokens: 7, reasoning_tokens: 0, estimated: false } },
  { file: 'openai-embeddings.json', path: '/v1/embeddings', type: 'application/json', want: { model: 'text-embedding-3-small', input_tokens: 8, output_tokens: 0, estimated: false } },
  { file: 'openai-responses.json', path: '/v1/responses', type: 'application/json', want: { model: 'gpt-4o-2024-08-06', input_tokens: 328, cached_input_tokens: 128, cache_write_tokens: 0, output_tokens: 52, reasoning_tokens: 20, estimated: false } },
  { file: 'openai-responses-stream.sse', path: '/v1/responses', type: 'text/event-stream', want: { model: 'gpt-4o-2024-08-06', input_tokens: 328, cached_input_tokens: 128, output_tokens: 52, reasoning_tokens: 20, estimated: false } },
  // cut short by max_output_tokens: the stream ends with response.incomplete, whose usage is final (not an estimate of the text)
  { file: 'openai-responses-stream-incomplete.sse', path: '/v1/responses', type: 'text/event-stream', want: { model: 'gpt-4.1-mini-2025-04-14', input_tokens: 37, cached_input_tokens: 0, output_tokens: 16, reasoning_tokens: 0, estimated: false } },
  { file: 'anthropic-messages.json', path: '/v1/messages', type: 'application/json', want: { model: 'claude-sonnet-4-5-20250929', input_tokens: 2095 + 2051 + 1000, cached_input_tokens: 1000, cache_write_tokens: 2051, output_tokens: 503, reasoning_tokens: 0, estimated: false } },
  { file: 'anthropic-messages-stream.sse', path: '/v1/messages', type: 'text/event-stream', want: { model: 'claude-sonnet-4-5-20250929', input_tokens: 472 + 2048, cached_input_tokens: 2048, cache_write_tokens: 0, output_tokens: 15, reasoning_tokens: 0, estimated: false } },
  {
    file: 'anthropic-messages-stream-cut.sse',
    path: '/v1/messages',
    type: 'text/event-stream',
    // message_start's output (2) is not final: the text served is the estimate when larger
    want: { input_tokens: 2520, cached_input_tokens: 2048, output_tokens: Math.max(2, est('Hello! Grüße from 🌍 Claude.')), estimated: true },
  },
  { file: 'google-generate.json', path: '/v1beta/models/gemini-2.5-flash:generateContent', type: 'application/json', want: { model: 'gemini-2.5-flash', input_tokens: 11, cached_input_tokens: 3, cache_write_tokens: 0, output_tokens: 17 + 32, reasoning_tokens: 32, estimated: false } },
  { file: 'google-stream.sse', path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse', type: 'text/event-stream', want: { model: 'gemini-2.5-flash', input_tokens: 9, cached_input_tokens: 4, output_tokens: 12 + 25, reasoning_tokens: 25, estimated: false } },
  { file: 'google-stream-array.json', path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent', type: 'application/json; charset=UTF-8', want: { model: 'gemini-2.5-flash', input_tokens: 9, cached_input_tokens: 4, output_tokens: 37, reasoning_tokens: 25, estimated: false } },
];

const ENCODERS: Record<string, (b: Buffer) => Buffer> = {
  gzip: (b) => zlib.gzipSync(b),
  deflate: (b) => zlib.deflateSync(b),
  br: (b) => zlib.brotliCompressSync(b),
};

function exchange(c: Case, chunks: Uint8Array[], encoding?: string): Exchange {
  return { path: c.path, contentType: c.type, chunks, ...(c.requestBody !== undefined ? { requestBody: c.requestBody } : {}), ...(encoding ? { contentEncoding: encoding } : {}) };
}

async function expectCounts(c: Case, chunks: Uint8Array[], encoding?: string) {
  const { outcome } = await run(exchange(c, chunks, encoding));
  if (outcome.kind !== 'booking') throw new Error(`no booking: ${outcome.reason}`);
  expect(outcome.booking).toMatchObject({ ...c.want, key_id: KEY_ID, account: ACCOUNT, request_id: 'req-1' });
  expect(outcome.notes.failure).toBeNull();
}

describe.each(CASES)('$file', (c) => {
  const body = fixture(c.file);

  it('whole, and split at every byte boundary (two chunks)', async () => {
    await expectCounts(c, [body]);
    const step = body.length > 5000 ? 97 : 1;
    for (let i = 1; i < body.length; i += step) await expectCounts(c, splitAt(body, [i]));
  });

  it('one byte at a time, and at random places', async () => {
    if (body.length < 5000) await expectCounts(c, splitAt(body, Array.from({ length: body.length - 1 }, (_, i) => i + 1)));
    const r = rng(body.length);
    for (let k = 0; k < 50; k++) await expectCounts(c, splitAt(body, randomCuts(body.length, 1 + Math.floor(r() * 40), r)));
  });

  it.each(Object.keys(ENCODERS))('%s encoded, split at random places', async (enc) => {
    const encoded = ENCODERS[enc]!(body);
    await expectCounts(c, [encoded], enc);
    const r = rng(encoded.length + enc.length);
    for (let k = 0; k < 20; k++) await expectCounts(c, splitAt(encoded, randomCuts(encoded.length, 1 + Math.floor(r() * 12), r)), enc);
  });
});

describe('raw deflate (servers that send deflate without its zlib wrapper)', () => {
  it('reads the same counts', async () => {
    const c = CASES[0]!;
    await expectCounts(c, [zlib.deflateRawSync(fixture(c.file))], 'deflate');
  });
});
