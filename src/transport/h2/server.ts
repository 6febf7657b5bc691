/**
 * The production gRPC server, on `node:http2`, for the two services keygate serves: Envoy's
 * `envoy.service.auth.v3.Authorization/Check` and `grpc.health.v1.Health` (Check and Watch).
 * The Envoy mapping is `../envoy/` (shared with every transport); the wire codec is `./codec.ts`:
 * no per-call interceptor chain, metadata object or full AttributeContext decode.
 *
 * gRPC over HTTP/2 as grpc-js serves it: POST only (else HTTP 405), `content-type: application/grpc…`
 * (else HTTP 415), unknown method → UNIMPLEMENTED, `grpc-timeout` → DEADLINE_EXCEEDED when the
 * decision is not ready in time (malformed timeout → INTERNAL), a message over the receive limit →
 * RESOURCE_EXHAUSTED (refused from its length prefix, never buffered), gzip/deflate messages
 * accepted (other encodings → UNIMPLEMENTED), no or a second request message → UNIMPLEMENTED, an
 * undecodable message → INTERNAL. Errors are trailers-only responses; answers carry `grpc-status`
 * in trailers.
 *
 * Bounds and errors (docs/operations.md "Connection bounds and errors"): bytes of messages being
 * received are reserved per connection and overall (RESOURCE_EXHAUSTED past either); a message must
 * arrive within the receive timeout (DEADLINE_EXCEEDED; one sweep timer); a refused stream is reset
 * once answered. Nothing is written to a closed stream, and an unexpected error while serving a
 * stream ends that stream only.
 */
import * as http2 from 'node:http2';
import { gunzipSync, inflateSync } from 'node:zlib';
import type { Logger } from 'pino';
import type { Authorizer, CheckOutcome } from '../../authorizer.ts';
import { allowKey, allowParts, allowResponse, checkInputFromEnvoy, checkResponse } from '../envoy/check.ts';
import {
  CHECK_PATH as CHECK,
  GRPC_SERVER_LIMITS,
  GrpcStatus as Status,
  HEALTH_CHECK_PATH as HEALTH_CHECK,
  HEALTH_SERVICES,
  HEALTH_WATCH_PATH as HEALTH_WATCH,
  type GrpcServerOptions,
} from '../envoy/grpc.ts';
import type { Transport } from '../transport.ts';
import {
  checkResponseFields,
  decodeCheckRequest,
  decodeHealthRequest,
  frameMessage,
  healthResponseFrame,
  HealthStatus,
  WireError,
} from './codec.ts';
import { listenOn } from '../../lifecycle.ts';
import { Deadlines, type Deadline } from './deadlines.ts';
import { DenyFrames } from './deny-frames.ts';
import { MessagePool } from './message-pool.ts';

/**
 * HTTP/2 flow-control windows the server grants: per stream (SETTINGS_INITIAL_WINDOW_SIZE) and per
 * connection. At the protocol's default of 64 KiB for both, a 64 KiB request body cannot be sent
 * without waiting for a WINDOW_UPDATE, and sixteen such streams on one connection share 64 KiB:
 * bodies trickle in over many round trips, frames and wake-ups (measured: about a third of the CPU
 * per request at 64 KiB bodies). What a connection may hold is bounded by the byte budgets below
 * (reserved from each message's length prefix), not by the window, so a larger window only lets
 * the client send sooner.
 */
const STREAM_WINDOW = 1024 * 1024;
const CONNECTION_WINDOW = 8 * 1024 * 1024;

/** Encoded allow responses kept (see #responseFrame). */
const ALLOW_FRAMES_MAX = 10_000;

const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };
const TIMEOUT = /^(\d{1,8})([HMSmun])$/;

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

type Stream = http2.ServerHttp2Stream;

/**
 * Whether the stream can still be answered. A stream whose peer reset it, or whose connection
 * went away, is closed before (or without) being destroyed; writing to it throws, so every write
 * of this server goes through here first.
 */
function open(stream: Stream): boolean {
  return !stream.closed && !stream.destroyed;
}

/**
 * Ends a stream the peer has not finished sending on: RST_STREAM(NO_ERROR) after the answer
 * (HTTP/2's "stop sending, the response is complete"), so what it still sends is not received.
 */
function stopReceiving(stream: Stream): void {
  if (stream.destroyed || stream.readableEnded) return;
  // After the answer has gone out: a reset submitted in the same tick can overtake it.
  setImmediate(resetNoError, stream);
}

function resetNoError(stream: Stream): void {
  if (!stream.destroyed && !stream.readableEnded) stream.close(http2.constants.NGHTTP2_NO_ERROR);
}

function trailersOnly(stream: Stream, code: number, message: string): void {
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
const UNARY_HEADERS = { ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity,deflate,gzip' } as const;
const UNARY_OPTIONS = { waitForTrailers: true } as const;
const OK_TRAILERS = { 'grpc-status': '0' } as const;

function sendTrailers(this: Stream): void {
  if (open(this)) this.sendTrailers(OK_TRAILERS);
}

function sendUnary(stream: Stream, frame: Buffer): void {
  if (!open(stream) || stream.headersSent) return;
  stream.respond(UNARY_HEADERS, UNARY_OPTIONS);
  stream.once('wantTrailers', sendTrailers);
  stream.end(frame);
}

interface Call {
  readonly stream: Stream;
  readonly message: Buffer;
  /** The pooled buffer `message` is a view of, given back once the decision is made. */
  readonly lease: Buffer | undefined;
  readonly deadlineMs: number | undefined;
}

const noop = (): void => {};

/** Per connection: request bytes held (declared lengths of messages being received). */
interface SessionState {
  buffered: number;
}

export class H2GrpcTransport implements Transport {
  readonly name = 'grpc';
  readonly server: http2.Http2Server;
  readonly #authorizer: Authorizer;
  readonly #opts: GrpcServerOptions;
  readonly #log: Logger;
  readonly #health = new Map<string, number>(HEALTH_SERVICES.map((s) => [s, HealthStatus.NOT_SERVING]));
  readonly #watchers = new Set<{ service: string; stream: Stream; last: number }>();
  readonly #sessions = new Map<http2.ServerHttp2Session, SessionState>();
  readonly #allowFrames = new Map<string, Buffer>();
  readonly #denyFrames = new DenyFrames((o) => frameMessage(checkResponseFields(checkResponse(o, this.#opts))));
  readonly #pool = new MessagePool();
  readonly #deadlines = new Deadlines();
  /** Streams whose request message is not complete yet, with the sweep tick they started at. */
  readonly #receiving = new Map<Stream, number>();
  readonly #sweep: NodeJS.Timeout;
  readonly #sweepMs: number;
  #tick = 0;
  /** Request bytes held across all connections (declared lengths of messages being received). */
  #buffered = 0;
  #inFlight = 0;

  constructor(authorizer: Authorizer, opts: GrpcServerOptions, log: Logger) {
    this.#authorizer = authorizer;
    this.#opts = opts;
    this.#log = log;
    this.server = http2.createServer({
      settings: { maxConcurrentStreams: GRPC_SERVER_LIMITS.maxConcurrentStreams, initialWindowSize: STREAM_WINDOW },
      maxSessionMemory: GRPC_SERVER_LIMITS.maxSessionMemoryMiB,
    });
    this.server.on('session', (session) => {
      this.#sessions.set(session, { buffered: 0 });
      session.setLocalWindowSize(CONNECTION_WINDOW);
      session.on('close', () => this.#sessions.delete(session));
      session.on('error', noop);
      session.setTimeout(GRPC_SERVER_LIMITS.idleConnectionTimeoutMs, () => {
        if (!session.closed) session.close();
      });
    });
    this.server.on('stream', (stream, headers) => {
      try {
        this.#onStream(stream, headers);
      } catch (err) {
        this.#contain(stream, err);
      }
    });
    // One coarse timer for every stream's receive deadline (a quarter of it apart).
    this.#sweepMs = Math.max(25, Math.floor(opts.receiveTimeoutMs / 4));
    this.#sweep = setInterval(() => this.#expireStalled(), this.#sweepMs);
    this.#sweep.unref();
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** Request bytes currently held across connections (for tests and metrics). */
  get bufferedBytes(): number {
    return this.#buffered;
  }

  async listen(): Promise<number> {
    return listenOn(this.server, this.#opts.port, this.#opts.host);
  }

  setServing(serving: boolean): void {
    for (const s of HEALTH_SERVICES) this.#health.set(s, serving ? HealthStatus.SERVING : HealthStatus.NOT_SERVING);
    for (const w of this.#watchers) this.#notify(w);
  }

  /** Finish in-flight calls, refuse new ones (GOAWAY); force after `timeoutMs`. */
  async close(timeoutMs: number): Promise<void> {
    clearInterval(this.#sweep);
    for (const w of this.#watchers) {
      const stream = w.stream;
      if (open(stream)) {
        stream.once('wantTrailers', () => {
          if (open(stream)) stream.sendTrailers({ 'grpc-status': String(Status.UNAVAILABLE), 'grpc-message': 'server shutting down' });
        });
        stream.end();
      }
    }
    this.#watchers.clear();
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        for (const s of this.#sessions.keys()) s.destroy();
        resolve();
      }, timeoutMs);
      t.unref();
      this.server.close(() => {
        clearTimeout(t);
        resolve();
      });
      for (const s of this.#sessions.keys()) s.close();
    });
  }

  /**
   * An unexpected error while handling one stream ends that stream only (INTERNAL, then reset);
   * the connection and every other call go on. Logged without the request's content.
   */
  #contain(stream: Stream, err: unknown): void {
    this.#log.error({ err: { message: (err as Error)?.message, code: (err as NodeJS.ErrnoException)?.code } }, 'gRPC stream failed');
    try {
      trailersOnly(stream, Status.INTERNAL, 'internal error');
      stopReceiving(stream);
    } catch {
      stream.destroy();
    }
  }

  /**
   * Answers (DEADLINE_EXCEEDED) and resets every stream whose message did not arrive in time. A
   * stream started during tick `start` has had at least `(now - start - 1)` whole sweeps, so it
   * expires only past `limit + 1` ticks: never before the timeout, at most one sweep after it.
   */
  #expireStalled(): void {
    const now = ++this.#tick;
    const limit = Math.ceil(this.#opts.receiveTimeoutMs / this.#sweepMs);
    for (const [stream, start] of this.#receiving) {
      if (now - start <= limit) continue;
      this.#receiving.delete(stream);
      stream.emit('receiveTimeout');
    }
  }

  #onStream(stream: Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', noop);
    if (headers[':method'] !== 'POST') {
      if (open(stream)) stream.respond({ ':status': 405, allow: 'POST' }, { endStream: true });
      return this.#discard(stream);
    }
    const ct = headers['content-type'];
    if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) {
      if (open(stream)) stream.respond({ ':status': 415 }, { endStream: true });
      return this.#discard(stream);
    }
    const path = headers[':path'];
    if (path !== CHECK && path !== HEALTH_CHECK && path !== HEALTH_WATCH) {
      trailersOnly(stream, Status.UNIMPLEMENTED, `The server does not implement the method ${path}`);
      return this.#discard(stream);
    }
    let deadlineMs: number | undefined;
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined) {
      const m = TIMEOUT.exec(String(timeout));
      if (!m) {
        trailersOnly(stream, Status.INTERNAL, `Invalid grpc-timeout value "${String(timeout).slice(0, 32)}"`);
        return this.#discard(stream);
      }
      deadlineMs = Math.max(0, Math.ceil(Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!));
    }
    this.#readMessage(stream, headers['grpc-encoding'], (message, lease) => {
      const call: Call = { stream, message, lease, deadlineMs };
      if (path === CHECK) return this.#check(call);
      this.#pool.release(lease);
      if (path === HEALTH_CHECK) this.#healthCheck(call);
      else this.#healthWatch(call);
    });
  }

  /** Drops whatever the client still sends on a stream already answered, and tells it to stop. */
  #discard(stream: Stream): void {
    stream.on('data', noop);
    stopReceiving(stream);
  }

  /**
   * Reads exactly one length-prefixed message and hands it on at end of stream. Bounded three
   * ways: the receive limit (refused from its length prefix, never buffered), the bytes held per
   * connection and across connections (the declared length is reserved when the prefix arrives,
   * released when the stream closes; over either budget → RESOURCE_EXHAUSTED), and the receive
   * deadline (the whole message within `receiveTimeoutMs` of the headers, else DEADLINE_EXCEEDED).
   */
  #readMessage(stream: Stream, encoding: string | string[] | undefined, onMessage: (m: Buffer, lease: Buffer | undefined) => void): void {
    const max = this.#opts.maxReceiveBytes;
    const session = this.#sessions.get(stream.session as http2.ServerHttp2Session);
    let chunks: Buffer[] = [];
    let have = 0;
    let failed = false;
    let reserved = 0;
    const release = () => {
      this.#receiving.delete(stream);
      if (reserved === 0) return;
      this.#buffered -= reserved;
      if (session) session.buffered -= reserved;
      reserved = 0;
    };
    const fail = (code: number, msg: string) => {
      failed = true;
      chunks = [];
      release();
      trailersOnly(stream, code, msg);
      stopReceiving(stream);
    };
    this.#receiving.set(stream, this.#tick);
    stream.once('close', release);
    stream.once('receiveTimeout', () => {
      if (!failed) fail(Status.DEADLINE_EXCEEDED, `Request message not received within ${this.#opts.receiveTimeoutMs} ms`);
    });
    let len = -1;
    stream.on('data', (c: Buffer) => {
      if (failed) return;
      chunks.push(c);
      have += c.length;
      if (len === -1 && have >= 5) {
        // the length prefix: refuse an oversize message before buffering it
        const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        chunks = [head];
        len = head.readUInt32BE(1);
        if (len > max) return fail(Status.RESOURCE_EXHAUSTED, `Received message larger than max (${len} vs. ${max})`);
        const need = 5 + len;
        if (
          this.#buffered + need > this.#opts.maxBufferedBytes ||
          (session !== undefined && session.buffered + need > this.#opts.maxConnectionBufferedBytes)
        ) {
          return fail(Status.RESOURCE_EXHAUSTED, 'Server busy: too many request bytes in flight');
        }
        reserved = need;
        this.#buffered += need;
        if (session) session.buffered += need;
      }
      if (len !== -1 && have > 5 + len) fail(Status.UNIMPLEMENTED, 'Received a second request message for a unary method');
    });
    stream.on('end', () => {
      if (failed) return;
      this.#receiving.delete(stream);
      try {
        this.#endMessage(stream, chunks, have, encoding, fail, onMessage);
      } catch (err) {
        failed = true;
        release();
        this.#contain(stream, err);
      }
      chunks = [];
    });
  }

  /**
   * The message from its chunks. Several chunks are joined into a pooled buffer (`MessagePool`),
   * lent with the message and given back once its decision is made, or here when it is refused.
   */
  #endMessage(
    stream: Stream,
    chunks: Buffer[],
    have: number,
    encoding: string | string[] | undefined,
    failStream: (code: number, msg: string) => void,
    onMessage: (m: Buffer, lease: Buffer | undefined) => void,
  ): void {
    const max = this.#opts.maxReceiveBytes;
    let lease: Buffer | undefined;
    let buf: Buffer;
    if (chunks.length === 1) buf = chunks[0]!;
    else ({ buf, lease } = this.#pool.join(chunks, have));
    const fail = (code: number, msg: string) => {
      this.#pool.release(lease);
      failStream(code, msg);
    };
    if (buf.length < 5) return fail(Status.UNIMPLEMENTED, 'Received no request message for a unary method');
    const len = buf.readUInt32BE(1);
    if (buf.length < 5 + len) return fail(Status.INTERNAL, 'Truncated request message');
    if (buf.length > 5 + len) return fail(Status.UNIMPLEMENTED, 'Received a second request message for a unary method');
    let message = buf.subarray(5, 5 + len);
    if (buf[0] === 1) {
      const enc = String(encoding ?? 'identity');
      try {
        if (enc === 'gzip') message = gunzipSync(message, { maxOutputLength: max });
        else if (enc === 'deflate') message = inflateSync(message, { maxOutputLength: max });
        else return fail(Status.UNIMPLEMENTED, `Received message compressed with unsupported encoding "${enc.slice(0, 32)}"`);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
          return fail(Status.RESOURCE_EXHAUSTED, `Received message that decompresses to a size larger than ${max}`);
        }
        return fail(Status.INTERNAL, 'Failed to decompress message');
      }
    } else if (buf[0] !== 0) {
      return fail(Status.INTERNAL, 'Invalid compression flag');
    }
    if (message.buffer !== buf.buffer) {
      // decompressed into its own buffer: the pooled one is free again
      this.#pool.release(lease);
      lease = undefined;
    }
    if (!open(stream)) return this.#pool.release(lease);
    onMessage(message, lease);
  }

  #check(call: Call): void {
    const { stream } = call;
    let input;
    try {
      input = checkInputFromEnvoy(decodeCheckRequest(call.message, { lazyHeaders: true }));
    } catch (err) {
      this.#pool.release(call.lease);
      this.#log.warn({ err: { message: (err as Error).message } }, 'unreadable CheckRequest');
      trailersOnly(stream, Status.INTERNAL, err instanceof WireError ? 'Error deserializing request' : 'unreadable CheckRequest');
      return;
    }
    this.#inFlight++;
    let done = false;
    let timer: Deadline | undefined;
    if (call.deadlineMs !== undefined) {
      timer = this.#deadlines.add(call.deadlineMs, () => {
        if (done) return;
        done = true;
        trailersOnly(stream, Status.DEADLINE_EXCEEDED, 'Deadline exceeded');
      });
    }
    this.#authorizer.check(input).then(
      (outcome) => {
        this.#inFlight--;
        this.#pool.release(call.lease);
        if (timer) this.#deadlines.finish(timer);
        if (done) return;
        done = true;
        try {
          sendUnary(stream, this.#responseFrame(outcome));
        } catch (err) {
          this.#contain(stream, err);
        }
      },
      (err: unknown) => {
        this.#inFlight--;
        this.#pool.release(call.lease);
        if (timer) this.#deadlines.finish(timer);
        this.#log.error({ err: { message: (err as Error)?.message } }, 'check failed');
        if (done) return;
        done = true;
        trailersOnly(stream, Status.INTERNAL, 'internal error');
      },
    );
  }

  /**
   * The framed CheckResponse. An allow response is made of its `AllowParts` and the fixed options
   * only (`allowResponse` sees nothing else), so its bytes are kept under `allowKey` of those same
   * parts (bounded; dropped whole when full); a deny carries the request id and comes from a
   * prebuilt frame with the id written in (`DenyFrames`).
   */
  #responseFrame(outcome: CheckOutcome): Buffer {
    const d = outcome.decision;
    if (!d.allow) return this.#denyFrames.frame(outcome, d);
    const parts = allowParts(d);
    const k = allowKey(parts);
    let frame = this.#allowFrames.get(k);
    if (frame === undefined) {
      frame = frameMessage(checkResponseFields(allowResponse(parts, this.#opts)));
      if (this.#allowFrames.size >= ALLOW_FRAMES_MAX) this.#allowFrames.clear();
      this.#allowFrames.set(k, frame);
    }
    return frame;
  }

  #healthCheck(call: Call): void {
    let service: string;
    try {
      service = decodeHealthRequest(call.message);
    } catch {
      return trailersOnly(call.stream, Status.INTERNAL, 'Error deserializing request');
    }
    const status = this.#health.get(service);
    if (status === undefined) return trailersOnly(call.stream, Status.NOT_FOUND, `Health status unknown for service ${service.slice(0, 128)}`);
    sendUnary(call.stream, healthResponseFrame(status));
  }

  #healthWatch(call: Call): void {
    let service: string;
    try {
      service = decodeHealthRequest(call.message);
    } catch {
      return trailersOnly(call.stream, Status.INTERNAL, 'Error deserializing request');
    }
    const { stream } = call;
    if (!open(stream)) return;
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    const w = { service, stream, last: -1 };
    this.#watchers.add(w);
    stream.on('close', () => this.#watchers.delete(w));
    this.#notify(w);
  }

  /** Sends a watcher the service's status when it changed (SERVICE_UNKNOWN for an unknown service). */
  #notify(w: { service: string; stream: Stream; last: number }): void {
    const status = this.#health.get(w.service) ?? HealthStatus.SERVICE_UNKNOWN;
    if (status === w.last || !open(w.stream)) return;
    w.last = status;
    w.stream.write(healthResponseFrame(status));
  }
}
