/**
 * The fallback gRPC server (`grpc.transport: grpc-js`), on @grpc/grpc-js, with the standard
 * `grpc.health.v1.Health` service on the same port; also the oracle the h2 server is tested
 * against. The Envoy mapping is `../envoy/`, as for every transport.
 */
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import type { Authorizer } from '../../authorizer.ts';
import { checkInputFromEnvoy, checkResponse, type CheckRequestMsg, type CheckResponse } from '../envoy/check.ts';
import { GRPC_SERVER_LIMITS, HEALTH_SERVICES, type GrpcServerOptions } from '../envoy/grpc.ts';
import type { Transport } from '../transport.ts';
import { authorizationService } from './protos.ts';

export class GrpcTransport implements Transport {
  readonly name = 'grpc';
  readonly server: grpc.Server;
  readonly health = new HealthImplementation(Object.fromEntries(HEALTH_SERVICES.map((s) => [s, 'NOT_SERVING' as const])));
  readonly #opts: GrpcServerOptions;
  #inFlight = 0;

  constructor(authorizer: Authorizer, opts: GrpcServerOptions, log: Logger) {
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
    this.server.addService(authorizationService().service, {
      Check: (call: grpc.ServerUnaryCall<CheckRequestMsg, CheckResponse>, callback: grpc.sendUnaryData<CheckResponse>) => {
        this.#inFlight++;
        let input;
        try {
          input = checkInputFromEnvoy(call.request);
        } catch (err) {
          this.#inFlight--;
          log.warn({ err: { message: (err as Error).message } }, 'unreadable CheckRequest');
          callback({ code: grpc.status.INVALID_ARGUMENT, details: 'unreadable CheckRequest' });
          return;
        }
        authorizer.check(input).then(
          (outcome) => {
            this.#inFlight--;
            callback(null, checkResponse(outcome, opts));
          },
          (err: unknown) => {
            this.#inFlight--;
            log.error({ err: { message: (err as Error)?.message } }, 'check failed');
            callback({ code: grpc.status.INTERNAL, details: 'internal error' });
          },
        );
      },
    });
    this.health.addToServer(this.server);
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  async listen(): Promise<number> {
    const addr = this.#opts.host.includes(':') ? `[${this.#opts.host}]:${this.#opts.port}` : `${this.#opts.host}:${this.#opts.port}`;
    return new Promise<number>((resolve, reject) =>
      this.server.bindAsync(addr, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
  }

  setServing(serving: boolean): void {
    for (const s of HEALTH_SERVICES) this.health.setStatus(s, serving ? 'SERVING' : 'NOT_SERVING');
  }

  /** Finish in-flight calls, refuse new ones; force after `timeoutMs`. */
  async close(timeoutMs: number): Promise<void> {
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
