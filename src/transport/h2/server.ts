/**
 * The production gRPC server, on `node:http2`. It knows no service: it routes a call's `:path`
 * to a method of the service set it is given (`../service.ts`; the sidecar's is `../envoy/services/registry.ts`)
 * and runs the call (`./call.ts`): de-framing, decompression, bounds, deadlines, the answer's
 * framing and trailers. The wire codec of the services is `./codec.ts`: no per-call interceptor
 * chain, metadata object or full AttributeContext decode.
 *
 * gRPC over HTTP/2 as grpc-js serves it: POST only (else HTTP 405), `content-type: application/grpc…`
 * (else HTTP 415), unknown method → UNIMPLEMENTED, `grpc-timeout` handed to the method as its
 * deadline (malformed → INTERNAL), a message over the receive limit → RESOURCE_EXHAUSTED (refused
 * from its length prefix, never buffered), gzip/deflate messages accepted (other encodings →
 * UNIMPLEMENTED); for unary and server-streaming methods no or a second request message →
 * UNIMPLEMENTED. Errors are trailers-only responses; answers carry `grpc-status` in trailers.
 *
 * Bounds and errors (docs/operations.md "Connection bounds and errors"): see `./call.ts`. Nothing
 * is written to a closed stream, a stream answered before its request ended is reset with
 * NO_ERROR, and an unexpected error while serving a stream ends that stream only.
 */
import * as http2 from 'node:http2';
import type { Logger } from 'pino';
import { GRPC_SERVER_LIMITS, GrpcStatus as Status, type GrpcServerOptions } from '../envoy/grpc.ts';
import type { ServiceMethod, ServiceSet } from '../service.ts';
import type { Transport } from '../transport.ts';
import { listenOn } from '../../lifecycle.ts';
import { H2Call, open, trailersOnly, type Budget, type Wire } from './call.ts';
import { ReceiveSweep } from '../grpc/deadlines.ts';
import { resetWhenAnsweredEarly } from '../grpc/early-reset.ts';
import { parseGrpcTimeout } from './grpc-timeout.ts';
import { MessagePool } from './message-pool.ts';
import { systemClock, type Clock } from '../../core/clock.ts';

/**
 * HTTP/2 flow-control windows the server grants: per stream (SETTINGS_INITIAL_WINDOW_SIZE) and per
 * connection. At the protocol's default of 64 KiB for both, a 64 KiB request body cannot be sent
 * without waiting for a WINDOW_UPDATE, and sixteen such streams on one connection share 64 KiB:
 * bodies trickle in over many round trips, frames and wake-ups (measured: about a third of the CPU
 * per request at 64 KiB bodies). What a connection may hold is bounded by the byte budgets
 * (reserved from each message's length prefix), not by the window, so a larger window only lets
 * the client send sooner.
 */
const STREAM_WINDOW = 1024 * 1024;
const CONNECTION_WINDOW = 8 * 1024 * 1024;

const noop = (): void => {};

/** A stream answered at its headers: what it still sends is dropped, and it is reset once answered. */
function refused(stream: http2.ServerHttp2Stream): void {
  stream.on('data', noop);
  resetWhenAnsweredEarly(stream);
}

export class H2GrpcTransport implements Transport {
  readonly name = 'grpc';
  readonly server: http2.Http2Server;
  readonly #opts: GrpcServerOptions;
  readonly #log: Logger;
  readonly #services: ServiceSet;
  readonly #methods = new Map<string, ServiceMethod>();
  readonly #sessions = new Map<http2.ServerHttp2Session, Budget>();
  readonly #wire: Wire;

  /** `services`: the methods served (`envoyServices` in ../envoy/services/registry.ts; tests bring their own). */
  constructor(services: ServiceSet, opts: GrpcServerOptions, log: Logger, clock: Clock = systemClock) {
    this.#opts = opts;
    this.#log = log;
    this.#services = services;
    for (const m of this.#services.methods) this.#methods.set(m.path, m);
    this.#wire = {
      maxReceiveBytes: opts.maxReceiveBytes,
      receiveTimeoutMs: opts.receiveTimeoutMs,
      maxBufferedBytes: opts.maxBufferedBytes,
      maxConnectionBufferedBytes: opts.maxConnectionBufferedBytes,
      total: { buffered: 0 },
      pool: new MessagePool(),
      sweep: new ReceiveSweep<H2Call>(opts.receiveTimeoutMs, (call) => call.expire(), clock),
      contain: (call, err) => this.#contain(call, err),
    };
    this.server = http2.createServer({
      settings: { maxConcurrentStreams: GRPC_SERVER_LIMITS.maxConcurrentStreams, initialWindowSize: STREAM_WINDOW },
      maxSessionMemory: GRPC_SERVER_LIMITS.maxSessionMemoryMiB,
      streamResetBurst: GRPC_SERVER_LIMITS.streamResetBurst,
      streamResetRate: GRPC_SERVER_LIMITS.streamResetRate,
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
        this.#contain(undefined, err, stream);
      }
    });
  }

  get inFlight(): number {
    return this.#services.inFlight;
  }

  async listen(): Promise<number> {
    return listenOn(this.server, this.#opts.port, this.#opts.host);
  }

  setServing(serving: boolean): void {
    this.#services.setServing(serving);
  }

  /** Finish in-flight calls, refuse new ones (GOAWAY); force after `timeoutMs`. */
  async close(timeoutMs: number): Promise<void> {
    this.#wire.sweep.close();
    this.#services.shutdown();
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
  #contain(call: H2Call | undefined, err: unknown, stream?: http2.ServerHttp2Stream): void {
    this.#log.error({ err: { message: (err as Error)?.message, code: (err as NodeJS.ErrnoException)?.code } }, 'gRPC stream failed');
    try {
      if (call) call.fail(Status.INTERNAL, 'internal error');
      else if (stream) trailersOnly(stream, Status.INTERNAL, 'internal error');
    } catch {
      stream?.destroy();
    }
  }

  #onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', noop);
    if (headers[':method'] !== 'POST') {
      if (open(stream)) stream.respond({ ':status': 405, allow: 'POST' }, { endStream: true });
      return void refused(stream);
    }
    const ct = headers['content-type'];
    if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) {
      if (open(stream)) stream.respond({ ':status': 415 }, { endStream: true });
      return void refused(stream);
    }
    const path = headers[':path'];
    const method = path === undefined ? undefined : this.#methods.get(path);
    if (method === undefined) {
      trailersOnly(stream, Status.UNIMPLEMENTED, `The server does not implement the method ${path}`);
      return void refused(stream);
    }
    let deadlineMs: number | undefined;
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined) {
      deadlineMs = parseGrpcTimeout(String(timeout));
      if (deadlineMs === undefined) {
        trailersOnly(stream, Status.INTERNAL, `Invalid grpc-timeout value "${String(timeout).slice(0, 32)}"`);
        return void refused(stream);
      }
    }
    const encoding = headers['grpc-encoding'];
    const session = this.#sessions.get(stream.session as http2.ServerHttp2Session);
    new H2Call(stream, method, deadlineMs, encoding === undefined ? 'identity' : String(encoding), session, this.#wire);
  }
}
