/**
 * The `images` and `audio` usage readers (OpenAI image generation and edits; audio transcription and
 * translation billed by token), in the shapes of the openai SDK's types: JSON answers and streamed
 * events, normalised like every OpenAI count; a duration-billed transcription carries no tokens and
 * is estimated from its text.
 */
import { describe, expect, it } from 'vitest';
import { meteredEndpoint, USAGE_READERS } from '../../src/metering/usage.ts';
import { run } from './metering-helpers.ts';
import { priceBooking } from '../../src/metering/booker.ts';
import { PriceTable } from '../../src/schema/prices.ts';
import { priceCatalog } from '../../src/prices/index.ts';

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

/** A multipart/form-data body as the openai SDK sends one: the given fields, then (or before) a file part. */
function form(boundary: string, fields: ReadonlyArray<readonly [string, string]>, file: Buffer, fileFirst = false): Buffer {
  const field = ([n, v]: readonly [string, string]) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${n}"\r\n\r\n${v}\r\n`);
  const filePart = Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`), file, Buffer.from('\r\n')]);
  const parts = fields.map(field);
  return Buffer.concat([...(fileFirst ? [filePart, ...parts] : [...parts, filePart]), Buffer.from(`--${boundary}--\r\n`)]);
}

describe('the requested model (the answers name none): read from the request body metering is sent', () => {
  const tokens = { type: 'tokens', input_tokens: 120, output_tokens: 8, total_tokens: 128 };
  const answer = [Buffer.from(JSON.stringify({ text: 'hello', usage: tokens }))];
  const b = 'formdata-undici-0123456789';
  const ct = { 'content-type': `multipart/form-data; boundary=${b}` };

  it('image generation: the JSON body\'s model', async () => {
    const { outcome } = await run({ path: '/v1/images/generations', requestBody: '{"prompt":"a cat","model":"gpt-image-1"}', requestHeaders: { 'content-type': 'application/json' }, contentType: 'application/json', chunks: [Buffer.from(JSON.stringify({ data: [], usage: imageUsage }))] });
    expect(outcome).toMatchObject({ kind: 'booking', booking: { model: 'gpt-image-1' }, notes: { modelFrom: 'request', requestedModel: 'gpt-image-1' } });
  });

  it.each(['/v1/audio/transcriptions', '/v1/audio/translations', '/v1/images/edits'])('%s: the multipart form\'s model field, before or after the file', async (path) => {
    for (const fileFirst of [false, true]) {
      const body = form(b, [['model', 'gpt-4o-transcribe'], ['response_format', 'json']], Buffer.alloc(4096, 7), fileFirst);
      const { outcome } = await run({ path, requestBody: body, requestHeaders: ct, contentType: 'application/json', chunks: answer });
      expect(outcome, `file first: ${fileFirst}`).toMatchObject({ kind: 'booking', booking: { model: 'gpt-4o-transcribe', input_tokens: 120 }, notes: { modelFrom: 'request', requestedModel: 'gpt-4o-transcribe' } });
    }
  });

  it('a form cut short (BUFFERED_PARTIAL\'s first part), not strictly readable, or without a model: booked with its tokens, no model (priced unpriced, flagged)', async () => {
    const whole = form(b, [['model', 'gpt-4o-transcribe']], Buffer.alloc(4096, 7), true);
    const bodies: Array<[Buffer, Record<string, string>, boolean]> = [
      [whole.subarray(0, 2048), ct, false], // the first part only
      [form(b, [['model', 'a'], ['model', 'b']], Buffer.alloc(16)), ct, true], // model twice
      [form(b, [['prompt', 'x']], Buffer.alloc(16)), ct, true], // no model
      [whole, { 'content-type': 'multipart/form-data; boundary=other' }, true], // the wrong boundary
      [whole, { 'content-type': 'multipart/form-data' }, true], // no boundary
    ];
    for (const [body, headers, end] of bodies) {
      const { outcome } = await run({ path: '/v1/audio/transcriptions', requestBody: body, requestBodyEnd: end, requestHeaders: headers, contentType: 'application/json', chunks: answer });
      expect(outcome).toMatchObject({ kind: 'booking', booking: { model: null, input_tokens: 120, output_tokens: 8 }, notes: { modelFrom: 'unknown', requestedModel: null } });
      if (outcome.kind !== 'booking') throw new Error(outcome.reason);
      // with the catalog alone: 0, never without the flag (a table's openai/* or * would price it)
      const p = priceBooking(outcome.booking, PriceTable.fromHash({}), Date.now(), priceCatalog(true), outcome.notes.requestedModel);
      expect([p.amountMicros, p.unpriced, p.basis?.rule]).toEqual([0, true, 'unpriced']);
    }
  });
});

describe('image output tokens are image tokens', () => {
  it('without output details: the whole output is output_image; with them, their image part', async () => {
    const whole = await run({ path: '/v1/images/generations', contentType: 'application/json', chunks: [Buffer.from(JSON.stringify({ data: [], usage: imageUsage }))] });
    expect(whole.outcome).toMatchObject({ kind: 'booking', booking: { output_tokens: 4160, output_image_tokens: 4160, input_image_tokens: 10 } });
    const split = { ...imageUsage, output_tokens: 4200, output_tokens_details: { image_tokens: 4160, text_tokens: 40 } };
    const parts = await run({ path: '/v1/images/generations', contentType: 'application/json', chunks: [Buffer.from(JSON.stringify({ data: [], usage: split }))] });
    expect(parts.outcome).toMatchObject({ kind: 'booking', booking: { output_tokens: 4200, output_image_tokens: 4160 } });
  });

  it('priced from the catalog: gpt-image-1.5\'s output at its image-output rate ($32/M), its input text and image parts at theirs ($5/M, $8/M)', async () => {
    const { outcome } = await run({ path: '/v1/images/generations', requestBody: '{"model":"gpt-image-1.5","prompt":"a cat"}', contentType: 'application/json', chunks: [Buffer.from(JSON.stringify({ data: [], usage: imageUsage }))] });
    if (outcome.kind !== 'booking') throw new Error(outcome.reason);
    const p = priceBooking(outcome.booking, PriceTable.fromHash({}), Date.now(), priceCatalog(true), outcome.notes.requestedModel);
    // micro-units: 40 text tokens × 5 + 10 image tokens × 8 + 4160 image tokens × 32 = 200 + 80 + 133 120
    expect(p.unpriced).toBe(false);
    expect(p.basis?.parts).toMatchObject({ input: '200', input_image: '80', output_image: '133120' });
    expect(p.amountMicros).toBe(133_400);
  });
});
