/**
 * A lean gRPC server on `node:http2` for the two services keygate serves: Envoy's
 * `envoy.service.auth.v3.Authorization/Check` and `grpc.health.v1.Health` (Check and Watch).
 * Same decision mapping as the grpc-js transport (`../grpc/envoy-check.ts`), with the codec of
 * `./codec.ts`: no per-call interceptor chain, metadata object or full AttributeContext decode.
 *
 * gRPC over HTTP/2 as grpc-js serves it: POST only (else HTTP 405), `content-type: application/grpc…`
 * (else HTTP 415), unknown method → UNIMPLEMENTED, `grpc-timeout` → DEADLINE_EXCEEDED when the
 * decision is not ready in time (malformed timeout → INTERNAL), a message over the receive limit →
 * RESOURCE_EXHAUSTED (refused from its length prefix, never buffered), gzip/deflate messages
 * accepted (other encodings → UNIMPLEMENTED), no or a second request message → UNIMPLEMENTED, an
 * undecodable message → INTERNAL. Errors are trailers-only responses; answers carry `grpc-status`
 * in trailers.
 */
import * as http2 from 'node:http2';
import { gunzipSync, inflateSync } from 'node:zlib';
import type { Logger } from 'pino';
import type { Authorizer, CheckOutcome } from '../../authorizer.ts';
import { checkInputFromEnvoy, checkResponse } from '../grpc/envoy-check.ts';
import { HEALTH_SERVICES, type GrpcServerOptions } from '../grpc/server.ts';
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

const CHECK = '/envoy.service.auth.v3.Authorization/Check';
const HEALTH_CHECK = '/grpc.health.v1.Health/Check';
const HEALTH_WATCH = '/grpc.health.v1.Health/Watch';

/** gRPC status codes used here. */
const Status = {
  OK: 0,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

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

function trailersOnly(stream: Stream, code: number, message: string): void {
  if (stream.destroyed || stream.headersSent) {
    if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  stream.respond(
    { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': encodeGrpcMessage(message) },
    { endStream: true },
  );
}

function sendUnary(stream: Stream, frame: Buffer): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity,deflate,gzip' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
  stream.end(frame);
}

interface Call {
  readonly stream: Stream;
  readonly message: Buffer;
  readonly deadlineMs: number | undefined;
}

export class H2GrpcTransport {
  readonly server: http2.Http2Server;
  readonly #authorizer: Authorizer;
  readonly #opts: GrpcServerOptions;
  readonly #log: Logger;
  readonly #health = new Map<string, number>(HEALTH_SERVICES.map((s) => [s, HealthStatus.NOT_SERVING]));
  readonly #watchers = new Set<{ service: string; stream: Stream; last: number }>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  readonly #allowFrames = new Map<string, Buffer>();
  #inFlight = 0;

  constructor(authorizer: Authorizer, opts: GrpcServerOptions, log: Logger) {
    this.#authorizer = authorizer;
    this.#opts = opts;
    this.#log = log;
    this.server = http2.createServer({
      settings: { maxConcurrentStreams: 1000 },
      // grpc-js's default: no per-session cap (the receive limit bounds each message).
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
    });
    this.server.on('session', (session) => {
      this.#sessions.add(session);
      session.on('close', () => this.#sessions.delete(session));
      session.on('error', () => {});
    });
    this.server.on('stream', (stream, headers) => this.#onStream(stream, headers));
  }

  get inFlight(): number {
    return this.#inFlight;
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
    for (const w of this.#watchers) {
      if (!w.stream.destroyed) {
        w.stream.once('wantTrailers', () => w.stream.sendTrailers({ 'grpc-status': String(Status.UNAVAILABLE), 'grpc-message': 'server shutting down' }));
        w.stream.end();
      }
    }
    this.#watchers.clear();
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        for (const s of this.#sessions) s.destroy();
        resolve();
      }, timeoutMs);
      t.unref();
      this.server.close(() => {
        clearTimeout(t);
        resolve();
      });
      for (const s of this.#sessions) s.close();
    });
  }

  #onStream(stream: Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => {});
    if (headers[':method'] !== 'POST') {
      stream.respond({ ':status': 405, allow: 'POST' }, { endStream: true });
      return this.#discard(stream);
    }
    const ct = headers['content-type'];
    if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) {
      stream.respond({ ':status': 415 }, { endStream: true });
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
    this.#readMessage(stream, headers['grpc-encoding'], (message) => {
      const call: Call = { stream, message, deadlineMs };
      if (path === CHECK) this.#check(call);
      else if (path === HEALTH_CHECK) this.#healthCheck(call);
      else this.#healthWatch(call);
    });
  }

  /** Drops whatever the client still sends on a stream already answered. */
  #discard(stream: Stream): void {
    stream.on('data', () => {});
  }

  /** Reads exactly one length-prefixed message (bounded by the receive limit) and hands it on at end of stream. */
  #readMessage(stream: Stream, encoding: string | string[] | undefined, onMessage: (m: Buffer) => void): void {
    const max = this.#opts.maxReceiveBytes;
    let chunks: Buffer[] = [];
    let have = 0;
    let failed = false;
    const fail = (code: number, msg: string) => {
      failed = true;
      chunks = [];
      trailersOnly(stream, code, msg);
    };
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
      }
      if (len !== -1 && have > 5 + len) fail(Status.UNIMPLEMENTED, 'Received a second request message for a unary method');
    });
    stream.on('end', () => {
      if (failed) return;
      const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      chunks = [];
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
      onMessage(message);
    });
  }

  #check(call: Call): void {
    const { stream } = call;
    let input;
    try {
      input = checkInputFromEnvoy(decodeCheckRequest(call.message, { lazyHeaders: true }));
    } catch (err) {
      this.#log.warn({ err: { message: (err as Error).message } }, 'unreadable CheckRequest');
      trailersOnly(stream, Status.INTERNAL, err instanceof WireError ? 'Error deserializing request' : 'unreadable CheckRequest');
      return;
    }
    this.#inFlight++;
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    if (call.deadlineMs !== undefined) {
      timer = setTimeout(() => {
        if (done) return;
        done = true;
        trailersOnly(stream, Status.DEADLINE_EXCEEDED, 'Deadline exceeded');
      }, call.deadlineMs);
    }
    this.#authorizer.check(input).then(
      (outcome) => {
        this.#inFlight--;
        if (timer) clearTimeout(timer);
        if (done) return;
        done = true;
        sendUnary(stream, this.#responseFrame(outcome));
      },
      (err: unknown) => {
        this.#inFlight--;
        if (timer) clearTimeout(timer);
        this.#log.error({ err: { message: (err as Error)?.message } }, 'check failed');
        if (done) return;
        done = true;
        trailersOnly(stream, Status.INTERNAL, 'internal error');
      },
    );
  }

  /**
   * The framed CheckResponse. An allow depends only on (account, key id, model) and the fixed
   * options, so its bytes are kept (bounded; dropped whole when full); a deny carries the request id.
   */
  #responseFrame(outcome: CheckOutcome): Buffer {
    const d = outcome.decision;
    if (!d.allow) return frameMessage(checkResponseFields(checkResponse(outcome, this.#opts)));
    const k = `${d.accountId}\n${d.keyId}\n${d.model ?? ''}\n${d.model === null ? 0 : 1}`;
    let frame = this.#allowFrames.get(k);
    if (frame === undefined) {
      frame = frameMessage(checkResponseFields(checkResponse(outcome, this.#opts)));
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
    if (stream.destroyed) return;
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    const w = { service, stream, last: -1 };
    this.#watchers.add(w);
    stream.on('close', () => this.#watchers.delete(w));
    this.#notify(w);
  }

  /** Sends a watcher the service's status when it changed (SERVICE_UNKNOWN for an unknown service). */
  #notify(w: { service: string; stream: Stream; last: number }): void {
    const status = this.#health.get(w.service) ?? HealthStatus.SERVICE_UNKNOWN;
    if (status === w.last || w.stream.destroyed) return;
    w.last = status;
    w.stream.write(healthResponseFrame(status));
  }
}
