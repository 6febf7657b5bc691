/**
 * Model restrictions end to end: the real sidecar, a real redis-server, and Check calls built from
 * Envoy's protos with the body as Envoy sends it (`raw_body`, `pack_as_bytes`, partial bodies
 * marked with x-envoy-auth-partial-body).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { schema } from '../src/schema/redis-schema.ts';
import { deniedBody, type CheckResponseMsg, type EnvoyClient, type EnvoyRequest } from './helpers/envoy-client.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';

const s = schema();
let stack: Stack;
let db: Redis;
let client: EnvoyClient;
let key: SeededKey;
let open: SeededKey;

beforeAll(async () => {
  stack = await startStack();
  ({ db, client } = stack);
  key = await seedKey(db, s, {
    models: ['anthropic/claude-3-5-haiku-latest', 'google/gemini-2.0-flash', 'openai/whisper-1', 'openai/gpt-4o-mini'],
  });
  open = await seedKey(db, s);
});

afterAll(async () => {
  await stack?.close();
});

const check = (r: EnvoyRequest, k: SeededKey = key) => client.check({ ...r, headers: { 'x-api-key': k.key, ...r.headers } });

function expectAllowed(res: CheckResponseMsg, model: string | null): void {
  expect(res.status?.code).toBe(0);
  expect(res.denied_response).toBeUndefined();
  expect(res.dynamic_metadata?.fields?.model?.stringValue).toBe(model ?? undefined);
}

function expectModelDenied(res: CheckResponseMsg, says: string): { message: string } {
  expect(res.ok_response).toBeUndefined();
  expect(res.denied_response?.status?.code).toBe(403);
  const body = deniedBody(res);
  const message: string = body.error.message;
  const code = typeof body.error.code === 'string' ? body.error.code : body.error.details?.[0]?.reason;
  expect(code).toBe('MODEL_NOT_ALLOWED');
  expect(message).toContain(says);
  return { message };
}

function multipart(fields: Array<[string, string, string?]>): { body: Buffer; contentType: string } {
  const b = 'kg-test-boundary-7MA4YWxk';
  const parts = fields.map(([name, value, filename]) =>
    filename === undefined
      ? `Content-Disposition: form-data; name="${name}"\r\n\r\n${value}`
      : `Content-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: audio/mpeg\r\n\r\n${value}`,
  );
  return { body: Buffer.from(`--${b}\r\n${parts.join(`\r\n--${b}\r\n`)}\r\n--${b}--\r\n`, 'latin1'), contentType: `multipart/form-data; boundary=${b}` };
}

describe('Anthropic: a bare model is read as anthropic/…', () => {
  it('allowed bare model → allow, with the model in dynamic metadata', async () => {
    const res = await check({
      path: '/v1/messages',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-3-5-haiku-latest', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expectAllowed(res, 'anthropic/claude-3-5-haiku-latest');
  });

  it('another model → 403 in the Anthropic shape, naming it', async () => {
    const res = await check({ path: '/v1/messages', body: JSON.stringify({ model: 'claude-opus-4-1', max_tokens: 16, messages: [] }) });
    expectModelDenied(res, '"claude-opus-4-1" is not among');
    expect(deniedBody(res).type).toBe('error');
  });

  it('a cheap model first and an expensive one as a case variant → 403', async () => {
    const res = await check({ path: '/v1/messages', body: '{"model":"claude-3-5-haiku-latest","Model":"claude-opus-4-1","messages":[]}' });
    expectModelDenied(res, 'some parsers read as "model"');
  });
});

describe('Google: the model is in the path', () => {
  it.each([
    '/v1beta/models/gemini-2.0-flash:generateContent',
    '/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse',
    '/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent',
  ])('%s → allow', async (path) => {
    const res = await check({ path, headers: { 'content-type': 'application/json' }, body: '{"contents":[{"parts":[{"text":"hi"}]}]}' });
    expectAllowed(res, 'google/gemini-2.0-flash');
  });

  it('another model in the path → 403 in the Google shape', async () => {
    const res = await check({ path: '/v1beta/models/gemini-2.5-pro:generateContent', body: '{"contents":[]}' });
    expectModelDenied(res, '"gemini-2.5-pro"');
    expect(deniedBody(res).error.status).toBe('PERMISSION_DENIED');
  });

  it('a dot-segment path → 403 before the model rule: no catalog endpoint has one', async () => {
    const res = await check({ path: '/v1beta/models/gemini-2.0-flash:generateContent/../../models/gemini-2.5-pro:generateContent', body: '{}' });
    expect(res.denied_response?.status?.code).toBe(403);
    expect(deniedBody(res).error.details[0].reason).toBe('ENDPOINT_NOT_ALLOWED');
  });
});

describe('OpenAI multipart (audio transcriptions)', () => {
  it('the model form field after the file → allow', async () => {
    const { body, contentType } = multipart([['file', 'ID3\u0000\u0001binary', 'a.mp3'], ['model', 'openai/whisper-1']]);
    expectAllowed(await check({ path: '/v1/audio/transcriptions', headers: { 'content-type': contentType }, body }), 'openai/whisper-1');
  });

  it('two model fields → 403', async () => {
    const { body, contentType } = multipart([['model', 'openai/whisper-1'], ['file', 'x', 'a.mp3'], ['model', 'openai/gpt-4o-transcribe']]);
    expectModelDenied(await check({ path: '/v1/audio/transcriptions', headers: { 'content-type': contentType }, body }), 'more than once');
  });
});

describe('bodies the check cannot read with certainty', () => {
  it('a truncated body (allow_partial_message) → 403 with a clear message, even with the model first', async () => {
    const res = await check({
      path: '/v1/embeddings',
      headers: { 'content-type': 'application/json' },
      body: `{"model":"openai/gpt-4o-mini","input":["${'a'.repeat(1000)}`,
      partial: true,
    });
    const { message } = expectModelDenied(res, 'This key is limited to certain models and the request body is larger than the gateway reads');
    expect(message).toContain('send a smaller request or use a key without model limits');
  });

  it('listing models with a restricted key → 403 (strict: no model named)', async () => {
    expectModelDenied(await check({ method: 'GET', path: '/v1/models' }), 'takes no model');
  });

  it('an unrestricted key needs the body only where the endpoint rule reads it', async () => {
    expectAllowed(await check({ path: '/v1/embeddings', body: '{"model":"x","input":[', partial: true }, open), null);
    // Chat completions may name provider files: read for every key, so a body cut short is refused.
    const cut = await check({ path: '/v1/chat/completions', body: '{"model":"x","messages":[', partial: true }, open);
    expect(cut.denied_response?.status?.code).toBe(400);
    expect(deniedBody(cut).error.code).toBe('USAGE_NOT_GUARANTEED');
    expectAllowed(await check({ method: 'GET', path: '/v1/models' }, open), null);
  });
});

describe('large bodies in flight together', () => {
  it('each gets the answer for its own body (pooled message buffers are never shared between calls)', async () => {
    const allowed = 'openai/gpt-4o-mini';
    const refused = 'openai/gpt-4.1';
    // a key not cached yet: the first decisions wait for Redis while more bodies arrive
    const fresh = await seedKey(db, s, { models: [allowed] });
    const calls = Array.from({ length: 120 }, (_, i) => {
      const model = i % 3 === 0 ? refused : allowed;
      // 17 KiB to 130 KiB: several DATA frames each, across pooled size classes
      const content = String.fromCharCode(97 + (i % 26)).repeat(17 * 1024 + ((i * 7919) % (113 * 1024)));
      const body = JSON.stringify({ model, messages: [{ role: 'user', content }] });
      return { i, model, p: check({ path: '/v1/chat/completions', headers: { 'content-type': 'application/json', 'x-request-id': `big-${i}` }, body, contextExtensions: { protocol: 'openai' } }, fresh) };
    });
    for (const c of calls) {
      const res = await c.p;
      if (c.model === allowed) expectAllowed(res, allowed);
      else expectModelDenied(res, 'gpt-4.1');
    }
  });
});
