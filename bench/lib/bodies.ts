/**
 * Envoy-shaped CheckRequest bodies for the load generators, encoded with Envoy's own protos
 * (`proto/envoy-protos.ts`) and framed for gRPC (1 byte compressed flag, 4 bytes length).
 * Keys are spliced into a prebuilt frame at a fixed offset, so a load generator can send a
 * different key per request without encoding protobuf on its hot path.
 */
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { authorizationService } from '../../proto/envoy-protos.ts';
import { BASE62, base62Fixed, CHECKSUM_CHARS, RANDOM_CHARS } from '../../src/core/key-format.ts';
import { frameBytes } from '../../src/transport/grpc/codec.ts';

export const CHECK_PATH = '/envoy.service.auth.v3.Authorization/Check';

interface MethodDef {
  requestSerialize(v: object): Buffer;
  requestDeserialize(b: Buffer): any;
  responseSerialize(v: object): Buffer;
  responseDeserialize(b: Buffer): any;
}

export function checkMethod(): MethodDef {
  return (authorizationService().service as unknown as Record<string, MethodDef>).Check!;
}

export interface BenchRequest {
  /** The key, sent as `authorization: Bearer <key>`; omitted when undefined. */
  key?: string;
  path?: string;
  body?: Buffer;
  requestId?: string;
  /** Extra request headers (e.g. a `traceparent` as Envoy forwards it). */
  headers?: Record<string, string>;
}

/**
 * What Envoy sends for an OpenAI chat request: the pseudo-headers and the headers a client SDK and
 * Envoy itself add (lower-case, as Envoy sends them), source/destination, time, and the body when
 * `with_request_body` is set.
 */
export function envoyCheckRequest(r: BenchRequest): object {
  const path = r.path ?? '/v1/chat/completions';
  const headers: Record<string, string> = {
    ':authority': 'gateway.example.com',
    ':method': 'POST',
    ':path': path,
    ':scheme': 'https',
    accept: 'application/json',
    'accept-encoding': 'gzip, deflate',
    'content-type': 'application/json',
    'user-agent': 'OpenAI/JS 5.12.0',
    'x-stainless-lang': 'js',
    'x-stainless-package-version': '5.12.0',
    'x-stainless-os': 'Linux',
    'x-stainless-runtime': 'node',
    'x-forwarded-proto': 'https',
    'x-request-id': r.requestId ?? '3f0c1b9e-6a51-4a0e-9d55-0c9f2a1e7b42',
    'x-envoy-expected-rq-timeout-ms': '600000',
  };
  if (r.key !== undefined) headers.authorization = `Bearer ${r.key}`;
  Object.assign(headers, r.headers);
  const http: Record<string, unknown> = {
    id: '14183205532386574592',
    method: 'POST',
    headers,
    path,
    host: 'gateway.example.com',
    scheme: 'https',
    protocol: 'HTTP/1.1',
  };
  if (r.body !== undefined) {
    headers['content-length'] = String(r.body.length);
    http.size = String(r.body.length);
    http.raw_body = r.body;
  }
  return {
    attributes: {
      source: { address: { socket_address: { address: '10.1.2.3', port_value: 51234 } } },
      destination: { address: { socket_address: { address: '10.1.0.7', port_value: 8443 } } },
      request: { time: { seconds: String(Math.floor(Date.now() / 1000)), nanos: 1234 }, http },
      context_extensions: { protocol: 'openai' },
    },
  };
}

/** A gRPC length-prefixed message (uncompressed): the sidecar's own framing. */
export const grpcFrame: (msg: Uint8Array) => Buffer = frameBytes;

/** The messages in a gRPC response body (unframed); throws on a truncated frame. */
export function grpcUnframe(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    if (at + 5 > body.length) throw new Error('truncated gRPC frame header');
    const len = body.readUInt32BE(at + 1);
    if (at + 5 + len > body.length) throw new Error('truncated gRPC message');
    out.push(body.subarray(at + 5, at + 5 + len));
    at += 5 + len;
  }
  return out;
}

export function encodeCheck(r: BenchRequest): Buffer {
  return grpcFrame(checkMethod().requestSerialize(envoyCheckRequest(r)));
}

export function decodeCheckResponse(framed: Buffer): any {
  const [msg] = grpcUnframe(framed);
  if (!msg) throw new Error('empty gRPC response body');
  return checkMethod().responseDeserialize(msg);
}

/**
 * A frame with a key slot: the encoded request for a placeholder key of the right length, and the
 * offset where a real key of the same length is written.
 */
export interface KeyTemplate {
  readonly frame: Buffer;
  readonly offset: number;
  readonly keyLength: number;
}

export function keyTemplate(prefix: string, r: Omit<BenchRequest, 'key'> = {}): KeyTemplate {
  const keyLength = prefix.length + RANDOM_CHARS + CHECKSUM_CHARS;
  const placeholder = prefix + 'Z'.repeat(keyLength - prefix.length);
  const frame = encodeCheck({ ...r, key: placeholder });
  const offset = frame.indexOf(`Bearer ${placeholder}`, 0, 'latin1') + 7;
  if (offset < 7 || frame.indexOf(placeholder, offset + 1, 'latin1') !== -1) throw new Error('key slot not unique in template');
  return { frame, offset, keyLength };
}

export function withKey(t: KeyTemplate, key: string): Buffer {
  if (key.length !== t.keyLength) throw new Error(`key length ${key.length} != template ${t.keyLength}`);
  const out = Buffer.from(t.frame);
  out.write(key, t.offset, 'latin1');
  return out;
}

/**
 * Well-formed keys in the deployment format, fast (the console's `generateKey` draws each character
 * from the CSPRNG separately; the bench needs a million). Base62 by rejection sampling of random bytes.
 */
export function fastKeys(prefix: string, n: number): string[] {
  const out: string[] = new Array(n);
  let pool = randomBytes(65536);
  let at = 0;
  for (let i = 0; i < n; i++) {
    let body = prefix;
    while (body.length < prefix.length + RANDOM_CHARS) {
      if (at >= pool.length) {
        pool = randomBytes(65536);
        at = 0;
      }
      const b = pool[at++]!;
      if (b < 248) body += BASE62[b % 62];
    }
    out[i] = body + base62Fixed(crc32(body) >>> 0, CHECKSUM_CHARS);
  }
  return out;
}

/** A key whose checksum is wrong: refused before any store lookup. */
export function malformedKey(valid: string): string {
  const last = valid.at(-1)!;
  return valid.slice(0, -1) + (last === 'A' ? 'B' : 'A');
}

/** A chat body of about `size` bytes, with `model` as the first or the last top-level member. */
export function chatBody(size: number, model: string, where: 'first' | 'last'): Buffer {
  const head = where === 'first' ? `{"model":${JSON.stringify(model)},"messages":[{"role":"user","content":"` : '{"messages":[{"role":"user","content":"';
  const tail = where === 'first' ? '"}],"stream":false}' : `"}],"stream":false,"model":${JSON.stringify(model)}}`;
  const fill = Math.max(0, size - head.length - tail.length);
  return Buffer.from(head + 'lorem ipsum '.repeat(Math.ceil(fill / 12)).slice(0, fill) + tail);
}
