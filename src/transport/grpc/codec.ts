/**
 * Protobuf wire codec for exactly the messages the h2 server serves, following the field numbers
 * of Envoy's protos (`envoy/service/auth/v3/{external_auth,attribute_context}.proto`,
 * `envoy/config/core/v3/base.proto`, `google/protobuf/struct.proto`) and `grpc/health/v1/health.proto`.
 *
 * Decoding reads only what keygate uses (the request's id, method, path, size, headers, body and the
 * route's context extensions) and skips everything else by wire type, so a CheckRequest costs what
 * keygate reads, not what Envoy sends (peer addresses, TLS session, metadata). Proto3 semantics:
 * last value wins for scalars and map keys, repeated embedded messages merge. Anything malformed
 * throws `WireError` (the transport answers INTERNAL, as grpc-js does for an undecodable message).
 *
 * Proven against the upstream protos in `test/h2-codec.test.ts` (encode with protobufjs from
 * the real .proto files, decode here, and the reverse, including random messages).
 */
import { isUtf8 } from 'node:buffer';
import type { CheckRequestMsg, CheckResponse, HeaderValueOption, MetadataValue } from '../envoy/check.ts';

export class WireError extends Error {
  override name = 'WireError';
}

// ---------------------------------------------------------------- reading

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

export class Reader {
  readonly buf: Buffer;
  pos: number;
  constructor(buf: Buffer, pos: number) {
    this.buf = buf;
    this.pos = pos;
  }

  /** A varint's low 32 bits, unsigned (tags, enums; a negative int32 takes 10 bytes on the wire). */
  u32(end: number): number {
    const b = this.buf;
    // one byte (every tag keygate reads, most lengths): the loop's first turn, without the loop
    if (this.pos < end && b[this.pos]! < 0x80) return b[this.pos++]!;
    let x = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= end) throw new WireError('truncated varint');
      const c = b[this.pos++]!;
      if (i < 4) x |= (c & 0x7f) << (7 * i);
      else if (i === 4) x |= (c & 0x0f) << 28;
      if (c < 0x80) return x >>> 0;
    }
    throw new WireError('varint longer than 10 bytes');
  }

  /** A varint as a signed int64, in a double (exact up to 2^53). */
  long(end: number): number {
    const b = this.buf;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= end) throw new WireError('truncated varint');
      const c = b[this.pos++]!;
      if (i < 4) lo |= (c & 0x7f) << (7 * i);
      else if (i === 4) {
        lo |= (c & 0x0f) << 28;
        hi |= (c & 0x7f) >> 4;
      } else hi |= (c & 0x7f) << (7 * i - 32);
      if (c < 0x80) return toInt64(lo, hi);
    }
    throw new WireError('varint longer than 10 bytes');
  }

  len(end: number): number {
    const n = this.pos < end && this.buf[this.pos]! < 0x80 ? this.buf[this.pos++]! : this.long(end);
    if (n < 0 || n > end - this.pos) throw new WireError('length past the end');
    return n;
  }

  skip(wire: number, end: number): void {
    switch (wire) {
      case VARINT:
        this.long(end);
        return;
      case I64:
        if (end - this.pos < 8) throw new WireError('truncated fixed64');
        this.pos += 8;
        return;
      case LEN: {
        const n = this.len(end); // before reading pos: len() advances it
        this.pos += n;
        return;
      }
      case I32:
        if (end - this.pos < 4) throw new WireError('truncated fixed32');
        this.pos += 4;
        return;
      default:
        throw new WireError(`unsupported wire type ${wire}`);
    }
  }

  str(end: number): string {
    const n = this.len(end);
    const s = this.buf.toString('utf8', this.pos, this.pos + n);
    this.pos += n;
    return s;
  }

  bytes(end: number): Buffer {
    const n = this.len(end);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

function toInt64(lo: number, hi: number): number {
  if (hi & 0x80000000) {
    // two's complement negative
    const nlo = ~lo >>> 0;
    const nhi = ~hi >>> 0;
    return -(nhi * 2 ** 32 + nlo + 1);
  }
  return (hi >>> 0) * 2 ** 32 + (lo >>> 0);
}

type HttpMsg = NonNullable<NonNullable<NonNullable<CheckRequestMsg['attributes']>['request']>['http']>;
type Attributes = NonNullable<CheckRequestMsg['attributes']>;

/** Reads a map<string,string> entry into `into` (last key wins, as in protobuf). */
function mapEntry(r: Reader, end: number, into: Record<string, string>): void {
  let key = '';
  let value = '';
  while (r.pos < end) {
    const tag = r.u32(end);
    const f = tag >>> 3;
    const w = tag & 7;
    if (f === 1 && w === LEN) key = r.str(end);
    else if (f === 2 && w === LEN) value = r.str(end);
    else r.skip(w, end);
  }
  into[key] = value;
}

/** A headers map entry's key and value byte ranges, undecoded (last key/value wins, as in mapEntry). */
function mapEntrySlot(r: Reader, end: number, slots: number[]): void {
  let ks = 0;
  let ke = 0;
  let vs = 0;
  let ve = 0;
  while (r.pos < end) {
    const tag = r.u32(end);
    const f = tag >>> 3;
    const w = tag & 7;
    if ((f === 1 || f === 2) && w === LEN) {
      const n = r.len(end);
      if (f === 1) {
        ks = r.pos;
        ke = r.pos + n;
      } else {
        vs = r.pos;
        ve = r.pos + n;
      }
      r.pos += n;
    } else r.skip(w, end);
  }
  slots.push(ks, ke, vs, ve);
}

/** Header lookup over undecoded map entries: only the value asked for is decoded. */
function slotLookup(buf: Buffer, slots: number[]): (name: string) => string | undefined {
  return (name) => {
    // names are compared as UTF-8 bytes, like the decoded map's keys
    let ascii = true;
    for (let j = 0; j < name.length; j++) if (name.charCodeAt(j) > 0x7f) ascii = false;
    const bytes = ascii ? undefined : Buffer.from(name, 'utf8');
    const len = bytes ? bytes.length : name.length;
    let found = -1;
    for (let i = 0; i < slots.length; i += 4) {
      const ks = slots[i]!;
      if (slots[i + 1]! - ks !== len) continue;
      let j = 0;
      if (bytes) while (j < len && buf[ks + j] === bytes[j]) j++;
      else while (j < len && buf[ks + j] === name.charCodeAt(j)) j++;
      if (j === len) found = i; // a later entry with the same key wins
    }
    return found === -1 ? undefined : buf.toString('utf8', slots[found + 2]!, slots[found + 3]!);
  };
}

function headerValue(r: Reader, end: number): { key?: string; value?: string; raw_value?: Buffer } {
  const h: { key?: string; value?: string; raw_value?: Buffer } = {};
  while (r.pos < end) {
    const tag = r.u32(end);
    const f = tag >>> 3;
    const w = tag & 7;
    if (f === 1 && w === LEN) h.key = r.str(end);
    else if (f === 2 && w === LEN) h.value = r.str(end);
    else if (f === 3 && w === LEN) h.raw_value = r.bytes(end);
    else r.skip(w, end);
  }
  return h;
}

function httpRequest(r: Reader, end: number, http: HttpMsg, slots: number[] | undefined): void {
  while (r.pos < end) {
    const tag = r.u32(end);
    const f = tag >>> 3;
    const w = tag & 7;
    if (w === LEN) {
      switch (f) {
        case 1:
          http.id = r.str(end);
          continue;
        case 2:
          http.method = r.str(end);
          continue;
        case 3: {
          const n = r.len(end);
          if (slots) mapEntrySlot(r, r.pos + n, slots);
          else mapEntry(r, r.pos + n, (http.headers ??= Object.create(null) as Record<string, string>));
          continue;
        }
        case 4:
          http.path = r.str(end);
          continue;
        case 11:
          if (slots) {
            // lazy mode: a valid UTF-8 body stays a view of the message (decoding it to a string and
            // re-encoding it for the scanner costs two passes and a heap copy the size of the body)
            const n = r.len(end);
            const view = r.buf.subarray(r.pos, r.pos + n);
            if (isUtf8(view)) {
              r.pos += n;
              http.body = undefined;
              http.body_utf8 = view;
            } else {
              http.body = view.toString('utf8');
              http.body_utf8 = undefined;
              r.pos += n;
            }
          } else http.body = r.str(end);
          continue;
        case 12:
          http.raw_body = r.bytes(end);
          continue;
        case 13: {
          const n = r.len(end);
          const stop = r.pos + n;
          const list = ((http.header_map ??= {}).headers ??= []);
          while (r.pos < stop) {
            const t = r.u32(stop);
            if (t >>> 3 === 1 && (t & 7) === LEN) {
              const m = r.len(stop);
              list.push(headerValue(r, r.pos + m));
            } else r.skip(t & 7, stop);
          }
          continue;
        }
      }
    } else if (f === 9 && w === VARINT) {
      http.size = r.long(end);
      continue;
    }
    r.skip(w, end);
  }
}

function request(r: Reader, end: number, attrs: Attributes, slots: number[] | undefined): void {
  while (r.pos < end) {
    const tag = r.u32(end);
    if (tag === ((2 << 3) | LEN)) {
      const n = r.len(end);
      httpRequest(r, r.pos + n, ((attrs.request ??= {}).http ??= {}), slots);
    } else r.skip(tag & 7, end);
  }
}

function attributes(r: Reader, end: number, attrs: Attributes, slots: number[] | undefined): void {
  while (r.pos < end) {
    const tag = r.u32(end);
    const f = tag >>> 3;
    const w = tag & 7;
    if (w === LEN && f === 4) {
      const n = r.len(end);
      const stop = r.pos + n;
      attrs.request ??= {};
      request(r, stop, attrs, slots);
    } else if (w === LEN && f === 10) {
      const n = r.len(end);
      mapEntry(r, r.pos + n, (attrs.context_extensions ??= Object.create(null) as Record<string, string>));
    } else r.skip(w, end);
  }
}

/**
 * A CheckRequest, in the shape `checkInputFromEnvoy` reads (proto field names). With `lazyHeaders`
 * the `headers` map is not decoded: `http.lookup` reads a header from the encoded entries when asked
 * (the hot path asks for five or six of Envoy's dozens), with the map's semantics (exact key, the
 * last entry wins); and a `body` that is valid UTF-8 is handed on as `body_utf8`, a view of its
 * bytes in the message, instead of a string (the same text: valid UTF-8 decodes and re-encodes to
 * itself); an invalid one is decoded as before. The message buffer must then stay unmodified while
 * the lookup and the body are used.
 */
export function decodeCheckRequest(buf: Buffer, opts: { lazyHeaders?: boolean } = {}): CheckRequestMsg {
  const r = new Reader(buf, 0);
  const end = buf.length;
  const out: CheckRequestMsg = {};
  const slots = opts.lazyHeaders ? [] : undefined;
  while (r.pos < end) {
    const tag = r.u32(end);
    if (tag === ((1 << 3) | LEN)) {
      const n = r.len(end);
      attributes(r, r.pos + n, (out.attributes ??= {}), slots);
    } else r.skip(tag & 7, end);
  }
  if (slots && slots.length > 0) {
    // a non-empty map wins over header_map, as in checkInputFromEnvoy
    ((out.attributes ??= {}).request ??= {}).http ??= {};
    out.attributes.request.http.lookup = slotLookup(buf, slots);
  }
  return out;
}

/** grpc.health.v1.HealthCheckRequest → its `service`. */
export function decodeHealthRequest(buf: Buffer): string {
  const r = new Reader(buf, 0);
  let service = '';
  while (r.pos < buf.length) {
    const tag = r.u32(buf.length);
    if (tag === ((1 << 3) | LEN)) service = r.str(buf.length);
    else r.skip(tag & 7, buf.length);
  }
  return service;
}

// ---------------------------------------------------------------- writing

/**
 * A message to write: fields in order as [number, value]. A string or bytes is length-delimited,
 * a number is a varint (int32/enum; negative numbers take 10 bytes), a nested array is an embedded
 * message (written even when empty: presence matters for wrappers such as BoolValue).
 */
export type Field = readonly [number, string | Uint8Array | number | F64 | readonly Field[]];

/** A `double` field's value (wire type I64, little-endian IEEE 754): google.protobuf.Value's `number_value`. */
export class F64 {
  readonly value: number;
  constructor(value: number) {
    this.value = value;
  }
}

function varintSize(n: number): number {
  if (n < 0) return 10;
  let s = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    s++;
  }
  return s;
}

function payloadSize(v: Field[1], sizes: number[]): number {
  if (typeof v === 'string') return Buffer.byteLength(v);
  if (typeof v === 'number') return varintSize(v);
  if (v instanceof Uint8Array) return v.length;
  if (v instanceof F64) return 8;
  return messageSize(v as readonly Field[], sizes);
}

/**
 * The encoded size of a message. The size of each message, embedded ones included, is kept in
 * `sizes` in the order the writer meets them (a slot taken before its fields are measured), so the
 * writer reads each one instead of measuring the subtree again at every level of nesting.
 */
function messageSize(fields: readonly Field[], sizes: number[]): number {
  const slot = sizes.length;
  sizes.push(0);
  let n = 0;
  for (let i = 0; i < fields.length; i++) {
    const [no, v] = fields[i]!;
    const p = payloadSize(v, sizes);
    n += varintSize(no << 3) + (typeof v === 'number' || v instanceof F64 ? p : varintSize(p) + p);
  }
  sizes[slot] = n;
  return n;
}

/** Sizes of one `frameMessage`'s messages (reused; emptied after each). */
const SIZES: number[] = [];

class Writer {
  readonly buf: Buffer;
  pos: number;
  readonly sizes: readonly number[];
  /** The next embedded message's slot in `sizes` (slot 0 is the outer message's). */
  next = 1;
  constructor(buf: Buffer, pos: number, sizes: readonly number[]) {
    this.buf = buf;
    this.pos = pos;
    this.sizes = sizes;
  }
  varint(n: number): void {
    if (n < 0) {
      // int32 negative: sign-extended to 64 bits
      let lo = n >>> 0;
      for (let i = 0; i < 4; i++) {
        this.buf[this.pos++] = (lo & 0x7f) | 0x80;
        lo >>>= 7;
      }
      this.buf[this.pos++] = (lo & 0x0f) | 0x70 | 0x80;
      for (let i = 0; i < 4; i++) this.buf[this.pos++] = 0xff;
      this.buf[this.pos++] = 0x01;
      return;
    }
    while (n >= 0x80) {
      this.buf[this.pos++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 128);
    }
    this.buf[this.pos++] = n;
  }
  message(fields: readonly Field[]): void {
    for (let i = 0; i < fields.length; i++) {
      const [no, v] = fields[i]!;
      if (typeof v === 'number') {
        this.varint((no << 3) | VARINT);
        this.varint(v);
      } else if (typeof v === 'string') {
        this.varint((no << 3) | LEN);
        const n = Buffer.byteLength(v);
        this.varint(n);
        this.pos += this.buf.write(v, this.pos, n, 'utf8');
      } else if (v instanceof Uint8Array) {
        this.varint((no << 3) | LEN);
        this.varint(v.length);
        this.buf.set(v, this.pos);
        this.pos += v.length;
      } else if (v instanceof F64) {
        this.varint((no << 3) | I64);
        this.buf.writeDoubleLE(v.value, this.pos);
        this.pos += 8;
      } else {
        this.varint((no << 3) | LEN);
        this.varint(this.sizes[this.next++]!);
        this.message(v as readonly Field[]);
      }
    }
  }
}

/** The message, gRPC-framed (flag byte, 4-byte length, message) in one buffer. */
export function frameMessage(fields: readonly Field[]): Buffer {
  const sizes = SIZES;
  try {
    const n = messageSize(fields, sizes);
    const out = Buffer.allocUnsafe(5 + n);
    out[0] = 0;
    out.writeUInt32BE(n, 1);
    const w = new Writer(out, 5, sizes);
    w.message(fields);
    if (w.pos !== out.length) throw new Error(`protobuf size mismatch: ${w.pos} != ${out.length}`);
    return out;
  } finally {
    sizes.length = 0;
  }
}

/** Encoded message bytes gRPC-framed (flag byte 0: not compressed, 4-byte length) in a new buffer. */
export function frameBytes(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** The message's bytes without the gRPC frame (a part kept to assemble answers from). */
export function encodeMessage(fields: readonly Field[]): Buffer {
  const framed = frameMessage(fields);
  return framed.subarray(5);
}

type HeaderOptionList = readonly HeaderValueOption[];

/** HeaderValueOption fields (`fieldNo`: 2 headers, 6 response_headers_to_add of OkHttpResponse). */
export function headerOptions(list: HeaderOptionList | undefined, fieldNo = 2): Field[] {
  const out: Field[] = [];
  for (const h of list ?? []) {
    const opt: Field[] = [[1, [[1, h.header.key], [2, h.header.value]]]];
    if (h.append) opt.push([2, [[1, h.append.value ? 1 : 0]]]);
    out.push([fieldNo, opt]);
  }
  return out;
}

/**
 * CheckResponse fields. Like protobufjs (the grpc-js transport's encoder), every value that is set is
 * written, zeros included (`status.code: 0`, `append.value: false`): the same bytes on the wire.
 */
export function checkResponseFields(res: CheckResponse): Field[] {
  const out: Field[] = [];
  if (res.status) {
    const st: Field[] = [];
    if (res.status.code !== undefined) st.push([1, res.status.code]);
    if (res.status.message !== undefined) st.push([2, res.status.message]);
    out.push([1, st]);
  }
  if (res.denied_response) {
    const d = res.denied_response;
    const f: Field[] = [];
    if (d.status) f.push([1, d.status.code !== undefined ? [[1, d.status.code]] : []]);
    f.push(...headerOptions(d.headers));
    if (d.body !== undefined) f.push([3, d.body]);
    out.push([2, f]);
  }
  if (res.ok_response) {
    const o = res.ok_response;
    const f: Field[] = headerOptions(o.headers);
    for (const name of o.headers_to_remove ?? []) f.push([5, name]);
    f.push(...headerOptions(o.response_headers_to_add, 6));
    out.push([3, f]);
  }
  if (res.dynamic_metadata) out.push([4, structFields(res.dynamic_metadata.fields)]);
  return out;
}

/** google.protobuf.Struct: map<string, Value> fields = 1 (Value: number 2, string 3, struct 5). */
function structFields(fields: Readonly<Record<string, MetadataValue>> | undefined): Field[] {
  const entries: Field[] = [];
  for (const [k, v] of Object.entries(fields ?? {})) {
    const value: Field[] =
      'stringValue' in v ? [[3, v.stringValue]] : 'numberValue' in v ? [[2, new F64(v.numberValue)]] : [[5, structFields(v.structValue.fields)]];
    entries.push([1, [[1, k], [2, value]]]);
  }
  return entries;
}

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
export const HealthStatus = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const;

export function healthResponseFrame(status: number): Buffer {
  return frameMessage(status ? [[1, status]] : []);
}
