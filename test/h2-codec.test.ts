/**
 * The lean transport's codec against Envoy's own protos (loaded by protobufjs from
 * @grpc/grpc-js-xds): what the upstream encoder writes, ours reads the same; what ours writes, the
 * upstream decoder reads the same. Random messages included (fast-check).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { authorizationService } from '../proto/envoy-protos.ts';
import { checkInputFromEnvoy, checkResponse, type CheckResponse } from '../src/transport/envoy/check.ts';
import { checkResponseFields, decodeCheckRequest, frameMessage, WireError } from '../src/transport/grpc/codec.ts';
import { checkRequest } from './helpers/envoy-client.ts';

const m = authorizationService().service.Check!;
const encodeUpstream = (o: object) => m.requestSerialize(o);
const decodeUpstream = (b: Buffer) => m.requestDeserialize(b) as any;
const unframe = (b: Buffer) => b.subarray(5);

/** The fields of a decoded request that keygate reads, normalised for comparison. */
function read(req: any) {
  const http = req.attributes?.request?.http ?? {};
  return {
    id: http.id ?? '',
    method: http.method ?? '',
    path: http.path ?? '',
    size: Number(http.size ?? 0),
    headers: { ...(http.headers ?? {}) },
    headerMap: (http.header_map?.headers ?? []).map((h: any) => [h.key ?? '', h.value ?? '', Buffer.from(h.raw_value ?? []).toString('hex')]),
    body: http.body ?? '',
    rawBody: Buffer.from(http.raw_body ?? []).toString('hex'),
    ext: { ...(req.attributes?.context_extensions ?? {}) },
  };
}

describe('CheckRequest decoding', () => {
  it('reads what Envoy sends, skipping peers, time and metadata', () => {
    const msg = checkRequest({
      path: '/v1/messages?beta=true',
      headers: { authorization: 'Bearer kg_x', 'x-request-id': 'r-1', 'x-many': ['a', 'b'] },
      contextExtensions: { protocol: 'anthropic' },
      body: '{"model":"claude"}',
    });
    const bytes = encodeUpstream(msg);
    expect(read(decodeCheckRequest(bytes))).toEqual(read(decodeUpstream(bytes)));
    expect(decodeCheckRequest(bytes).attributes!.request!.http!.headers!['x-many']).toBe('a,b');
  });

  it('reads header_map with raw values', () => {
    const bytes = encodeUpstream(checkRequest({ path: '/', headers: { 'x-api-key': ['k1', 'k2'] }, rawHeaders: true }));
    expect(read(decodeCheckRequest(bytes))).toEqual(read(decodeUpstream(bytes)));
  });

  it('reads a negative int64 size (Envoy sends -1 when unknown)', () => {
    const bytes = encodeUpstream({ attributes: { request: { http: { size: '-1', raw_body: Buffer.from('{}') } } } });
    expect(decodeCheckRequest(bytes).attributes!.request!.http!.size).toBe(-1);
    const input = checkInputFromEnvoy(decodeCheckRequest(bytes));
    expect(input.bodyTruncated).toBe(false);
  });

  it('skips unknown fields of every wire type and merges repeated embedded messages', () => {
    const a = encodeUpstream({ attributes: { request: { http: { path: '/a', method: 'GET' } } } });
    const b = encodeUpstream({ attributes: { request: { http: { path: '/b' } }, context_extensions: { protocol: 'google' } } });
    const unknown = Buffer.from([0x98, 0x06, 0x96, 0x01, 0xa1, 0x06, 1, 2, 3, 4, 5, 6, 7, 8, 0xad, 0x06, 1, 2, 3, 4, 0xb2, 0x06, 0x01, 0x00]);
    const got = decodeCheckRequest(Buffer.concat([a, unknown, b]));
    expect(got.attributes!.request!.http!.path).toBe('/b');
    expect(got.attributes!.request!.http!.method).toBe('GET');
    expect(got.attributes!.context_extensions!.protocol).toBe('google');
  });

  it('a map key named __proto__ is an ordinary header', () => {
    const headers = Object.create(null) as Record<string, string>;
    headers['__proto__'] = 'x';
    headers['x-api-key'] = 'k';
    const bytes = encodeUpstream({ attributes: { request: { http: { headers } } } });
    const h = decodeCheckRequest(bytes).attributes!.request!.http!.headers!;
    expect(Object.hasOwn(h, '__proto__')).toBe(true);
    expect(h['x-api-key']).toBe('k');
  });

  it.each([
    ['truncated varint', [0x0a, 0xff, 0xff, 0xff]],
    ['length past the end', [0x0a, 0x7f, 0x01]],
    ['group wire type', [0x0b, 0x0c]],
    ['11-byte varint', [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]],
  ])('refuses a malformed message (%s)', (_n, bytes) => {
    expect(() => decodeCheckRequest(Buffer.from(bytes))).toThrow(WireError);
  });

  it('agrees with the upstream decoder on random requests', () => {
    const str = fc.string({ maxLength: 40, unit: 'binary' });
    fc.assert(
      fc.property(
        fc.record({
          path: str,
          method: fc.constantFrom('GET', 'POST', ''),
          headers: fc.dictionary(fc.string({ minLength: 1, maxLength: 20 }), str, { maxKeys: 30 }),
          ext: fc.dictionary(fc.string({ maxLength: 10 }), str, { maxKeys: 3 }),
          body: fc.option(fc.uint8Array({ maxLength: 300 }), { nil: undefined }),
          size: fc.integer({ min: -1, max: 2 ** 40 }),
          raw: fc.boolean(),
        }),
        (r) => {
          const http: Record<string, unknown> = { id: 'i', method: r.method, path: r.path, size: String(r.size) };
          if (r.raw) http.header_map = { headers: Object.entries(r.headers).map(([key, v]) => ({ key, raw_value: Buffer.from(v) })) };
          else http.headers = r.headers;
          if (r.body) http.raw_body = Buffer.from(r.body);
          const bytes = encodeUpstream({ attributes: { request: { http }, context_extensions: r.ext, source: { principal: 'p' } } });
          expect(read(decodeCheckRequest(bytes))).toEqual(read(decodeUpstream(bytes)));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('lazy header lookup (the hot path of the transport)', () => {
  it('answers every name as the decoded map does, absent names and repeated keys included', () => {
    const name = fc.constantFrom('authorization', 'x-api-key', 'x-goog-api-key', 'x-request-id', 'content-type', 'ä', '');
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.oneof(name, fc.string({ maxLength: 12 })), fc.string({ maxLength: 30, unit: 'binary' })), { maxLength: 25 }),
        fc.boolean(),
        (entries, withHeaderMap) => {
          // a map with repeated keys on the wire: encode entry by entry and concatenate
          const parts = entries.map(([k, v]) => encodeUpstream({ attributes: { request: { http: { headers: { [k]: v } } } } }));
          if (withHeaderMap) parts.push(encodeUpstream({ attributes: { request: { http: { header_map: { headers: [{ key: 'x-api-key', raw_value: Buffer.from('hm') }] } } } } }));
          const bytes = Buffer.concat(parts);
          const eager = checkInputFromEnvoy(decodeCheckRequest(bytes));
          const lazy = checkInputFromEnvoy(decodeCheckRequest(bytes, { lazyHeaders: true }));
          for (const n of ['authorization', 'x-api-key', 'x-goog-api-key', 'x-request-id', 'content-type', 'ä', '', 'absent', ...entries.map(([k]) => k)]) {
            expect(lazy.header(n)).toEqual(eager.header(n));
          }
          expect(lazy.requestId).toEqual(eager.requestId);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('body as bytes (the hot path of the transport)', () => {
  const text = (b: Uint8Array | string | undefined) => (b === undefined ? undefined : typeof b === 'string' ? b : Buffer.from(b).toString('utf8'));

  it('hands a valid UTF-8 body on as the same text, and decodes an invalid one as before', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 30, unit: 'binary' }), fc.uint8Array({ maxLength: 120 })), fc.integer({ min: -1, max: 400 }), (body, size) => {
        // an arbitrary byte string in the body field (Envoy's bodies are UTF-8; a hostile sender's need not be):
        // encoded as raw_body (field 12), then retagged as body (field 11), same length
        const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
        const wire = Buffer.from(encodeUpstream({ attributes: { request: { http: { size, raw_body: bytes } } } }));
        const at = wire.indexOf(Buffer.concat([Buffer.from([(12 << 3) | 2, bytes.length]), bytes]));
        expect(at).toBeGreaterThan(0);
        wire[at] = (11 << 3) | 2;
        const eager = checkInputFromEnvoy(decodeCheckRequest(wire));
        const lazy = checkInputFromEnvoy(decodeCheckRequest(wire, { lazyHeaders: true }));
        expect(text(lazy.body)).toEqual(text(eager.body));
        expect(lazy.bodyTruncated).toBe(eager.bodyTruncated);
        if (lazy.body !== undefined && typeof lazy.body !== 'string') expect(Buffer.from(lazy.body).equals(bytes)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('keeps the last body field when two are sent (one valid UTF-8, one not), as the eager decoder does', () => {
    const one: Buffer = encodeUpstream({ attributes: { request: { http: { body: '{"model":"a"}' } } } });
    const bad = Buffer.from(one);
    bad[bad.indexOf('a"')] = 0xff;
    for (const wire of [Buffer.concat([one, bad]), Buffer.concat([bad, one])]) {
      expect(text(checkInputFromEnvoy(decodeCheckRequest(wire, { lazyHeaders: true })).body)).toBe(text(checkInputFromEnvoy(decodeCheckRequest(wire)).body));
    }
  });
});

describe('CheckResponse encoding', () => {
  const opts = { accountHeader: 'x-keygate-account-id', keyIdHeader: 'x-keygate-key-id', stripKeyHeaders: true, errorDomain: 'keygate' };
  const outcomes = [
    { decision: { allow: true as const, keyId: 'key_1', accountId: 'acct-ü', model: 'gpt-4o' }, family: 'openai' as const, requestId: 'r1' },
    { decision: { allow: true as const, keyId: 'key_1', accountId: 'a', model: null }, family: 'openai' as const, requestId: 'r1' },
    { decision: { allow: false as const, code: 'INVALID_API_KEY' as const, status: 401 }, family: 'anthropic' as const, requestId: 'r"2' },
    { decision: { allow: false as const, code: 'AUTH_UNAVAILABLE' as const, status: 503 }, family: 'google' as const, requestId: 'r3' },
  ];

  it.each(outcomes)('writes what protobufjs writes, byte for byte (%#)', (outcome) => {
    const obj = checkResponse(outcome, opts);
    const ours = unframe(frameMessage(checkResponseFields(obj as CheckResponse)));
    expect(ours.toString('hex')).toBe(m.responseSerialize(obj).toString('hex'));
    expect(m.responseDeserialize(ours)).toEqual(m.responseDeserialize(m.responseSerialize(obj)));
  });

  it('writes negative int32 and multi-byte lengths as protobufjs does', () => {
    const obj = { status: { code: -5, message: 'x'.repeat(300) }, denied_response: { status: { code: 403 }, body: 'é'.repeat(100), headers: [] } };
    const ours = unframe(frameMessage(checkResponseFields(obj)));
    expect(ours.toString('hex')).toBe(m.responseSerialize(obj).toString('hex'));
  });
});
