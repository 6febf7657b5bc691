/**
 * ext_proc's mapping: the protobuf wire codec of Envoy's External Processing messages, the part
 * metering reads (`envoy/service/ext_proc/v3/external_processor.proto`, `envoy/config/core/v3/base.proto`,
 * `google/protobuf/struct.proto`), in the style of the h2 transport's codec: hand-written, only
 * what is used is decoded, everything else skipped by wire type. The meter gets typed messages and
 * gives typed answers (`src/metering/messages.ts`); this module is the seam's protobuf side.
 *
 * Read from a `ProcessingRequest`: which phase (oneof `request`, the last one wins as in proto3),
 * its headers (`HeaderMap`, `raw_value` preferred over `value`), body bytes (a view of the message,
 * not a copy) and `end_of_stream`; `metadata_context.filter_metadata["envoy.filters.http.ext_authz"]`
 * string fields `key_id`, `account_id`, `model`, `booking_id` (or `x-keygate-booking-id`); and `observability_mode`. Anything malformed throws
 * `WireError` and nothing else (proven with hostile bytes in test/unit/metering-codec.test.ts).
 *
 * Written (`encodeAnswer`): a `ProcessingResponse` answering one phase with an empty `HeadersResponse`,
 * `BodyResponse` or `TrailersResponse` (constant bytes), a `request_body` answer whose
 * `CommonResponse.body_mutation.body` replaces the request body, or an `immediate_response`.
 */
import { encodeMessage, Reader, WireError, type Field } from '../grpc/codec.ts';
import { BOOKING_ID_FIELD, BOOKING_ID_HEADER } from '../../core/booking-id.ts';
import { ANSWER_PHASES, type AuthzMetadata, type MeterAnswer, type Phase, type ProcessingRequest } from '../../metering/messages.ts';

export { WireError };

/** The ext_authz filter's namespace in Envoy's dynamic metadata, forwarded to the processor. */
export const EXT_AUTHZ_NAMESPACE = 'envoy.filters.http.ext_authz';

export type { AuthzMetadata, Phase, ProcessingRequest };

/** ProcessingRequest oneof field number → phase (2..7); ProcessingResponse numbers are one less. */
const PHASES: readonly (Phase | null)[] = [null, null, ...ANSWER_PHASES];

const VARINT = 0;
const LEN = 2;

function headerValue(r: Reader, end: number, out: string[]): void {
  let key = '';
  let value = '';
  let raw: string | null = null;
  while (r.pos < end) {
    const tag = r.u32(end);
    const f = tag >>> 3;
    const w = tag & 7;
    if (w === LEN && f === 1) key = r.str(end);
    else if (w === LEN && f === 2) value = r.str(end);
    else if (w === LEN && f === 3) {
      const n = r.len(end);
      // header bytes are latin1 on the wire (HTTP/1 obs-text); the names keygate reads are ASCII
      raw = r.buf.toString('latin1', r.pos, r.pos + n);
      r.pos += n;
    } else r.skip(w, end);
  }
  out.push(key.toLowerCase(), raw ?? value);
}

/**
 * Each field 1 (a LEN submessage) of the message in r.pos..end handed to `read` with its end; every
 * other field skipped. The shape of a repeated field 1 (HeaderMap.headers) and of a map field 1
 * (Struct.fields, Metadata.filter_metadata: each entry a message { key = 1; value = 2; }).
 */
function eachField1<T>(r: Reader, end: number, into: T, read: (r: Reader, stop: number, into: T) => void): void {
  while (r.pos < end) {
    const tag = r.u32(end);
    if (tag === ((1 << 3) | LEN)) {
      const n = r.len(end);
      read(r, r.pos + n, into);
    } else r.skip(tag & 7, end);
  }
}

/** HeaderMap { repeated HeaderValue headers = 1; } */
function headerMap(r: Reader, end: number, out: string[]): void {
  eachField1(r, end, out, headerValue);
}

/** HttpHeaders { HeaderMap headers = 1; bool end_of_stream = 3; } */
function httpHeaders(r: Reader, end: number, req: ProcessingRequest): void {
  const out: string[] = [];
  let eos = false;
  while (r.pos < end) {
    const tag = r.u32(end);
    if (tag === ((1 << 3) | LEN)) {
      const n = r.len(end);
      headerMap(r, r.pos + n, out);
    } else if (tag === ((3 << 3) | VARINT)) eos = r.long(end) !== 0;
    else r.skip(tag & 7, end);
  }
  req.headers = out;
  req.body = null;
  req.endOfStream = eos;
}

/** HttpBody { bytes body = 1; bool end_of_stream = 2; } */
function httpBody(r: Reader, end: number, req: ProcessingRequest): void {
  let body: Buffer = EMPTY;
  let eos = false;
  while (r.pos < end) {
    const tag = r.u32(end);
    if (tag === ((1 << 3) | LEN)) body = r.bytes(end);
    else if (tag === ((2 << 3) | VARINT)) eos = r.long(end) !== 0;
    else r.skip(tag & 7, end);
  }
  req.headers = null;
  req.body = body;
  req.endOfStream = eos;
}

/** HttpTrailers { HeaderMap trailers = 1; } */
function httpTrailers(r: Reader, end: number, req: ProcessingRequest): void {
  const out: string[] = [];
  eachField1(r, end, out, headerMap);
  req.headers = out;
  req.body = null;
  req.endOfStream = true;
}

/** google.protobuf.Value → its string_value (3), or null for any other kind (last oneof wins). */
function stringValue(r: Reader, end: number): string | null {
  let s: string | null = null;
  while (r.pos < end) {
    const tag = r.u32(end);
    const f = tag >>> 3;
    if (f === 3 && (tag & 7) === LEN) s = r.str(end);
    else {
      if (f >= 1 && f <= 6) s = null; // another kind of the oneof replaces the string
      r.skip(tag & 7, end);
    }
  }
  return s;
}

const META_FIELD_MAX = 256;

/** One Struct.fields entry { string key = 1; Value value = 2; }: an identity field's string value. */
function authzField(r: Reader, stop: number, meta: AuthzMetadata): void {
  let key = '';
  let value: string | null = null;
  while (r.pos < stop) {
    const t = r.u32(stop);
    if (t === ((1 << 3) | LEN)) key = r.str(stop);
    else if (t === ((2 << 3) | LEN)) {
      const m = r.len(stop);
      value = stringValue(r, r.pos + m);
    } else r.skip(t & 7, stop);
  }
  if (value !== null && (value.length === 0 || value.length > META_FIELD_MAX)) value = null; // empty: no identity
  if (key === 'key_id') meta.keyId = value ?? undefined;
  else if (key === 'account_id') meta.accountId = value ?? undefined;
  else if (key === 'model') meta.model = value ?? undefined;
  else if (key === BOOKING_ID_FIELD || key === BOOKING_ID_HEADER) meta.bookingId = value ?? undefined;
}

/**
 * The ext_authz filter's namespace: `envoy.filters.http.ext_authz`, or a named instance of it
 * (`envoy.filters.http.ext_authz/…`: Envoy Gateway names each SecurityPolicy's filter
 * `envoy.filters.http.ext_authz/securitypolicy/<namespace>/<name>`). Namespaces are the proxy's
 * configuration, never a client's.
 */
function isAuthzNamespace(ns: string): boolean {
  return ns === EXT_AUTHZ_NAMESPACE || ns.startsWith(`${EXT_AUTHZ_NAMESPACE}/`);
}

/** One Metadata.filter_metadata entry { string key = 1; Struct value = 2; }: the ext_authz namespace's fields. */
function filterMetadata(r: Reader, stop: number, req: ProcessingRequest): void {
  let isAuthz = false;
  let structStart = -1;
  let structEnd = -1;
  while (r.pos < stop) {
    const t = r.u32(stop);
    if (t === ((1 << 3) | LEN)) isAuthz = isAuthzNamespace(r.str(stop));
    else if (t === ((2 << 3) | LEN)) {
      const m = r.len(stop);
      structStart = r.pos;
      structEnd = r.pos + m;
      r.pos += m;
    } else r.skip(t & 7, stop);
  }
  if (!isAuthz) return;
  // a map entry is one value: a later entry for the namespace replaces an earlier one
  const meta: AuthzMetadata = {};
  if (structStart >= 0) {
    const save = r.pos;
    r.pos = structStart;
    eachField1(r, structEnd, meta, authzField); // Struct { map<string, Value> fields = 1; }
    r.pos = save;
  }
  req.metadata = meta;
}

const EMPTY = Buffer.alloc(0);

/**
 * Decodes one ProcessingRequest (unframed message bytes). Throws only `WireError`. With
 * `metadata: false` the metadata context is skipped undecoded (a session that already has it:
 * Envoy forwards the same metadata with every message).
 */
export function decodeProcessingRequest(buf: Buffer, opts: { metadata?: boolean } = {}): ProcessingRequest {
  const wantMetadata = opts.metadata ?? true;
  const req: ProcessingRequest = { phase: null, headers: null, body: null, endOfStream: false, metadata: null, observabilityMode: false };
  const r = new Reader(buf, 0);
  const end = buf.length;
  try {
    while (r.pos < end) {
      const tag = r.u32(end);
      const f = tag >>> 3;
      const w = tag & 7;
      if (w === LEN && f >= 2 && f <= 7) {
        const n = r.len(end);
        const stop = r.pos + n;
        req.phase = PHASES[f]!;
        if (f <= 3) httpHeaders(r, stop, req);
        else if (f <= 5) httpBody(r, stop, req);
        else httpTrailers(r, stop, req);
      } else if (w === LEN && f === 8 && wantMetadata) {
        const n = r.len(end);
        eachField1(r, r.pos + n, req, filterMetadata); // Metadata { map<string, Struct> filter_metadata = 1; }
      } else if (w === VARINT && f === 10) {
        req.observabilityMode = r.long(end) !== 0;
      } else r.skip(w, end);
    }
  } catch (e) {
    if (e instanceof WireError) throw e;
    throw new WireError(e instanceof Error ? e.message : 'undecodable message'); // never expected: bounds are checked
  }
  return req;
}

// ---------------------------------------------------------------- writing

/** ProcessingResponse oneof field number of each phase's answer. */
const ANSWER_FIELD: Readonly<Record<Phase, number>> = {
  request_headers: 1,
  response_headers: 2,
  request_body: 3,
  response_body: 4,
  request_trailers: 5,
  response_trailers: 6,
};

const CONTINUE: Readonly<Record<Phase, Buffer>> = Object.freeze(
  Object.fromEntries(
    (Object.keys(ANSWER_FIELD) as Phase[]).map((p) => [p, encodeMessage([[ANSWER_FIELD[p], []]])]),
  ) as Record<Phase, Buffer>,
);

/**
 * The answer to one phase that changes nothing: a ProcessingResponse with the phase's empty
 * HeadersResponse/BodyResponse/TrailersResponse (unframed, shared constant bytes: do not modify).
 */
export function continueResponse(phase: Phase): Buffer {
  return CONTINUE[phase];
}

/**
 * A `request_body` answer replacing the request body: ProcessingResponse { request_body:
 * BodyResponse { response: CommonResponse { body_mutation: BodyMutation { body } } } } (unframed).
 * With `removeContentLength`, the CommonResponse also removes `content-length` (for Envoy
 * configurations that forward the original length with a changed body).
 */
export function replaceRequestBodyResponse(body: Uint8Array, removeContentLength = false): Buffer {
  const common: Field[] = [];
  if (removeContentLength) common.push([2, [[2, 'content-length']]]);
  common.push([3, [[1, body]]]);
  return encodeMessage([[3, [[1, common]]]]);
}

/**
 * An `immediate_response` answer (ProcessingResponse field 7): Envoy answers the client with it and
 * sends nothing upstream. ImmediateResponse { HttpStatus status = 1 { code = 1 }; HeaderMutation
 * headers = 2 { repeated HeaderValueOption set_headers = 1 { HeaderValue header = 1 { key = 1;
 * raw_value = 3 } } }; bytes body = 3; string details = 5 }. Needs the filter's
 * `disable_immediate_response: false` (envoy.yaml).
 */
export function immediateResponse(status: number, headers: ReadonlyArray<readonly [string, string]>, body: string, details: string): Buffer {
  const set: Field[] = headers.map(([k, v]) => [1, [[1, [[1, k], [3, Buffer.from(v, 'latin1')]]]]]);
  return encodeMessage([[7, [[1, [[1, status]]], [2, set], [3, Buffer.from(body, 'utf8')], [5, details]]]]);
}

/** A meter's answer as ProcessingResponse bytes (unframed; a `continue` is the phase's shared constant bytes). */
export function encodeAnswer(a: MeterAnswer): Buffer {
  if (a.kind === 'continue') return CONTINUE[a.phase];
  if (a.kind === 'replace-request-body') return replaceRequestBodyResponse(a.body, a.removeContentLength);
  return immediateResponse(a.status, a.headers, a.body, a.details);
}

export { ANSWER_PHASES };
