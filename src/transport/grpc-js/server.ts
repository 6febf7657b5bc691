/**
 * The fallback gRPC server (`grpc.transport: grpc-js`), on @grpc/grpc-js, serving the same
 * service set as the h2 server (the sidecar's: `../envoy/services/registry.ts`) with raw message bytes:
 * grpc-js does the HTTP/2, the de-framing, decompression, the receive limit and `grpc-timeout`;
 * `serveMethod` below gives each method the same `Call` the h2 server gives it.
 */
import * as grpc from '@grpc/grpc-js';
import { GRPC_SERVER_LIMITS, GrpcStatus as Status, type GrpcServerOptions } from '../envoy/grpc.ts';
import type { Call, CallListener, ServiceMethod, ServiceSet } from '../service.ts';
import type { Transport } from '../transport.ts';
import { armHttp2Servers } from '../grpc/early-reset.ts';

const identity = (b: Buffer): Buffer => b;

/** Answers that grpc-js holds for a client not taking them, before the call is ended (RESOURCE_EXHAUSTED). */
const SEND_QUEUE_MAX = 1024;

/**
 * One grpc-js call as a `Call`. Every method is registered with grpc-js as a bidirectional stream
 * (raw Buffers both ways), and the unary rule (exactly one message, delivered at half-close) is
 * applied here, as the h2 server applies it.
 */
function serveMethod(method: ServiceMethod, duplex: grpc.ServerDuplexStream<Buffer, Buffer>): void {
  let ended = false;
  let listener: CallListener | undefined;
  let held: Buffer | undefined;
  const call: Call = {
    deadlineMs: undefined, // grpc-js answers DEADLINE_EXCEEDED itself
    get closed() {
      return ended || duplex.cancelled || duplex.destroyed;
    },
    send(frame) {
      if (call.closed) return false;
      const more = duplex.write(frame.subarray(5));
      if (!more && duplex.writableLength > SEND_QUEUE_MAX) {
        call.end(Status.RESOURCE_EXHAUSTED, 'Client not reading the answers');
        cancel();
        return false;
      }
      return more;
    },
    end(code, message = '') {
      if (ended) return;
      ended = true;
      if (duplex.cancelled || duplex.destroyed) return;
      if (code === Status.OK) duplex.end();
      else duplex.emit('error', { code, details: message });
    },
  };
  const cancel = () => {
    const l = listener;
    listener = undefined;
    l?.cancel?.();
  };
  const refuse = (code: number, message: string) => {
    call.end(code, message);
    cancel();
  };
  listener = method.open(call);
  duplex.on('data', (m: Buffer) => {
    if (ended || listener === undefined) return;
    if (method.kind === 'bidi') return void listener.message(m);
    if (held !== undefined) return refuse(Status.UNIMPLEMENTED, 'Received a second request message for a unary method');
    held = m;
  });
  duplex.on('end', () => {
    if (ended || listener === undefined) return;
    if (method.kind === 'bidi') {
      // a cancel also ends the readable side: tell a half-close only if the call was not cancelled
      return void setImmediate(() => {
        if (!ended && !duplex.cancelled) listener?.halfClose?.();
      });
    }
    if (held === undefined) return refuse(Status.UNIMPLEMENTED, 'Received no request message for a unary method');
    void listener.message(held);
  });
  duplex.on('cancelled', () => {
    if (ended) return;
    ended = true;
    cancel();
  });
  // grpc-js ending the call itself (a message over the receive limit, an undecodable one)
  duplex.on('error', () => {
    if (ended) return;
    ended = true;
    cancel();
  });
  if (method.kind === 'bidi') duplex.on('drain', () => listener?.drain?.());
}

export class GrpcTransport implements Transport {
  readonly name = 'grpc';
  readonly server: grpc.Server;
  readonly #opts: GrpcServerOptions;
  readonly #services: ServiceSet;

  /** `services`: the methods served (`envoyServices` in ../envoy/services/registry.ts; tests bring their own). */
  constructor(services: ServiceSet, opts: GrpcServerOptions) {
    this.#opts = opts;
    this.server = new grpc.Server({
      'grpc.max_receive_message_length': opts.maxReceiveBytes,
      'grpc.max_send_message_length': GRPC_SERVER_LIMITS.maxSendBytes,
      'grpc.max_concurrent_streams': GRPC_SERVER_LIMITS.maxConcurrentStreams,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.http2.min_ping_interval_without_data_ms': GRPC_SERVER_LIMITS.minPingIntervalWithoutDataMs,
      'grpc-node.max_session_memory': GRPC_SERVER_LIMITS.maxSessionMemoryMiB,
      'grpc.max_connection_idle_ms': GRPC_SERVER_LIMITS.idleConnectionTimeoutMs,
    });
    this.#services = services;
    for (const method of this.#services.methods) {
      const ok = this.server.register<Buffer, Buffer>(method.path, (duplex: grpc.ServerDuplexStream<Buffer, Buffer>) => serveMethod(method, duplex), identity, identity, 'bidi');
      if (!ok) throw new Error(`gRPC method registered twice: ${method.path}`);
    }
  }

  get inFlight(): number {
    return this.#services.inFlight;
  }

  async listen(): Promise<number> {
    const addr = this.#opts.host.includes(':') ? `[${this.#opts.host}]:${this.#opts.port}` : `${this.#opts.host}:${this.#opts.port}`;
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(addr, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
    // grpc-js answers a refused message (oversize, undecodable) but keeps reading the stream:
    // reset every stream answered before its request ended (one rule with the h2 server).
    const http2Servers = (this.server as unknown as { http2Servers?: Map<unknown, unknown> }).http2Servers;
    if (http2Servers === undefined || armHttp2Servers(http2Servers.keys()) === 0) throw new Error('grpc-js: no HTTP/2 server to arm the early-answer reset on');
    return port;
  }

  setServing(serving: boolean): void {
    this.#services.setServing(serving);
  }

  /** Finish in-flight calls, refuse new ones; force after `timeoutMs`. */
  async close(timeoutMs: number): Promise<void> {
    this.#services.shutdown();
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, timeoutMs);
      t.unref();
      this.server.tryShutdown(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}
