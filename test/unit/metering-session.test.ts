/**
 * MeterSession: identity, request ids, what is not booked and when the stream may end, the
 * request-body change asking for usage, observability mode, and hostile responses (bad counts,
 * another model, broken gzip, a 5 MiB event, an event that never ends, garbage) — counted, never a
 * crash, never a negative charge.
 */
import { createHash } from 'node:crypto';
import * as zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { decodeProcessingRequest, encodeAnswer } from '../../src/transport/envoy/ext-proc.ts';
import { continueAnswer } from '../../src/metering/messages.ts';
import { bookingRequestId, MeterSession } from '../../src/metering/session.ts';
import { loadEnvoyProtos } from '../../proto/envoy-protos.ts';
import { MAX_TOKEN_COUNT } from '../../src/schema/money.ts';
import { ACCOUNT, fixture, KEY_ID, meterOptions, run } from './metering-helpers.ts';

const sse = (...events: object[]) => Buffer.from(events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join(''));
const chatUsage = (usage: unknown, model = 'gpt-4o-mini') => Buffer.from(JSON.stringify({ model, choices: [{ message: { content: 'hi there' } }], usage }));

async function booking(x: Parameters<typeof run>[0]) {
  const { outcome } = await run(x);
  if (outcome.kind !== 'booking') throw new Error(`no booking: ${outcome.reason}`);
  return outcome;
}

describe('identity and request ids', () => {
  it('identity from the forwarded metadata; the headers when none is forwarded; metadata wins when they differ', async () => {
    const fromMeta = await booking({ path: '/v1/chat/completions', contentType: 'application/json', chunks: [fixture('openai-chat.json')], identity: 'metadata' });
    expect([fromMeta.booking.key_id, fromMeta.booking.account]).toEqual([KEY_ID, ACCOUNT]);
    const s = new MeterSession(meterOptions());
    const base = { body: null, endOfStream: false, observabilityMode: false } as const;
    s.handle({ ...base, phase: 'request_headers', headers: [':path', '/v1/messages', 'x-keygate-key-id', 'key_forgedforgedforged', 'x-keygate-account-id', 'other'], metadata: { keyId: KEY_ID, accountId: ACCOUNT } });
    s.handle({ ...base, phase: 'response_headers', headers: [':status', '200', 'content-type', 'application/json'], metadata: null });
    s.handle({ ...base, phase: 'response_body', headers: null, body: fixture('anthropic-messages.json'), endOfStream: true, metadata: null });
    const o = await s.end();
    expect(o.kind === 'booking' && [o.booking.key_id, o.booking.account, o.notes.identityMismatch]).toEqual([KEY_ID, ACCOUNT, true]);
  });

  it('no identity: nothing booked, the stream may end at the request headers', async () => {
    const { steps, outcome } = await run({ path: '/v1/chat/completions', contentType: 'application/json', chunks: [fixture('openai-chat.json')], identity: 'none' });
    expect(steps[0]).toEqual({ reply: continueAnswer('request_headers'), close: true });
    expect(outcome).toMatchObject({ kind: 'none', reason: 'no-identity' });
  });

  it('an endpoint metering does not read is not booked', async () => {
    const { steps, outcome } = await run({ path: '/v1/models', contentType: 'application/json', chunks: [Buffer.from('{"data":[]}')] });
    expect(steps[0]!.close).toBe(true);
    expect(outcome).toMatchObject({ kind: 'none', reason: 'not-metered' });
  });

  it('request id labels: as sent when a usage-record id, else h: + SHA-256 hex; absent: empty; no booking id forwarded: one minted per stream, noted', async () => {
    expect(bookingRequestId('0f5e-11ab')).toEqual({ id: '0f5e-11ab', hashed: false });
    const odd = 'id with spaces and ünïcode';
    expect(bookingRequestId(odd)).toEqual({ id: `h:${createHash('sha256').update(odd).digest('hex')}`, hashed: true });
    expect(bookingRequestId('x'.repeat(129)).hashed).toBe(true);
    const s = new MeterSession(meterOptions({ newRequestId: () => 'm:generated-1' }));
    const base = { body: null, endOfStream: false, observabilityMode: false, metadata: null } as const;
    s.handle({ ...base, phase: 'request_headers', headers: [':path', '/v1/embeddings', 'x-keygate-key-id', KEY_ID, 'x-keygate-account-id', ACCOUNT] });
    s.handle({ ...base, phase: 'response_headers', headers: [':status', '200', 'content-type', 'application/json'] });
    s.handle({ ...base, phase: 'response_body', headers: null, body: fixture('openai-embeddings.json'), endOfStream: true });
    const o = await s.end();
    expect(o.kind === 'booking' && [o.booking.booking_id, o.booking.request_id, o.notes.requestId, o.notes.bookingId]).toEqual(['m:generated-1', '', 'absent', 'minted']);
  });
});

describe('what is not booked', () => {
  it.each([400, 429, 500, 503])('status %i: nothing, and the stream may end at the response headers', async (status) => {
    const { steps, outcome } = await run({ path: '/v1/chat/completions', contentType: 'application/json', status, chunks: [Buffer.from('{"error":{"message":"x"}}')] });
    expect(steps[1]!.close).toBe(true);
    expect(outcome).toMatchObject({ kind: 'none', reason: 'error-status' });
  });

  it('a stream that never saw response headers books nothing', async () => {
    const s = new MeterSession(meterOptions());
    const base = { endOfStream: true, observabilityMode: false, metadata: null } as const;
    s.handle({ ...base, phase: 'request_headers', headers: [':path', '/v1/chat/completions', 'x-keygate-key-id', KEY_ID, 'x-keygate-account-id', ACCOUNT], body: null, endOfStream: false });
    s.handle({ ...base, phase: 'request_body', headers: null, body: Buffer.from('{"model":"m","stream":true}') });
    expect(await s.end()).toMatchObject({ kind: 'none', reason: 'no-response-headers' });
  });
});

describe('asking for usage', () => {
  it('an OpenAI streamed chat request body is answered with include_usage set; every other answer is empty', async () => {
    const { steps } = await run({ path: '/v1/chat/completions', requestBody: '{"model":"gpt-4o-mini","stream":true,"messages":[]}', contentType: 'text/event-stream', chunks: [fixture('openai-chat-stream.sse')] });
    const def = loadEnvoyProtos(['envoy/service/ext_proc/v3/external_processor.proto']);
    const p = (def['envoy.service.ext_proc.v3.ExternalProcessor'] as any).Process;
    const answer = p.responseDeserialize(encodeAnswer(steps[1]!.reply!));
    expect(JSON.parse(Buffer.from(answer.request_body.response.body_mutation.body).toString())).toEqual({ stream_options: { include_usage: true }, model: 'gpt-4o-mini', stream: true, messages: [] });
    expect(steps[0]!.reply).toBe(continueAnswer('request_headers'));
    expect(steps.slice(2).every((s) => s.reply === continueAnswer(s === steps[2] ? 'response_headers' : 'response_body'))).toBe(true);
  });

  it('off by option, not on Anthropic, not in observability mode (nothing is answered there)', async () => {
    const body = '{"model":"gpt-4o-mini","stream":true,"messages":[]}';
    const off = await run({ path: '/v1/chat/completions', requestBody: body, contentType: 'text/event-stream', chunks: [fixture('openai-chat-stream.sse')] }, meterOptions({ forceUsage: false }));
    expect(off.steps[1]!.reply).toBe(continueAnswer('request_body'));
    const anth = await run({ path: '/v1/messages', requestBody: body, contentType: 'text/event-stream', chunks: [fixture('anthropic-messages-stream.sse')] });
    expect(anth.steps[1]!.reply).toBe(continueAnswer('request_body'));
    const obs = await run({ path: '/v1/chat/completions', requestBody: body, contentType: 'text/event-stream', chunks: [fixture('openai-chat-stream.sse')], observability: true });
    expect(obs.steps.every((s) => s.reply === null)).toBe(true);
    expect(obs.outcome).toMatchObject({ kind: 'booking', booking: { input_tokens: 19, output_tokens: 10 } });
  });
});

describe('streams cut short', () => {
  it('a chat stream cut before its usage chunk is booked from the text seen, estimated', async () => {
    const all = fixture('openai-chat-stream.sse');
    const cut = all.subarray(0, all.indexOf('"content":" today? "'));
    const o = await booking({ path: '/v1/chat/completions', requestBody: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"abcdefgh"}]}', contentType: 'text/event-stream', chunks: [cut], complete: false });
    expect(o.booking).toMatchObject({ input_tokens: Math.ceil('userabcdefgh'.length / 4), output_tokens: Math.ceil('Hello! How can I assist you'.length / 4), estimated: true });
    expect(o.notes.cut).toBe(true);
  });

  // Envoy sends metering the request body of every metered endpoint (envoy.yaml): a stream cut
  // before its usage has its input estimated from it; without it the input would be 0.
  it.each<[string, string, string, string, string]>([
    ['an OpenAI Responses stream', '/v1/responses', 'openai-responses-stream.sse', 'response.completed', JSON.stringify({ model: 'gpt-4o', instructions: 'Be brief.', input: 'x'.repeat(4000) })],
    ['an Anthropic messages stream', '/v1/messages', 'anthropic-messages-stream.sse', '"usage"', JSON.stringify({ model: 'claude-sonnet-4-5', system: 'Be brief.', messages: [{ role: 'user', content: 'x'.repeat(4000) }], stream: true })],
    ['a Google stream', '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse', 'google-stream.sse', '"usageMetadata"', JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'x'.repeat(4000) }] }], systemInstruction: { parts: [{ text: 'Be brief.' }] } })],
  ])('%s cut before its usage has its input estimated from the request body seen', async (_name, path, name, usageAt, requestBody) => {
    const all = fixture(name);
    const cut = all.subarray(0, all.indexOf(usageAt));
    const seen = await booking({ path, requestBody, contentType: 'text/event-stream', chunks: [cut], complete: false });
    // every string under the input fields, roles included: 'Be brief.' (9) + 'user' (4, not on Responses) + 4000 x
    const textLength = 9 + 4000 + (path === '/v1/responses' ? 0 : 4);
    expect(seen.booking).toMatchObject({ input_tokens: Math.ceil(textLength / 4), estimated: true });
    expect(seen.notes.cut).toBe(true);
    const unseen = await booking({ path, contentType: 'text/event-stream', chunks: [cut], complete: false });
    expect(unseen.booking).toMatchObject({ input_tokens: 0, estimated: true });
  });

  it('a JSON body cut in the middle of its text counts the text seen', async () => {
    const all = fixture('anthropic-messages.json');
    const o = await booking({ path: '/v1/messages', contentType: 'application/json', chunks: [all.subarray(0, all.indexOf('My name'))], complete: false });
    expect(o.booking.estimated).toBe(true);
    expect(o.booking.output_tokens).toBe(Math.ceil('Let me think.Hi! '.length / 4));
  });

  it('an encoded stream abandoned part way books what was decoded', async () => {
    const gz = zlib.gzipSync(fixture('openai-chat-stream-300.sse'));
    const o = await booking({ path: '/v1/chat/completions', contentType: 'text/event-stream', contentEncoding: 'gzip', chunks: [gz.subarray(0, gz.length >> 1)], complete: false });
    expect(o.booking.estimated).toBe(true);
  });
});

describe('hostile responses', () => {
  it.each([
    ['negative', '-5'],
    ['fractional', '1.5'],
    ['an integer written with a fraction', '1.0'],
    ['huge', '1152921504606846976'],
    ['a string', '"100"'],
    ['true', 'true'],
    ['an object', '{"n":1}'],
    ['an exponent', '1e3'],
  ])('a count that is %s is ignored, counted, and never charged negative', async (_, bad) => {
    const body = Buffer.from(`{"model":"m","choices":[],"usage":{"prompt_tokens":${bad},"completion_tokens":3}}`);
    const o = await booking({ path: '/v1/chat/completions', contentType: 'application/json', chunks: [body] });
    expect(o.booking.input_tokens).toBe(0); // no request body seen: nothing to estimate from
    expect(o.booking.output_tokens).toBe(3);
    expect(o.booking.estimated).toBe(true);
    expect(o.notes.anomalies.badCounts).toBeGreaterThan(0);
  });

  it('parts larger than their whole are clamped and counted', async () => {
    const o = await booking({ path: '/v1/chat/completions', contentType: 'application/json', chunks: [chatUsage({ prompt_tokens: 10, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 50 }, completion_tokens_details: { reasoning_tokens: 9 } })] });
    expect(o.booking).toMatchObject({ input_tokens: 10, cached_input_tokens: 10, output_tokens: 3, reasoning_tokens: 3 });
    expect(o.notes.anomalies.clamped).toBe(2);
  });

  it('counts that add up past the largest booked count (10^12) are clamped to it and counted', async () => {
    const big = 2 ** 40; // the largest count the reader takes
    const body = Buffer.from(JSON.stringify({ model: 'claude', content: [], usage: { input_tokens: big, cache_read_input_tokens: big, cache_creation_input_tokens: big, output_tokens: big } }));
    const o = await booking({ path: '/v1/messages', contentType: 'application/json', chunks: [body] });
    expect(o.booking).toMatchObject({ input_tokens: MAX_TOKEN_COUNT, cached_input_tokens: MAX_TOKEN_COUNT, cache_write_tokens: 0, output_tokens: MAX_TOKEN_COUNT });
    expect(o.notes.anomalies.clamped).toBe(3);
  });

  it('a response claiming another model: that model is priced, and it is noted; a model that is not a plain name is not taken', async () => {
    const o = await booking({ path: '/v1/chat/completions', requestBody: '{"model":"gpt-4o-mini","messages":[]}', contentType: 'application/json', chunks: [chatUsage({ prompt_tokens: 1, completion_tokens: 1 }, 'o3-pro')] });
    expect([o.booking.model, o.notes.modelFrom, o.notes.modelDiffers]).toEqual(['o3-pro', 'response', true]);
    const weird = await booking({ path: '/v1/chat/completions', requestBody: '{"model":"gpt-4o-mini","messages":[]}', contentType: 'application/json', chunks: [chatUsage({ prompt_tokens: 1, completion_tokens: 1 }, 'x'.repeat(300))] });
    expect([weird.booking.model, weird.notes.modelFrom, weird.notes.anomalies.badModel]).toEqual(['gpt-4o-mini', 'request', 1]);
    const spaced = await booking({ path: '/v1/chat/completions', contentType: 'application/json', chunks: [chatUsage({ prompt_tokens: 1, completion_tokens: 1 }, 'gpt 4\n')] });
    expect(spaced.booking.model).toBeNull();
  });

  it('broken gzip is a metering failure, booked from what was read, never a crash', async () => {
    const gz = zlib.gzipSync(fixture('openai-chat.json'));
    const broken = Buffer.from(gz);
    broken.fill(0x41, 40, 80);
    const o = await booking({ path: '/v1/chat/completions', contentType: 'application/json', contentEncoding: 'gzip', chunks: [broken] });
    expect(o.notes.failure).toBe('corrupt');
    const truncated = await booking({ path: '/v1/chat/completions', contentType: 'application/json', contentEncoding: 'gzip', chunks: [gz.subarray(0, gz.length - 10)] });
    expect(truncated.notes.failure).toBe('truncated');
    const garbage = await booking({ path: '/v1/chat/completions', contentType: 'application/json', contentEncoding: 'br', chunks: [Buffer.from('this is not brotli at all')] });
    expect(garbage.notes.failure).toBe('corrupt');
    const several = await booking({ path: '/v1/chat/completions', contentType: 'application/json', contentEncoding: 'gzip, br', chunks: [gz] });
    expect(several.notes.failure).toBe('unsupported-encoding');
  });

  it('a decompression bomb stops at the decoded bound', async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(32 * 1024 * 1024, 0x20));
    const { outcome } = await run({ path: '/v1/chat/completions', contentType: 'application/json', contentEncoding: 'gzip', chunks: [bomb] }, meterOptions({ maxDecodedBytes: 1024 * 1024 }));
    expect(outcome.kind === 'booking' && outcome.notes.failure).toBe('too-large');
    // a small one (one batch, the path that decodes a whole response at once) too
    const small = zlib.gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x20));
    expect(small.length).toBeLessThan(16 * 1024);
    const again = await run({ path: '/v1/chat/completions', contentType: 'application/json', contentEncoding: 'gzip', chunks: [small] }, meterOptions({ maxDecodedBytes: 1024 * 1024 }));
    expect(again.outcome.kind === 'booking' && again.outcome.notes.failure).toBe('too-large');
  });

  it('a 5 MiB event is skipped and the events after it are read', async () => {
    const big = `data: {"choices":[{"delta":{"content":"${'a'.repeat(5 * 1024 * 1024)}"}}]}\n\n`;
    const body = Buffer.concat([Buffer.from(big), sse({ model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 4, completion_tokens: 6 } }), Buffer.from('data: [DONE]\n\n')]);
    const chunks: Buffer[] = [];
    for (let i = 0; i < body.length; i += 65536) chunks.push(body.subarray(i, i + 65536));
    const o = await booking({ path: '/v1/chat/completions', contentType: 'text/event-stream', chunks });
    expect(o.booking).toMatchObject({ input_tokens: 4, output_tokens: 6, estimated: false });
    expect(o.notes.oversizedEvents).toBe(1);
  });

  it('an event that never ends costs no memory and the stream is booked from what came before', async () => {
    const chunks = [sse({ model: 'gpt-4o-mini', choices: [{ delta: { content: 'abcd' } }] }), Buffer.from('data: {"choices":[{"delta":{"content":"')];
    for (let i = 0; i < 200; i++) chunks.push(Buffer.alloc(32 * 1024, 0x62));
    const o = await booking({ path: '/v1/chat/completions', contentType: 'text/event-stream', chunks, complete: false });
    expect(o.booking.estimated).toBe(true);
    expect(o.notes.oversizedEvents).toBe(1);
    expect(o.booking.output_tokens).toBe(1); // "abcd"; the cut event's text was never handed on past the bound
  });

  it('garbage bodies and garbage messages never throw', async () => {
    for (const g of [Buffer.from([0xff, 0xfe, 0x00, 0x7b]), Buffer.from('}}]]{{[['), Buffer.from('data: {"usage":{"prompt_tokens":\n\n'), Buffer.alloc(1000, 0x5b)]) {
      for (const type of ['application/json', 'text/event-stream']) {
        const { outcome } = await run({ path: '/v1/chat/completions', contentType: type, chunks: [g] });
        expect(outcome.kind).toBe('booking');
      }
    }
    const s = new MeterSession(meterOptions());
    expect(() => decodeProcessingRequest(Buffer.from([0x2a, 0xff, 0xff, 0xff, 0xff, 0x0f]))).toThrow();
    expect(s.undecodable()).toEqual({ reply: null, close: true });
    expect(() => decodeProcessingRequest(Buffer.from([0x13]))).toThrow();
    expect(await s.end()).toMatchObject({ kind: 'none', notes: { failure: 'undecodable-message' } });
  });
});

describe('from the wire', () => {
  it('messages encoded by protobufjs from Envoy\'s protos, metadata on each, meter the same as decoded ones', async () => {
    const def = loadEnvoyProtos(['envoy/service/ext_proc/v3/external_processor.proto']);
    const p = (def['envoy.service.ext_proc.v3.ExternalProcessor'] as any).Process;
    const metadata_context = { filter_metadata: { 'envoy.filters.http.ext_authz': { fields: { key_id: { stringValue: KEY_ID }, account_id: { stringValue: ACCOUNT }, model: { stringValue: 'claude-sonnet-4-5' } } } } };
    const hm = (h: Record<string, string>) => ({ headers: Object.entries(h).map(([key, v]) => ({ key, raw_value: Buffer.from(v) })) });
    const body = fixture('anthropic-messages-stream.sse');
    const msgs = [
      { request_headers: { headers: hm({ ':path': '/v1/messages', ':method': 'POST', 'x-request-id': 'r-wire' }) }, metadata_context },
      { response_headers: { headers: hm({ ':status': '200', 'content-type': 'text/event-stream' }) }, metadata_context },
      { response_body: { body: body.subarray(0, 333) }, metadata_context },
      { response_body: { body: body.subarray(333), end_of_stream: true }, metadata_context },
      { response_trailers: { trailers: hm({ 'x-trailer': '1' }) }, metadata_context },
    ];
    const s = new MeterSession(meterOptions());
    const answers = msgs.map((m) => p.responseDeserialize(encodeAnswer(s.handle(decodeProcessingRequest(p.requestSerialize(m), { metadata: s.wantsMetadata })).reply!)));
    expect(answers.map((a: object) => Object.keys(a)[0])).toEqual(['request_headers', 'response_headers', 'response_body', 'response_body', 'response_trailers']);
    const o = await s.end();
    expect(o).toMatchObject({ kind: 'booking', booking: { request_id: 'r-wire', key_id: KEY_ID, account: ACCOUNT, model: 'claude-sonnet-4-5-20250929', input_tokens: 2520, output_tokens: 15, estimated: false } });
  });
});
