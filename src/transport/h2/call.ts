/**
 * One gRPC call on the h2 server: reads length-prefixed messages off its HTTP/2 stream and hands
 * them to the method's `CallListener`, writes what the handler sends, and ends the stream with the
 * handler's (or the transport's) status. One object per stream; per message nothing is allocated
 * beyond the message itself (a view of the DATA chunk when it holds the whole message, else a
 * pooled buffer).
 *
 * Bounds (docs/operations.md "Connection bounds and errors"):
 * - a message over the receive limit → RESOURCE_EXHAUSTED, refused from its length prefix;
 * - bytes of messages being received are reserved per connection and overall from the prefix and
 *   released as soon as the message is delivered (bidi) or the call ends (unary): over either
 *   budget → RESOURCE_EXHAUSTED;
 * - receive timeout: unary and server-stream calls get their one message and half-close within it
 *   of the headers; a bidi call its first message within it of the headers, then each message
 *   within it of that message's first byte (the time between messages is not bounded by it: an
 *   ext_proc stream lives as long as the upstream's answer);
 * - bytes the handler sent that the client has not taken: past `SEND_BUFFER_MAX` the call is
 *   cancelled (RST_STREAM CANCEL) and the handler told (`cancel`).
 * Every stream answered before its request ended is reset with NO_ERROR (`early-reset.ts`).
 */
import * as http2 from 'node:http2';
import { gunzipSync, inflateSync } from 'node:zlib';
import { GrpcStatus as Status } from '../envoy/grpc.ts';
import type { Call, CallListener, MethodKind, ServiceMethod } from '../service.ts';
import type { ReceiveSweep } from '../grpc/deadlines.ts';
import { resetWhenAnsweredEarly } from '../grpc/early-reset.ts';
import type { MessagePool } from './message-pool.ts';

type Stream = http2.ServerHttp2Stream;

/** Bytes a call may have sent that its client has not taken yet (HTTP/2 flow control) before its next answer, before it is cancelled. */
const SEND_BUFFER_MAX = 4 * 1024 * 1024;

/** The most bytes of answers gathered from one DATA chunk before they are written (see `#batch`). */
const BATCH_MAX = 16 * 1024;

/** Request bytes reserved (declared lengths of messages being received). */
export interface Budget {
  buffered: number;
}

/** What a call needs from its transport. */
export interface Wire {
  readonly maxReceiveBytes: number;
  readonly receiveTimeoutMs: number;
  readonly maxBufferedBytes: number;
  readonly maxConnectionBufferedBytes: number;
  readonly total: Budget;
  readonly pool: MessagePool;
  readonly sweep: ReceiveSweep<H2Call>;
  contain(call: H2Call, err: unknown): void;
}

/** `grpc-message` is percent-encoded (gRPC over HTTP/2): bytes outside 0x20-0x7E and "%". */
export function encodeGrpcMessage(s: string): string {
  let plain = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return s;
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    out += b < 0x20 || b > 0x7e || b === 0x25 ? `%${b.toString(16).toUpperCase().padStart(2, '0')}` : String.fromCharCode(b);
  }
  return out;
}

/** Whether the stream can still be written (a peer reset or a lost connection closes it first). */
export function open(stream: Stream): boolean {
  return !stream.closed && !stream.destroyed;
}

/** Answers a stream with only a status (no message), if it can still be answered. */
export function trailersOnly(stream: Stream, code: number, message: string): void {
  if (!open(stream)) return;
  if (stream.headersSent) {
    stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  stream.respond(
    { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': encodeGrpcMessage(message) },
    { endStream: true },
  );
}

/** The headers and trailers of every answer (node copies them; no per-call objects). */
const HEADERS = { ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity,deflate,gzip' } as const;
const WAIT_FOR_TRAILERS = { waitForTrailers: true } as const;
const OK_TRAILERS = { 'grpc-status': '0' } as const;

function sendOkTrailers(this: Stream): void {
  if (open(this)) this.sendTrailers(OK_TRAILERS);
}

const EMPTY: Buffer[] = [];

export class H2Call implements Call {
  readonly deadlineMs: number | undefined;
  readonly #stream: Stream;
  readonly #kind: MethodKind;
  readonly #wire: Wire;
  readonly #session: Budget | undefined;
  readonly #encoding: string;
  #listener: CallListener | undefined;
  /** Chunks of the message being received (after any delivered ones). */
  #chunks: Buffer[] = EMPTY;
  /** Bytes of `#chunks[0]` already taken (whole messages taken off its front need no new view of the rest). */
  #off = 0;
  #have = 0;
  /** Declared length of the message being received, -1 before its prefix. */
  #len = -1;
  #reserved = 0;
  /** unary / server-stream: the one message, held until half-close. */
  #message: Buffer | undefined;
  /** The pooled buffer the held message is a view of. */
  #lease: Buffer | undefined;
  /** unary: the one answer frame, written with the end of the stream. */
  #pending: Buffer | undefined;
  /** The call was ended (by the handler or the transport): nothing more is read, sent or told. */
  #ended = false;
  /** The stream closed. */
  #gone = false;
  /** bidi: the call is in the receive sweep (a message is being received, or the first is awaited). */
  #swept = false;
  /** bidi: a message was delivered during the current DATA chunk. */
  #delivered = false;
  /**
   * bidi: while a DATA chunk's messages are delivered, the frames sent are gathered here and
   * written as one when the chunk is read (`#flush`): a chunk of many messages (a burst of a
   * streamed response's chunks) costs one stream write, not one per answer. Null: not gathering.
   */
  #batch: Buffer[] | null = null;
  #batchBytes = 0;
  /** The one array `#batch` gathers into (emptied by each flush: the frames are copied or written by then). */
  readonly #gathered: Buffer[] = [];

  constructor(stream: Stream, method: ServiceMethod, deadlineMs: number | undefined, encoding: string, session: Budget | undefined, wire: Wire) {
    this.#stream = stream;
    this.#kind = method.kind;
    this.deadlineMs = deadlineMs;
    this.#encoding = encoding;
    this.#session = session;
    this.#wire = wire;
    wire.sweep.add(this);
    this.#swept = true;
    stream.on('data', (c: Buffer) => this.#guard(this.#onData, c));
    // 'end' and 'close' are emitted once per stream: `on` spares the once-wrapper per call
    stream.on('end', () => this.#guard(this.#onEnd));
    stream.on('close', () => this.#onClose());
    this.#listener = method.open(this);
    if (this.#kind === 'bidi') stream.on('drain', () => this.#listener?.drain?.());
  }

  get closed(): boolean {
    return this.#ended || this.#gone || !open(this.#stream);
  }

  send(frame: Buffer): boolean {
    if (this.closed) return false;
    const stream = this.#stream;
    if (this.#kind === 'unary' && this.#pending === undefined && !stream.headersSent) {
      this.#pending = frame;
      return true;
    }
    if (!stream.headersSent) stream.respond(HEADERS, WAIT_FOR_TRAILERS);
    const batch = this.#batch;
    if (batch !== null) {
      if (this.#batchBytes + frame.length <= BATCH_MAX) {
        batch.push(frame);
        this.#batchBytes += frame.length;
        return true;
      }
      // a large answer, or many: what was gathered goes out first, this one on its own (the
      // send bound applies to it as to any write)
      this.#flush();
      this.#gather();
      if (this.closed) return false;
    }
    return this.#write(frame);
  }

  /** Writes frames to the stream; past the send bound the call is cancelled. */
  #write(frame: Buffer): boolean {
    const stream = this.#stream;
    const more = stream.write(frame);
    // the bound is on what the client has not taken before this frame: one answer larger than it
    // (an ext_proc request body rewritten to ask for usage, up to 16 MiB) is still sent whole
    if (!more && stream.writableLength - frame.length > SEND_BUFFER_MAX) {
      this.#cancel();
      return false;
    }
    return more;
  }

  /** Writes the frames gathered while a DATA chunk was read, as one write. */
  #flush(): void {
    const batch = this.#batch;
    if (batch === null) return;
    this.#batch = null;
    if (batch.length > 0 && open(this.#stream)) this.#write(batch.length === 1 ? batch[0]! : Buffer.concat(batch, this.#batchBytes));
    batch.length = 0;
  }

  /** Answers sent from now on are gathered until `#flush`. */
  #gather(): void {
    this.#batch = this.#gathered;
    this.#batchBytes = 0;
  }

  end(code: number, message = ''): void {
    if (this.#ended) return;
    this.#flush(); // what the handler sent before it ended the call goes first
    this.#ended = true;
    this.#settle();
    const stream = this.#stream;
    if (!open(stream)) return;
    // answered before the request ended: reset once the answer is out (armed only then: a
    // Check answered after its request costs nothing here)
    if (!stream.readableEnded) resetWhenAnsweredEarly(stream);
    if (code === Status.OK) {
      if (!stream.headersSent) stream.respond(HEADERS, WAIT_FOR_TRAILERS);
      stream.on('wantTrailers', sendOkTrailers); // emitted once per stream
      const frame = this.#pending;
      this.#pending = undefined;
      if (frame === undefined) stream.end();
      else stream.end(frame);
    } else if (!stream.headersSent) {
      trailersOnly(stream, code, message);
    } else {
      stream.once('wantTrailers', () => {
        if (open(stream)) stream.sendTrailers({ 'grpc-status': String(code), 'grpc-message': encodeGrpcMessage(message) });
      });
      stream.end();
    }
  }

  /** The receive timeout passed (from the sweep). */
  expire(): void {
    this.fail(Status.DEADLINE_EXCEEDED, `Request message not received within ${this.#wire.receiveTimeoutMs} ms`);
  }

  /** Runs a step; an unexpected error ends this call only. */
  #guard(step: (this: H2Call, c?: Buffer) => void, c?: Buffer): void {
    if (this.#ended) return;
    try {
      step.call(this, c);
    } catch (err) {
      this.#wire.contain(this, err);
    }
  }

  /** The transport refuses the call: answers it, tells the handler. */
  fail(code: number, message: string): void {
    if (this.#ended) return;
    this.end(code, message);
    this.#tellCancel();
  }

  #onData(c?: Buffer): void {
    if (this.#kind !== 'bidi') return this.#read(c!);
    // bidi: each message within the receive timeout of its first byte. The sweep is touched only
    // when a message is left incomplete at the end of a chunk (restarted if it began in this
    // chunk) and when none is left: a stream of whole messages per chunk costs no sweep update per
    // message.
    const fresh = this.#have === 0;
    this.#delivered = false;
    this.#gather();
    try {
      this.#read(c!);
    } finally {
      this.#flush();
    }
    if (this.#ended) return;
    if (this.#have > 0) {
      if (fresh || this.#delivered || !this.#swept) {
        this.#wire.sweep.add(this);
        this.#swept = true;
      }
    } else if (this.#swept) {
      this.#wire.sweep.delete(this);
      this.#swept = false;
    }
  }

  #read(chunk: Buffer): void {
    if (this.#kind !== 'bidi' && this.#message !== undefined) return this.fail(Status.UNIMPLEMENTED, 'Received a second request message for a unary method');
    if (this.#have === 0) {
      this.#chunks = [chunk];
      this.#off = 0;
    } else {
      if (this.#chunks === EMPTY) this.#chunks = [];
      this.#chunks.push(chunk);
    }
    this.#have += chunk.length;
    while (!this.#ended) {
      if (this.#len === -1) {
        if (this.#have < 5) return;
        if (!this.#readPrefix()) return;
      }
      const need = 5 + this.#len;
      if (this.#have < need) return;
      if (this.#kind !== 'bidi' && this.#have > need) return this.fail(Status.UNIMPLEMENTED, 'Received a second request message for a unary method');
      this.#takeMessage(need);
      if (this.#have === 0) return;
    }
  }

  /** Reads the length prefix: refuses an oversize message before buffering it, reserves its bytes. */
  #readPrefix(): boolean {
    let head = this.#chunks[0]!;
    if (head.length - this.#off < 5) {
      this.#trimHead();
      head = Buffer.concat(this.#chunks, this.#have);
      this.#chunks = [head];
    }
    const len = head.readUInt32BE(this.#off + 1);
    const max = this.#wire.maxReceiveBytes;
    if (len > max) {
      this.fail(Status.RESOURCE_EXHAUSTED, `Received message larger than max (${len} vs. ${max})`);
      return false;
    }
    const need = 5 + len;
    const w = this.#wire;
    if (w.total.buffered + need > w.maxBufferedBytes || (this.#session !== undefined && this.#session.buffered + need > w.maxConnectionBufferedBytes)) {
      this.fail(Status.RESOURCE_EXHAUSTED, 'Server busy: too many request bytes in flight');
      return false;
    }
    this.#len = len;
    this.#reserve(need);
    return true;
  }

  #reserve(n: number): void {
    this.#reserved += n;
    this.#wire.total.buffered += n;
    if (this.#session) this.#session.buffered += n;
  }

  #unreserve(): void {
    const n = this.#reserved;
    if (n === 0) return;
    this.#reserved = 0;
    this.#wire.total.buffered -= n;
    if (this.#session) this.#session.buffered -= n;
  }

  /** The bytes of the first chunk already taken are cut off it (before its chunks are joined). */
  #trimHead(): void {
    if (this.#off === 0) return;
    this.#chunks[0] = this.#chunks[0]!.subarray(this.#off);
    this.#off = 0;
  }

  /** Takes the complete message (`need` bytes with its prefix) off the chunks and delivers or holds it. */
  #takeMessage(need: number): void {
    const chunks = this.#chunks;
    let lease: Buffer | undefined;
    const first = chunks[0]!;
    const off = this.#off;
    let flag: number;
    let message: Buffer;
    if (first.length - off >= need) {
      // the whole message in the first chunk: one view of it, and the chunk's offset moves on
      flag = first[off]!;
      message = first.subarray(off + 5, off + need);
      if (first.length - off > need) this.#off = off + need;
      else {
        chunks.shift();
        this.#off = 0;
      }
    } else {
      // the message spans chunks: join exactly its bytes; the tail of the last one stays a chunk
      this.#trimHead();
      let n = 0;
      let i = 0;
      while (n + chunks[i]!.length < need) n += chunks[i++]!.length;
      const last = chunks[i]!;
      const cut = need - n;
      const parts = chunks.slice(0, i);
      parts.push(last.subarray(0, cut));
      let frame: Buffer;
      ({ buf: frame, lease } = this.#wire.pool.join(parts, need));
      if (cut < last.length) {
        chunks.splice(0, i + 1, last.subarray(cut));
      } else chunks.splice(0, i + 1);
      flag = frame[0]!;
      message = frame.subarray(5);
    }
    this.#have -= need;
    this.#len = -1;
    if (this.#have === 0) {
      this.#chunks = EMPTY;
      this.#off = 0;
    }
    if (flag === 1) {
      const inflated = this.#inflate(message);
      // decompressed into its own buffer (or refused): the pooled one is free again
      this.#giveBack(lease);
      lease = undefined;
      if (inflated === undefined) return;
      message = inflated;
    } else if (flag !== 0) {
      this.#giveBack(lease);
      return this.fail(Status.INTERNAL, 'Invalid compression flag');
    }
    if (this.#kind === 'bidi') {
      this.#unreserve();
      this.#delivered = true;
      this.#deliver(message, lease);
    } else {
      this.#message = message;
      this.#lease = lease;
    }
  }

  /**
   * Hands a message to the handler. Its pooled buffer comes back when `message` returns, or when
   * the promise it returns settles (a handler that reads the bytes while it decides).
   */
  #deliver(message: Buffer, lease: Buffer | undefined): void {
    const l = this.#listener;
    if (l === undefined) return this.#giveBack(lease);
    let r: unknown;
    try {
      r = l.message(message);
    } finally {
      if (lease !== undefined && r instanceof Promise) {
        const back = (): void => this.#giveBack(lease);
        r.then(back, back);
      } else this.#giveBack(lease);
    }
  }

  /** The one place a pooled buffer goes back. */
  #giveBack(lease: Buffer | undefined): void {
    if (lease !== undefined) this.#wire.pool.release(lease);
  }

  #inflate(message: Buffer): Buffer | undefined {
    const max = this.#wire.maxReceiveBytes;
    const enc = this.#encoding;
    try {
      if (enc === 'gzip') return gunzipSync(message, { maxOutputLength: max });
      if (enc === 'deflate') return inflateSync(message, { maxOutputLength: max });
      this.fail(Status.UNIMPLEMENTED, `Received message compressed with unsupported encoding "${enc.slice(0, 32)}"`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
        this.fail(Status.RESOURCE_EXHAUSTED, `Received message that decompresses to a size larger than ${max}`);
      } else this.fail(Status.INTERNAL, 'Failed to decompress message');
    }
    return undefined;
  }

  /** The client half-closed. */
  #onEnd(): void {
    if (this.#kind === 'bidi') {
      if (this.#have > 0) return this.fail(Status.INTERNAL, 'Truncated request message');
      this.#wire.sweep.delete(this);
      this.#swept = false;
      // a reset also ends the readable side: tell a half-close only if the stream was not reset
      setImmediate(() => {
        if (!this.#ended && !this.#gone && !this.#stream.aborted) this.#listener?.halfClose?.();
      });
      return;
    }
    this.#wire.sweep.delete(this);
    const message = this.#message;
    if (message === undefined) {
      if (this.#have >= 5) return this.fail(Status.INTERNAL, 'Truncated request message');
      return this.fail(Status.UNIMPLEMENTED, 'Received no request message for a unary method');
    }
    const lease = this.#lease;
    this.#message = undefined;
    this.#lease = undefined;
    this.#chunks = EMPTY;
    this.#off = 0;
    this.#deliver(message, lease);
  }

  #onClose(): void {
    this.#gone = true;
    this.#settle();
    if (!this.#ended) {
      this.#ended = true;
      this.#tellCancel();
    }
  }

  /** Client too slow to take what was sent: reset, tell the handler. */
  #cancel(): void {
    this.#ended = true;
    this.#batch = null;
    this.#gathered.length = 0;
    this.#settle();
    if (open(this.#stream)) this.#stream.close(http2.constants.NGHTTP2_CANCEL);
    this.#tellCancel();
  }

  #tellCancel(): void {
    const l = this.#listener;
    this.#listener = undefined;
    l?.cancel?.();
  }

  /** The call is over: its reserved bytes and receive timeout are given back, and a message never delivered. */
  #settle(): void {
    this.#unreserve();
    this.#wire.sweep.delete(this);
    this.#swept = false;
    this.#chunks = EMPTY;
    this.#off = 0;
    this.#have = 0;
    this.#message = undefined;
    const lease = this.#lease;
    this.#lease = undefined;
    this.#giveBack(lease);
  }
}
