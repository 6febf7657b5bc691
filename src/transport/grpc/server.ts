/**
 * The Envoy ext_authz gRPC server (`envoy.service.auth.v3.Authorization/Check`) on @grpc/grpc-js,
 * with the standard `grpc.health.v1.Health` service on the same port.
 */
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import type { Authorizer } from '../../authorizer.ts';
import { authorizationService } from './protos.ts';
import { checkInputFromEnvoy, checkResponse, type CheckRequestMsg, type ResponseOptions } from './envoy-check.ts';

export interface GrpcServerOptions extends ResponseOptions {
  readonly host: string;
  readonly port: number;
  readonly maxReceiveBytes: number;
}

/** Names the Authorization service reports under in grpc.health.v1 (plus the overall ""). */
export const HEALTH_SERVICES = ['', 'envoy.service.auth.v3.Authorization'] as const;

export class GrpcTransport {
  readonly server: grpc.Server;
  readonly health = new HealthImplementation({ '': 'NOT_SERVING', 'envoy.service.auth.v3.Authorization': 'NOT_SERVING' });
  readonly #opts: GrpcServerOptions;
  #inFlight = 0;

  constructor(authorizer: Authorizer, opts: GrpcServerOptions, log: Logger) {
    this.#opts = opts;
    this.server = new grpc.Server({
      'grpc.max_receive_message_length': opts.maxReceiveBytes,
      'grpc.max_send_message_length': 1024 * 1024,
      'grpc.max_concurrent_streams': 1000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.http2.min_ping_interval_without_data_ms': 5000,
    });
    this.server.addService(authorizationService().service, {
      Check: (call: grpc.ServerUnaryCall<CheckRequestMsg, object>, callback: grpc.sendUnaryData<object>) => {
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
