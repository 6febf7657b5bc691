/**
 * The `images` and `audio` usage readers (OpenAI image generation and edits; audio transcription and
 * translation billed by token), in the shapes of the openai SDK's types: JSON answers and streamed
 * events, normalised like every OpenAI count; a duration-billed transcription carries no tokens and
 * is estimated from its text.
 */
import { describe, expect, it } from 'vitest';
import { meteredEndpoint, USAGE_READERS } from '../../src/metering/usage.ts';
import { run } from './metering-helpers.ts';

const sse = (...events: object[]) => Buffer.from(events.map((e) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`).join(''));
const imageUsage = { input_tokens: 50, input_tokens_details: { text_tokens: 40, image_tokens: 10 }, output_tokens: 4160, total_tokens: 4210 };

describe('usage readers by path', () => {
  it.each([
    ['/v1/images/generations', 'images'],
    ['/openai/v1/images/edits', 'images'],
    ['/v1/audio/transcriptions', 'audio'],
    ['/v1/audio/translations?x=1', 'audio'],
  ])('%s → %s', (path, kind) => {
    expect(meteredEndpoint(path)).toMatchObject({ family: 'openai', kind });
    expect(USAGE_READERS).toContain(kind);
  });
  it('other image and audio paths are not metered here', () => {
    expect(meteredEndpoint('/v1/images/variations')).toBeNull();
    expect(meteredEndpoint('/v1/audio/speech')).toBeNull();
  });
});

describe('images', () => {
  it('a JSON answer: input and output tokens, the image data skipped', async () => {
    const body = JSON.stringify({ created: 1, data: [{ b64_json: 'A'.repeat(300_000) }], usage: imageUsage });
    const { outcome } = await run({ path: '/v1/images/generations', requestBody: '{"model":"gpt-image-1","prompt":"a cat"}', contentType: 'application/json', chunks: [Buffer.from(body.slice(0, 1000)), Buffer.from(body.slice(1000))] });
    expect(outcome).toMatchObject({ kind: 'booking', booking: { model: 'gpt-image-1', input_tokens: 50, output_tokens: 4160, cached_input_tokens: 0, reasoning_tokens: 0, estimated: false } });
  });

  it('streamed: the completed event\'s usage (partial images carry none)', async () => {
    const body = sse({ type: 'image_edit.partial_image', b64_json: 'AAAA', partial_image_index: 0 }, { type: 'image_edit.completed', b64_json: 'AAAA', usage: imageUsage });
    const { outcome } = await run({ path: '/v1/images/edits', contentType: 'text/event-stream', chunks: [body] });
    expect(outcome).toMatchObject({ kind: 'booking', booking: { input_tokens: 50, output_tokens: 4160, estimated: false } });
  });
});

describe('audio', () => {
  const tokens = { type: 'tokens', input_tokens: 120, input_token_details: { text_tokens: 0, audio_tokens: 120 }, output_tokens: 8, total_tokens: 128 };
  it('a JSON transcription with token usage', async () => {
    const { outcome } = await run({ path: '/v1/audio/transcriptions', contentType: 'application/json', chunks: [Buffer.from(JSON.stringify({ text: 'hello there', usage: tokens }))] });
    expect(outcome).toMatchObject({ kind: 'booking', booking: { input_tokens: 120, output_tokens: 8, estimated: false } });
  });

  it('streamed: the done event\'s usage; the deltas are the text', async () => {
    const body = sse({ type: 'transcript.text.delta', delta: 'hello ' }, { type: 'transcript.text.delta', delta: 'there' }, { type: 'transcript.text.done', text: 'hello there', usage: tokens });
    const { outcome } = await run({ path: '/v1/audio/transcriptions', contentType: 'text/event-stream', chunks: [body] });
    expect(outcome).toMatchObject({ kind: 'booking', booking: { input_tokens: 120, output_tokens: 8, estimated: false } });
    const cut = sse({ type: 'transcript.text.delta', delta: 'hello there, general' });
    const c = await run({ path: '/v1/audio/transcriptions', contentType: 'text/event-stream', chunks: [cut], complete: false });
    expect(c.outcome).toMatchObject({ kind: 'booking', booking: { output_tokens: 5, estimated: true } }); // 20 code points / 4
  });

  it('billed by duration (no tokens): estimated from the text', async () => {
    const { outcome } = await run({ path: '/v1/audio/translations', contentType: 'application/json', chunks: [Buffer.from(JSON.stringify({ text: 'twelve chars', usage: { type: 'duration', seconds: 3 } }))] });
    expect(outcome).toMatchObject({ kind: 'booking', booking: { input_tokens: 0, output_tokens: 3, estimated: true } });
  });
});
