/**
 * The Envoy side of ext_proc: the one encoder of what Envoy's ext_proc filter sends (as envoy.yaml
 * configures it) and the reader of what it takes back, shared by `keygate dev`'s gateway, the
 * benches and the tests. Never loaded by the sidecar (its side is `./ext-proc.ts`).
 *
 * - `processingRequest`/`exchangeMessages`: the ProcessingRequest messages of an HTTP exchange —
 *   request headers with the ext_authz identity and booking id forwarded as metadata, the request
 *   body (whole), response headers, response body chunks, `observability_mode` when asked.
 * - `immediateOf`/`requestBodyMutation`: what Envoy applies from a ProcessingResponse.
 * - `EnvoyExtProc`: one request metered over HTTP/2 as the dev gateway does it: the request body's
 *   answer is awaited and a body mutation applied, every other answer is read and dropped
 *   (metering never changes a response). Any failure just stops metering that request
 *   (failure_mode_allow).
 *
 * ProcessingRequest fields (envoy/service/ext_proc/v3/external_processor.proto): request_headers 2,
 * response_headers 3, request_body 4, response_body 5, metadata_context 8, observability_mode 10;
 * HttpHeaders {headers 1 (HeaderMap {headers 1: HeaderValue {key 1, raw_value 3}}), end_of_stream 3};
 * HttpBody {body 1, end_of_stream 2}; Metadata {filter_metadata 1: map<string, Struct>}.
 */
import { connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { encodeMessage, frameBytes, Reader, type Field } from '../grpc/codec.ts';
import { PROCESS_PATH } from './services/ext-proc.ts';
import { EXT_AUTHZ_NAMESPACE } from './ext-proc.ts';
import { BOOKING_ID_FIELD } from '../../core/booking-id.ts';

export { PROCESS_PATH };

/** What Envoy forwards as ext_authz metadata (the allow's). */
export interface Identity {
  readonly keyId: string;
  readonly accountId: string;
  readonly model?: string;
  readonly bookingId?: string;
}

/** One message's part of the exchange (ProcessingRequest oneof `request`). */
export type EnvoyPart =
  | { readonly phase: 'request_headers' | 'response_headers'; readonly headers: Readonly<Record<string, string>>; readonly endOfStream: boolean }
  | { readonly phase: 'request_body' | 'response_body'; readonly body: Uint8Array; readonly endOfStream: boolean };

const PART_FIELD = { request_headers: 2, response_headers: 3, request_body: 4, response_body: 5 } as const;

function headerMapField(no: number, headers: Readonly<Record<string, string>>, eos: boolean): Field {
  const map: Field[] = Object.entries(headers).map(([k, v]) => [1, [[1, k], [3, Buffer.from(v)]]]);
  const http: Field[] = [[1, map]];
  if (eos) http.push([3, 1]);
  return [no, http];
}

function bodyField(no: number, body: Uint8Array, eos: boolean): Field {
  const f: Field[] = [];
  if (body.length > 0) f.push([1, body]);
  if (eos) f.push([2, 1]);
  return [no, f];
}

/** The forwarded ext_authz namespace: identity, model and the allow's booking id (`booking_id`). */
function metadataField(identity: Identity): Field {
  const value = (v: string): Field[] => [[3, v]];
  const fields: Field[] = [
    [1, [[1, 'key_id'], [2, value(identity.keyId)]]],
    [1, [[1, 'account_id'], [2, value(identity.accountId)]]],
  ];
  if (identity.model !== undefined) fields.push([1, [[1, 'model'], [2, value(identity.model)]]]);
  if (identity.bookingId !== undefined) fields.push([1, [[1, BOOKING_ID_FIELD], [2, value(identity.bookingId)]]]);
  return [8, [[1, [[1, EXT_AUTHZ_NAMESPACE], [2, fields]]]]];
}

/**
 * What Envoy adds to every message of a stream: the forwarded ext_authz metadata (none without an
 * identity) and `observability_mode`. Made once per stream.
 */
export function forwardedFields(identity: Identity | undefined, observability = false): readonly Field[] {
  const out: Field[] = [];
  if (identity !== undefined) out.push(metadataField(identity));
  if (observability) out.push([10, 1]);
  return out;
}

/** One ProcessingRequest (unframed) with a stream's `forwardedFields`. */
export function processingRequest(part: EnvoyPart, forwarded: readonly Field[]): Buffer {
  const no = PART_FIELD[part.phase];
  const f = 'headers' in part ? headerMapField(no, part.headers, part.endOfStream) : bodyField(no, part.body, part.endOfStream);
  return encodeMessage([f, ...forwarded]);
}

/** One HTTP exchange as Envoy's ext_proc filter meters it. */
export interface EnvoyExchange {
  readonly identity?: Identity;
  readonly requestHeaders: Readonly<Record<string, string>>;
  /**
   * Sent whole (BUFFERED) when given; `unsent`: the request has a body that the route does not
   * send to the processor (its headers then carry no end_of_stream); absent: no request body.
   */
  readonly requestBody?: Uint8Array | 'unsent';
  readonly responseHeaders: Readonly<Record<string, string>>;
  readonly chunks: readonly Uint8Array[];
  /** false: the last chunk carries no end_of_stream (a response cut or held open). */
  readonly complete?: boolean;
  readonly observability?: boolean;
}

/** The ProcessingRequest parts of an exchange, in the order Envoy sends them. */
export function exchangeParts(x: EnvoyExchange): EnvoyPart[] {
  const complete = x.complete !== false;
  const parts: EnvoyPart[] = [{ phase: 'request_headers', headers: x.requestHeaders, endOfStream: x.requestBody === undefined }];
  if (x.requestBody !== undefined && x.requestBody !== 'unsent') parts.push({ phase: 'request_body', body: x.requestBody, endOfStream: true });
  parts.push({ phase: 'response_headers', headers: x.responseHeaders, endOfStream: x.chunks.length === 0 });
  x.chunks.forEach((c, i) => parts.push({ phase: 'response_body', body: c, endOfStream: complete && i === x.chunks.length - 1 }));
  return parts;
}

/** The unframed ProcessingRequest messages of an exchange, in order. */
export function exchangeMessages(x: EnvoyExchange): Buffer[] {
  const forwarded = forwardedFields(x.identity, x.observability);
  return exchangeParts(x).map((p) => processingRequest(p, forwarded));
}

/** The length-delimited field `no` of a message (the last one), or null; malformed bytes throw `WireError`. */
function lenField(b: Buffer, no: number): Buffer | null {
  const r = new Reader(b, 0);
  let found: Buffer | null = null;
  while (r.pos < b.length) {
    const tag = r.u32(b.length);
    if (tag === ((no << 3) | 2)) found = r.bytes(b.length);
    else r.skip(tag & 7, b.length);
  }
  return found;
}

/** What Envoy does with an `immediate_response` (ProcessingResponse field 7): answers the client with it. */
export interface Immediate {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

/** The varint field `no` of a message (the last one), or null. */
function varintField(b: Buffer, no: number): number | null {
  const r = new Reader(b, 0);
  let found: number | null = null;
  while (r.pos < b.length) {
    const tag = r.u32(b.length);
    if (tag === no << 3) found = r.u32(b.length);
    else r.skip(tag & 7, b.length);
  }
  return found;
}

/** ProcessingResponse.immediate_response(7): status(1).code(1), headers(2).set_headers(1).header(1) {key 1, value 2, raw_value 3}, body(3). */
export function immediateOf(resp: Buffer): Immediate | null {
  const ir = lenField(resp, 7);
  if (ir === null) return null;
  const st = lenField(ir, 1);
  const headers: Record<string, string> = {};
  const hm = lenField(ir, 2);
  if (hm !== null) {
    for (const opt of repeated(hm, 1)) {
      const hv = lenField(opt, 1);
      if (hv === null) continue;
      const key = lenField(hv, 1)?.toString('latin1');
      const value = (lenField(hv, 3) ?? lenField(hv, 2))?.toString('latin1');
      if (key !== undefined && value !== undefined) headers[key] = value;
    }
  }
  return { status: (st && varintField(st, 1)) ?? 500, headers, body: lenField(ir, 3) ?? Buffer.alloc(0) };
}

/** Every length-delimited field `no` of a message, in order. */
function repeated(b: Buffer, no: number): Buffer[] {
  const r = new Reader(b, 0);
  const out: Buffer[] = [];
  while (r.pos < b.length) {
    const tag = r.u32(b.length);
    if (tag === ((no << 3) | 2)) out.push(r.bytes(b.length));
    else r.skip(tag & 7, b.length);
  }
  return out;
}

/** ProcessingResponse.request_body(3).response(1).body_mutation(3).body(1), or null. */
export function requestBodyMutation(resp: Buffer): Buffer | null {
  const rb = lenField(resp, 3);
  const common = rb && lenField(rb, 1);
  const mutation = common && lenField(common, 3);
  return mutation ? lenField(mutation, 1) : null;
}

/** One request metered by the sidecar, as Envoy's ext_proc filter would. */
export class EnvoyExtProc {
  readonly #stream: ClientHttp2Stream;
  readonly #answers: Buffer[] = [];
  #pending: Buffer = Buffer.alloc(0);
  #waiter: (() => void) | null = null;
  #failed = false;
  readonly #forwarded: readonly Field[];

  private constructor(stream: ClientHttp2Stream, forwarded: readonly Field[]) {
    this.#stream = stream;
    this.#forwarded = forwarded;
    stream.on('data', (d: Buffer) => this.#data(d));
    const fail = () => {
      this.#failed = true;
      this.#waiter?.();
    };
    stream.on('error', fail);
    stream.on('close', fail);
  }

  /** Opens a Process stream on `session`. */
  static open(session: ClientHttp2Session, identity: Identity): EnvoyExtProc {
    const stream = session.request({ ':method': 'POST', ':path': PROCESS_PATH, 'content-type': 'application/grpc', te: 'trailers' });
    return new EnvoyExtProc(stream, forwardedFields(identity));
  }

  #data(d: Buffer): void {
    this.#pending = this.#pending.length === 0 ? d : Buffer.concat([this.#pending, d]);
    while (this.#pending.length >= 5) {
      const n = this.#pending.readUInt32BE(1);
      if (this.#pending.length < 5 + n) break;
      this.#answers.push(this.#pending.subarray(5, 5 + n));
      this.#pending = this.#pending.subarray(5 + n);
    }
    this.#waiter?.();
  }

  #send(part: EnvoyPart): void {
    if (this.#failed || this.#stream.destroyed) return;
    this.#stream.write(frameBytes(processingRequest(part, this.#forwarded)));
  }

  requestHeaders(headers: Record<string, string>, eos: boolean): void {
    this.#send({ phase: 'request_headers', headers, endOfStream: eos });
  }

  /** Sends the whole request body and waits (at most `timeoutMs`) for its answer: the changed body, an immediate response, or null (unchanged). */
  async requestBody(body: Uint8Array, timeoutMs: number): Promise<Buffer | Immediate | null> {
    const want = this.#answers.length + 2; // the request headers' answer and this one
    this.#send({ phase: 'request_body', body, endOfStream: true });
    const deadline = Date.now() + timeoutMs;
    while (this.#answers.length < want && !this.#failed && Date.now() < deadline) {
      await new Promise<void>((r) => {
        this.#waiter = r;
        setTimeout(r, Math.max(1, deadline - Date.now())).unref();
      });
      this.#waiter = null;
    }
    const a = this.#answers[want - 1];
    return a === undefined ? null : (immediateOf(a) ?? requestBodyMutation(a));
  }

  responseHeaders(headers: Record<string, string>, eos: boolean): void {
    this.#send({ phase: 'response_headers', headers, endOfStream: eos });
  }

  responseBody(chunk: Uint8Array, eos: boolean): void {
    this.#send({ phase: 'response_body', body: chunk, endOfStream: eos });
  }

  /** The response is over (half-close; the sidecar books what it saw). */
  end(): void {
    if (!this.#stream.destroyed) this.#stream.end();
  }
}

/** One HTTP/2 session to the sidecar's gRPC port, reconnected when it goes. */
export function extProcSessions(grpcPort: number): { session(): ClientHttp2Session; close(): void } {
  let s: ClientHttp2Session | null = null;
  return {
    session() {
      if (s === null || s.closed || s.destroyed) {
        s = connect(`http://127.0.0.1:${grpcPort}`);
        s.on('error', () => {});
        s.unref();
      }
      return s;
    },
    close() {
      s?.close();
    },
  };
}
