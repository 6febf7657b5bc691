/**
 * `grpc.health.v1.Health`: Check (unary) and Watch (server-streaming) over the statuses of
 * `HEALTH_SERVICES` (NOT_SERVING until the sidecar is ready). An unknown service: Check →
 * NOT_FOUND, Watch → SERVICE_UNKNOWN and kept open.
 */
import { decodeHealthRequest, healthResponseFrame, HealthStatus } from '../../grpc/codec.ts';
import type { Call, CallListener, ServiceMethod } from '../../service.ts';
import { GrpcStatus as Status, HEALTH_CHECK_PATH, HEALTH_SERVICES, HEALTH_WATCH_PATH } from '../grpc.ts';

interface Watcher {
  readonly service: string;
  readonly call: Call;
  last: number;
}

export class Health {
  readonly #status = new Map<string, number>(HEALTH_SERVICES.map((s) => [s, HealthStatus.NOT_SERVING]));
  readonly #watchers = new Set<Watcher>();

  readonly check: ServiceMethod = {
    path: HEALTH_CHECK_PATH,
    kind: 'unary',
    open: (call) => ({
      message: (bytes) => {
        const service = this.#service(call, bytes);
        if (service === undefined) return;
        const status = this.#status.get(service);
        if (status === undefined) return call.end(Status.NOT_FOUND, `Health status unknown for service ${service.slice(0, 128)}`);
        call.send(healthResponseFrame(status));
        call.end(Status.OK);
      },
    }),
  };

  readonly watch: ServiceMethod = {
    path: HEALTH_WATCH_PATH,
    kind: 'server-stream',
    open: (call): CallListener => {
      let w: Watcher | undefined;
      return {
        message: (bytes) => {
          const service = this.#service(call, bytes);
          if (service === undefined) return;
          w = { service, call, last: -1 };
          this.#watchers.add(w);
          this.#notify(w);
        },
        cancel: () => {
          if (w) this.#watchers.delete(w);
        },
      };
    },
  };

  setServing(serving: boolean): void {
    for (const s of HEALTH_SERVICES) this.#status.set(s, serving ? HealthStatus.SERVING : HealthStatus.NOT_SERVING);
    for (const w of this.#watchers) this.#notify(w);
  }

  /** Ends every watch (UNAVAILABLE: the server is stopping). */
  shutdown(): void {
    for (const w of this.#watchers) w.call.end(Status.UNAVAILABLE, 'server shutting down');
    this.#watchers.clear();
  }

  #service(call: Call, bytes: Buffer): string | undefined {
    try {
      return decodeHealthRequest(bytes);
    } catch {
      call.end(Status.INTERNAL, 'Error deserializing request');
      return undefined;
    }
  }

  /** Sends a watcher the service's status when it changed (SERVICE_UNKNOWN for an unknown service). */
  #notify(w: Watcher): void {
    if (w.call.closed) return void this.#watchers.delete(w);
    const status = this.#status.get(w.service) ?? HealthStatus.SERVICE_UNKNOWN;
    if (status === w.last) return;
    w.last = status;
    w.call.send(healthResponseFrame(status));
  }
}
