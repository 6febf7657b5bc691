/**
 * The ext_proc codec against Envoy's own protos (protobufjs via @grpc/proto-loader, loaded from
 * @grpc/grpc-js-xds): what the upstream encoder writes, ours reads the same; what ours writes, the
 * upstream decoder reads as meant; hostile bytes end in WireError and nothing else.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadEnvoyProtos } from '../../proto/envoy-protos.ts';
import {
  continueResponse,
  decodeProcessingRequest,
  EXT_AUTHZ_NAMESPACE,
  replaceRequestBodyResponse,
  WireError,
  type Phase,
} from '../../src/transport/envoy/ext-proc.ts';
import { headerOf } from '../../src/metering/messages.ts';

const def = loadEnvoyProtos(['envoy/service/ext_proc/v3/external_processor.proto']);
const svc = def['envoy.service.ext_proc.v3.ExternalProcessor'] as any;
const process = svc.Process;
const encodeUpstream = (o: object): Buffer => process.requestSerialize(o);
const decodeResponseUpstream = (b: Buffer) => process.responseDeserialize(b) as any;

const authzMeta = (fields: Record<string, any>) => ({
  filter_metadata: {
    other: { fields: { key_id: { stringValue: 'not-this' } } },
    [EXT_AUTHZ_NAMESPACE]: { fields },
  },
});

describe('ProcessingRequest decoding', () => {
  it('reads request headers with raw_value and value, end_of_stream, metadata and observability mode', () => {
    const bytes = encodeUpstream({
      request_headers: {
        headers: {
          headers: [
            { key: ':path', raw_value: Buffer.from('/v1/chat/completions') },
            { key: ':method', value: 'POST' },
            { key: 'X-Request-Id', raw_value: Buffer.from('req-1') },
          ],
        },
        end_of_stream: false,
      },
      metadata_context: authzMeta({
        key_id: { stringValue: 'key_0123456789abcdef' },
        account_id: { stringValue: 'acct-1' },
        model: { stringValue: 'gpt-4o-mini' },
        other: { numberValue: 3 },
      }),
      observability_mode: true,
    });
    const r = decodeProcessingRequest(bytes);
    expect(r.phase).toBe('request_headers');
    expect(headerOf(r.headers, ':path')).toBe('/v1/chat/completions');
    expect(headerOf(r.headers, ':method')).toBe('POST');
    expect(headerOf(r.headers, 'x-request-id')).toBe('req-1');
    expect(r.endOfStream).toBe(false);
    expect(r.observabilityMode).toBe(true);
    expect(r.metadata).toEqual({ keyId: 'key_0123456789abcdef', accountId: 'acct-1', model: 'gpt-4o-mini' });
  });

  it('reads response headers, body chunks and trailers', () => {
    const h = decodeProcessingRequest(encodeUpstream({ response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] }, end_of_stream: true } }));
    expect([h.phase, headerOf(h.headers, ':status'), h.endOfStream]).toEqual(['response_headers', '200', true]);
    const b = decodeProcessingRequest(encodeUpstream({ response_body: { body: Buffer.from('data: {}\n\n'), end_of_stream: true } }));
    expect([b.phase, b.body!.toString(), b.endOfStream]).toEqual(['response_body', 'data: {}\n\n', true]);
    const q = decodeProcessingRequest(encodeUpstream({ request_body: { body: Buffer.from('{"a":1}') } }));
    expect([q.phase, q.body!.toString(), q.endOfStream]).toEqual(['request_body', '{"a":1}', false]);
    const t = decodeProcessingRequest(encodeUpstream({ response_trailers: { trailers: { headers: [{ key: 'grpc-status', value: '0' }] } } }));
    expect([t.phase, headerOf(t.headers, 'grpc-status')]).toEqual(['response_trailers', '0']);
    const none = decodeProcessingRequest(encodeUpstream({ observability_mode: false }));
    expect(none.phase).toBeNull();
  });

  it('the booking id, under booking_id (gRPC Check) or x-keygate-booking-id (HTTP authz); Envoy Gateway\'s per-policy ext_authz namespace is read too', () => {
    const id = `kb:${'0a'.repeat(16)}`;
    expect(decodeProcessingRequest(encodeUpstream({ response_body: { body: Buffer.from('x') }, metadata_context: authzMeta({ booking_id: { stringValue: id } }) })).metadata).toEqual({ bookingId: id });
    expect(decodeProcessingRequest(encodeUpstream({ response_body: { body: Buffer.from('x') }, metadata_context: authzMeta({ 'x-keygate-booking-id': { stringValue: id } }) })).metadata).toEqual({ bookingId: id });
    const eg = { filter_metadata: { 'envoy.filters.http.ext_authz/securitypolicy/llm/keygate': { fields: { key_id: { stringValue: 'k1' }, account_id: { stringValue: 'a1' }, booking_id: { stringValue: id } } } } };
    expect(decodeProcessingRequest(encodeUpstream({ response_body: { body: Buffer.from('x') }, metadata_context: eg })).metadata).toEqual({ keyId: 'k1', accountId: 'a1', bookingId: id });
    const lookalike = { filter_metadata: { 'envoy.filters.http.ext_authzX': { fields: { key_id: { stringValue: 'k1' } } } } };
    expect(decodeProcessingRequest(encodeUpstream({ response_body: { body: Buffer.from('x') }, metadata_context: lookalike })).metadata).toBeNull();
  });

  it('a metadata value of another kind is not a string; the other namespaces are ignored', () => {
    const r = decodeProcessingRequest(encodeUpstream({ response_body: { body: Buffer.from('x') }, metadata_context: authzMeta({ key_id: { numberValue: 5 }, account_id: { boolValue: true } }) }));
    expect(r.metadata).toEqual({});
    const none = decodeProcessingRequest(encodeUpstream({ metadata_context: { filter_metadata: { other: { fields: { key_id: { stringValue: 'k' } } } } } }));
    expect(none.metadata).toBeNull();
  });

  it('random requests: the fields read equal protobufjs decoding', () => {
    const phaseArb = fc.constantFrom('request_headers', 'response_headers', 'request_body', 'response_body');
    fc.assert(
      fc.property(
        phaseArb,
        fc.array(fc.tuple(fc.stringMatching(/^[a-z:-]{1,12}$/), fc.string({ maxLength: 20 }), fc.boolean()), { maxLength: 6 }),
        fc.uint8Array({ maxLength: 200 }),
        fc.boolean(),
        fc.option(fc.record({ key_id: fc.string({ maxLength: 30 }), account_id: fc.string({ maxLength: 30 }) })),
        (phase, hs, body, eos, meta) => {
          const headers = hs.map(([k, v, raw]) => (raw ? { key: k, raw_value: Buffer.from(v, 'latin1') } : { key: k, value: v }));
          const inner = phase.endsWith('headers') ? { headers: { headers }, end_of_stream: eos } : { body: Buffer.from(body), end_of_stream: eos };
          const msg: any = { [phase]: inner };
          if (meta) msg.metadata_context = authzMeta({ key_id: { stringValue: meta.key_id }, account_id: { stringValue: meta.account_id } });
          const bytes = encodeUpstream(msg);
          const r = decodeProcessingRequest(bytes);
          const up = process.requestDeserialize(bytes);
          expect(r.phase).toBe(phase);
          expect(r.endOfStream).toBe(Boolean(up[phase].end_of_stream));
          if (phase.endsWith('headers')) {
            const want = (up[phase].headers?.headers ?? []).flatMap((h: any) => [h.key.toLowerCase(), h.raw_value?.length ? Buffer.from(h.raw_value).toString('latin1') : (h.raw_value ? '' : (h.value ?? ''))]);
            expect(r.headers).toEqual(want);
          } else expect(Buffer.from(r.body!).equals(Buffer.from(up[phase].body ?? []))).toBe(true);
          if (meta) expect(r.metadata).toEqual({ keyId: meta.key_id || undefined, accountId: meta.account_id || undefined });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('hostile bytes: truncated, wrong wire types, huge lengths, random garbage end in WireError only', () => {
    const good = encodeUpstream({
      response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] } },
      metadata_context: authzMeta({ key_id: { stringValue: 'k' } }),
    });
    for (let n = 0; n < good.length; n++) {
      try {
        decodeProcessingRequest(good.subarray(0, n));
      } catch (e) {
        expect(e).toBeInstanceOf(WireError);
      }
    }
    const cases = [
      [0x2a, 0xff, 0xff, 0xff, 0xff, 0x0f], // response_body with a 4 GiB length
      [0x2a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], // length past 2^63
      [0x13], // field 2 with wire type 3 (start group)
      [0x2f], // wire type 7
      [0x50], // truncated varint
      [0x2a, 0x02, 0x0a, 0x05], // body length past its message
    ];
    for (const c of cases) expect(() => decodeProcessingRequest(Buffer.from(c))).toThrow(WireError);
    // a body field with a varint wire type is skipped, not read
    expect(decodeProcessingRequest(Buffer.from([0x2a, 0x02, 0x08, 0x01])).body!.length).toBe(0);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
        try {
          decodeProcessingRequest(Buffer.from(b));
        } catch (e) {
          expect(e).toBeInstanceOf(WireError);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('ProcessingResponse encoding', () => {
  it.each(['request_headers', 'response_headers', 'request_body', 'response_body', 'request_trailers', 'response_trailers'] as Phase[])(
    'an empty answer to %s is that oneof, empty',
    (phase) => {
      const up = decodeResponseUpstream(continueResponse(phase));
      expect(Object.keys(up)).toEqual([phase]);
      expect(up[phase].response ?? up[phase].header_mutation ?? null).toBeNull();
    },
  );

  it('a request body replacement is a body mutation protobufjs reads back', () => {
    const body = Buffer.from('{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true}}');
    const up = decodeResponseUpstream(replaceRequestBodyResponse(body));
    expect(Buffer.from(up.request_body.response.body_mutation.body).equals(body)).toBe(true);
    expect(up.request_body.response.status ?? 0).toBe(0);
    const withHeader = decodeResponseUpstream(replaceRequestBodyResponse(body, true));
    expect(withHeader.request_body.response.header_mutation.remove_headers).toEqual(['content-length']);
  });
});
