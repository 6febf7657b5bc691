/**
 * readModel over every entry (src/core/model/index.ts): requests exactly as the official OpenAI,
 * Anthropic and Google SDKs build them (captured from their fetch), plus the dispatch rules by
 * path, method, Content-Type and truncation.
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI, { toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { familyFromPath, type Family } from '../../src/core/families/index.ts';
import { readModel, type ModelRead, type ModelRequest } from '../../src/core/model/index.ts';

type Captured = Omit<ModelRequest, 'family' | 'bodyTruncated'>;

/** Runs an SDK call against a fetch that records the request and answers 400 (no retries). */
async function capture(call: (f: typeof fetch) => Promise<unknown>): Promise<Captured> {
  let got: Request | undefined;
  const f = (async (input: string | URL | Request, init?: RequestInit) => {
    got = new Request(input, init);
    return new Response('{"error":{"message":"stub"}}', { status: 400, headers: { 'content-type': 'application/json' } });
  }) as typeof fetch;
  await call(f).catch(() => undefined);
  if (got === undefined) throw new Error('the SDK sent nothing');
  const url = new URL(got.url);
  const body = Buffer.from(await got.arrayBuffer());
  return { method: got.method, path: url.pathname + url.search, contentType: got.headers.get('content-type') ?? undefined, body: body.length > 0 ? body : undefined };
}

/** @google/genai calls the global fetch. */
async function captureGlobal(call: () => Promise<unknown>): Promise<Captured> {
  const original = globalThis.fetch;
  try {
    return await capture(async (f) => {
      globalThis.fetch = f;
      return call();
    });
  } finally {
    globalThis.fetch = original;
  }
}

const read = (c: Captured, family: Family = familyFromPath(c.path), bodyTruncated = false): ModelRead =>
  readModel({ ...c, family, bodyTruncated });

const openai = (f: typeof fetch) => new OpenAI({ apiKey: 'k', baseURL: 'http://gw.test/v1', fetch: f, maxRetries: 0 });
const anthropic = (f: typeof fetch) => new Anthropic({ apiKey: 'k', baseURL: 'http://gw.test', fetch: f, maxRetries: 0 });
const gemini = () => new GoogleGenAI({ apiKey: 'k', httpOptions: { baseUrl: 'http://gw.test' } });
const mp3 = () => toFile(Buffer.alloc(2048, 7), 'speech.mp3', { type: 'audio/mpeg' });
const png = () => toFile(Buffer.alloc(512, 9), 'in.png', { type: 'image/png' });
const M = 'openai/gpt-4o-mini';
const msgs = [{ role: 'user' as const, content: 'hi' }];

describe('OpenAI SDK requests', () => {
  it.each<[string, (c: OpenAI) => Promise<unknown>, string]>([
    ['chat completions', (c) => c.chat.completions.create({ model: M, messages: msgs }), M],
    ['chat completions, streaming', (c) => c.chat.completions.create({ model: M, messages: msgs, stream: true }), M],
    ['responses', (c) => c.responses.create({ model: M, input: 'hi' }), M],
    ['embeddings', (c) => c.embeddings.create({ model: 'openai/text-embedding-3-small', input: 'x' }), 'openai/text-embedding-3-small'],
    ['completions', (c) => c.completions.create({ model: 'openai/gpt-3.5-turbo-instruct', prompt: 'x' }), 'openai/gpt-3.5-turbo-instruct'],
    ['images', (c) => c.images.generate({ model: 'openai/gpt-image-1', prompt: 'a cat' }), 'openai/gpt-image-1'],
    ['speech', (c) => c.audio.speech.create({ model: 'openai/tts-1', voice: 'alloy', input: 'hi' }), 'openai/tts-1'],
    ['moderations', (c) => c.moderations.create({ model: 'openai/omni-moderation-latest', input: 'x' }), 'openai/omni-moderation-latest'],
    ['transcriptions (multipart)', async (c) => c.audio.transcriptions.create({ model: 'openai/whisper-1', file: await mp3() }), 'openai/whisper-1'],
    ['translations (multipart)', async (c) => c.audio.translations.create({ model: 'openai/whisper-1', file: await mp3() }), 'openai/whisper-1'],
    ['image edits (multipart)', async (c) => c.images.edit({ model: 'openai/gpt-image-1', image: await png(), prompt: 'hat' }), 'openai/gpt-image-1'],
    ['model retrieve (slash encoded as %2F)', (c) => c.models.retrieve('openai/gpt-4o'), 'openai/gpt-4o'],
    ['model delete', (c) => c.models.delete('ft:gpt-4o-mini:acme::abc'), 'ft:gpt-4o-mini:acme::abc'],
  ])('%s', async (_n, call, model) => {
    const req = await capture((f) => call(openai(f)));
    expect(read(req, 'openai')).toEqual({ kind: 'model', model });
  });

  it('listing models names no model: uncertain for a restricted key', async () => {
    const req = await capture((f) => openai(f).models.list());
    expect(read(req, 'openai')).toEqual({ kind: 'uncertain', reason: expect.stringContaining('takes no model') });
  });

  it('a file upload (multipart without model) is uncertain', async () => {
    const req = await capture(async (f) => openai(f).files.create({ file: await toFile(Buffer.from('{}\n'), 'b.jsonl'), purpose: 'batch' }));
    expect(read(req, 'openai').kind).toBe('uncertain');
  });
});

describe('Anthropic SDK requests', () => {
  it.each<[string, (c: Anthropic) => Promise<unknown>, string]>([
    ['messages', (c) => c.messages.create({ model: 'claude-3-5-haiku-latest', max_tokens: 8, messages: msgs }), 'claude-3-5-haiku-latest'],
    ['messages, streaming', (c) => c.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 8, messages: msgs, stream: true }), 'claude-sonnet-4-6'],
    ['count tokens', (c) => c.messages.countTokens({ model: 'claude-3-5-haiku-latest', messages: msgs }), 'claude-3-5-haiku-latest'],
    ['legacy complete (raw POST /v1/complete)', (c) => c.post('/v1/complete', { body: { model: 'claude-2.1', max_tokens_to_sample: 8, prompt: '\n\nHuman: hi\n\nAssistant:' } }), 'claude-2.1'],
    ['model retrieve', (c) => c.models.retrieve('claude-3-5-haiku-latest'), 'claude-3-5-haiku-latest'],
  ])('%s', async (_n, call, model) => {
    const req = await capture((f) => call(anthropic(f)));
    expect(read(req, 'anthropic')).toEqual({ kind: 'model', model });
  });

  it('message batches (models nested per request) are uncertain', async () => {
    const req = await capture((f) =>
      anthropic(f).messages.batches.create({ requests: [{ custom_id: 'a', params: { model: 'claude-3-5-haiku-latest', max_tokens: 8, messages: msgs } }] }),
    );
    expect(read(req, 'anthropic').kind).toBe('uncertain');
  });
});

describe('Google SDK requests', () => {
  it.each<[string, () => Promise<unknown>, string]>([
    ['generateContent', () => gemini().models.generateContent({ model: 'gemini-2.0-flash', contents: 'hi' }), 'gemini-2.0-flash'],
    ['streamGenerateContent (alt=sse)', async () => {
      for await (const _ of await gemini().models.generateContentStream({ model: 'gemini-2.0-flash', contents: 'hi' })) break;
    }, 'gemini-2.0-flash'],
    ['countTokens', () => gemini().models.countTokens({ model: 'gemini-2.0-flash', contents: 'hi' }), 'gemini-2.0-flash'],
    ['embedContent', () => gemini().models.embedContent({ model: 'text-embedding-004', contents: 'hi' }), 'text-embedding-004'],
  ])('%s', async (_n, call, model) => {
    const req = await captureGlobal(call);
    expect(familyFromPath(req.path)).toBe('google');
    expect(read(req)).toEqual({ kind: 'model', model });
  });
});

describe('dispatch', () => {
  const post = (path: string, body: string | Buffer | undefined, contentType: string | undefined = 'application/json'): Captured => ({
    method: 'POST',
    path,
    contentType,
    body,
  });

  it.each<[string, Captured, Family, string]>([
    ['JSON without a Content-Type', post('/v1/chat/completions', '{"model":"openai/gpt-4o"}', undefined), 'openai', 'openai/gpt-4o'],
    ['charset=utf-8', post('/v1/chat/completions', '{"model":"m"}', 'application/json; charset=UTF-8'), 'openai', 'm'],
    ['+json media type', post('/v1/chat/completions', '{"model":"m"}', 'application/vnd.api+json'), 'openai', 'm'],
    ['text body', post('/v1/messages', '{"model":"claude-x"}'), 'anthropic', 'claude-x'],
    ['Gemini OpenAI-compatible endpoint reads the body', post('/v1beta/openai/chat/completions', '{"model":"gemini-2.0-flash"}'), 'google', 'gemini-2.0-flash'],
    ['Google body naming the same model', post('/v1beta/models/gemini-2.0-flash:generateContent', '{"model":"models/gemini-2.0-flash","contents":[]}'), 'google', 'gemini-2.0-flash'],
    ['Vertex body naming the same resource', post('/v1/projects/p/locations/l/publishers/google/models/g:generateContent', '{"model":"projects/p/locations/l/publishers/google/models/g"}'), 'google', 'g'],
    ['Google path model with a truncated body (the path decides)', post('/v1beta/models/gemini-2.0-flash:generateContent', '{"contents":[{"parts":[{"inline_data":"AAAA'), 'google', 'gemini-2.0-flash'],
  ])('%s', (_n, req, family, model) => {
    expect(readModel({ ...req, family, bodyTruncated: _n.includes('truncated') })).toEqual({ kind: 'model', model });
  });

  it.each<[string, Captured, Family, boolean, string]>([
    ['no body on POST', post('/v1/chat/completions', undefined), 'openai', false, 'no request body reached'],
    ['empty body', post('/v1/chat/completions', ''), 'openai', false, 'no request body reached'],
    ['GET without a model', { method: 'GET', path: '/v1/files', contentType: undefined, body: undefined }, 'openai', false, 'takes no model'],
    ['truncated JSON, even with the model first', post('/v1/chat/completions', '{"model":"openai/gpt-4o","messages":[{"role":"user","content":"aaa'), 'openai', true, 'larger than the gateway reads'],
    ['truncated but complete-looking JSON', post('/v1/chat/completions', '{"model":"openai/gpt-4o"}'), 'openai', true, 'larger than the gateway reads'],
    ['truncated multipart', post('/v1/audio/transcriptions', '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--b--', 'multipart/form-data; boundary=b'), 'openai', true, 'larger than the gateway reads'],
    ['form-urlencoded', post('/v1/chat/completions', '{"a":"&model=expensive&","model":"cheap"}', 'application/x-www-form-urlencoded'), 'openai', false, 'neither JSON nor a multipart form'],
    ['text/plain', post('/v1/chat/completions', '{"model":"cheap"}', 'text/plain'), 'openai', false, 'neither JSON nor a multipart form'],
    ['two Content-Types joined', post('/v1/chat/completions', '{"model":"cheap"}', 'application/json,multipart/form-data; boundary=x'), 'openai', false, 'Content-Type'],
    ['UTF-16 charset', post('/v1/chat/completions', '{"model":"cheap"}', 'application/json; charset=utf-16'), 'openai', false, 'not in UTF-8'],
    ['multipart without a boundary', post('/v1/audio/transcriptions', '--b\r\n', 'multipart/form-data'), 'openai', false, 'multipart'],
    ['JSON body at a multipart Content-Type', post('/v1/audio/transcriptions', '{"model":"cheap"}', 'multipart/form-data; boundary=b'), 'openai', false, 'multipart'],
    ['duplicate model', post('/v1/messages', '{"model":"claude-3-haiku","model":"claude-opus-4"}'), 'anthropic', false, 'more than once'],
    ['invalid model name, echoed', post('/v1/chat/completions', '{"model":"gpt 4o\\n"}'), 'openai', false, '"gpt 4o\\n" is not a model name'],
    ['long invalid model name, truncated', post('/v1/chat/completions', JSON.stringify({ model: 'x'.repeat(300) })), 'openai', false, `"${'x'.repeat(128)}…"`],
    ['Google body naming another model', post('/v1beta/models/gemini-2.0-flash:generateContent', '{"model":"models/gemini-ultra"}'), 'google', false, 'different model than the request path'],
    ['Google body with a look-alike key', post('/v1beta/models/gemini-2.0-flash:generateContent', '{"Model":"models/gemini-ultra"}'), 'google', false, 'different model'],
    ['Google path at an OpenAI entry', post('/v1beta/models/gemini-ultra:generateContent', '{"model":"openai/gpt-4o-mini"}'), 'openai', false, 'endpoint keygate does not know'],
    ['Google listing', { method: 'GET', path: '/v1beta/models', contentType: undefined, body: undefined }, 'google', false, 'takes no model'],
  ])('uncertain: %s', (_n, req, family, bodyTruncated, says) => {
    const r = readModel({ ...req, family, bodyTruncated });
    expect(r.kind).toBe('uncertain');
    expect((r as { reason: string }).reason).toContain(says);
  });

  it('every reason completes "This key is limited to certain models and <reason>." as one sentence', () => {
    const r = readModel({ family: 'openai', method: 'POST', path: '/v1/chat/completions', contentType: undefined, body: '[]', bodyTruncated: false });
    expect(r.kind === 'uncertain' && /^[a-z]/.test(r.reason) && !r.reason.endsWith('.')).toBe(true);
  });
});
