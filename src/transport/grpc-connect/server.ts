/**
 * The ext_authz gRPC server on `@connectrpc/connect-node` (gRPC protocol over `node:http2`) with
 * `@bufbuild/protobuf` codecs generated at install time by `scripts/gen-protos` into `./gen`
 * (gitignored; from the protos that `@grpc/grpc-js-xds` and `grpc-health-check` ship). Same services
 * (Authorization/Check, grpc.health.v1.Health Check and Watch) and decision mapping as the grpc-js
 * transport. Selected with `KEYGATE_GRPC_TRANSPORT=connect`; measured in `npm run bench`.
 */
import * as http2 from 'node:http2';
import { create, type JsonObject } from '@bufbuild/protobuf';
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { Logger } from 'pino';
import type { Authorizer } from '../../authorizer.ts';
import { checkInputFromEnvoy, checkResponse, type CheckRequestMsg } from '../grpc/envoy-check.ts';
import { HEALTH_SERVICES, type GrpcServerOptions } from '../grpc/server.ts';
import type { CheckResponseObject } from '../grpc-h2/codec.ts';
import { Authorization, CheckResponseSchema, type CheckRequest, type CheckResponse } from './gen/envoy/service/auth/v3/external_auth_pb.js';
import { Health, HealthCheckResponse_ServingStatus as Serving, HealthCheckResponseSchema } from './gen/health/v1/health_pb.js';
import { listenOn } from '../../lifecycle.ts';

type HeaderOpts = NonNullable<CheckResponseObject['ok_response']>['headers'];

/** protobuf-es message → the proto-named shape `checkInputFromEnvoy` reads. */
function toCheckRequestMsg(req: CheckRequest): CheckRequestMsg {
  const a = req.attributes;
  if (!a) return {};
  const h = a.request?.http;
  const out: CheckRequestMsg = { attributes: { context_extensions: a.contextExtensions } };
  if (h) {
    out.attributes!.request = {
      http: {
        id: h.id,
        method: h.method,
        headers: h.headers,
        ...(h.headerMap
          ? {
              header_map: {
                headers: h.headerMap.headers.map((x) => ({
                  key: x.key,
                  value: x.value,
                  raw_value: Buffer.from(x.rawValue.buffer, x.rawValue.byteOffset, x.rawValue.length),
                })),
              },
            }
          : {}),
        path: h.path,
        size: Number(h.size),
        body: h.body,
        ...(h.rawBody.length > 0 ? { raw_body: Buffer.from(h.rawBody.buffer, h.rawBody.byteOffset, h.rawBody.length) } : {}),
      },
    };
  }
  return out;
}

function headerOptions(list: HeaderOpts) {
  return (list ?? []).map((h) => ({ header: { key: h.header.key, value: h.header.value }, append: h.append?.value }));
}

/** The object `checkResponse()` builds → a protobuf-es CheckResponse. */
function toCheckResponse(o: CheckResponseObject): CheckResponse {
  const meta: JsonObject = {};
  for (const [k, v] of Object.entries(o.dynamic_metadata?.fields ?? {})) if (v.stringValue !== undefined) meta[k] = v.stringValue;
  return create(CheckResponseSchema, {
    status: o.status ? { code: o.status.code ?? 0, message: o.status.message ?? '' } : undefined,
    httpResponse: o.ok_response
      ? { case: 'okResponse', value: { headers: headerOptions(o.ok_response.headers), headersToRemove: [...(o.ok_response.headers_to_remove ?? [])] } }
      : o.denied_response
        ? {
            case: 'deniedResponse',
            value: {
              status: { code: o.denied_response.status?.code ?? 0 },
              headers: headerOptions(o.denied_response.headers),
              body: o.denied_response.body ?? '',
            },
          }
        : { case: undefined },
    ...(o.dynamic_metadata ? { dynamicMetadata: meta } : {}),
  });
}

export class ConnectGrpcTransport {
  readonly server: http2.Http2Server;
  readonly #opts: GrpcServerOptions;
  readonly #health = new Map<string, Serving>(HEALTH_SERVICES.map((s) => [s, Serving.NOT_SERVING]));
  readonly #changed = new Set<() => void>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  readonly #closing = new AbortController();
  #inFlight = 0;

  constructor(authorizer: Authorizer, opts: GrpcServerOptions, log: Logger) {
    this.#opts = opts;
    const routes = (router: ConnectRouter) => {
      router.service(Authorization, {
        check: async (req: CheckRequest, ctx: HandlerContext) => {
          let input;
          try {
            input = checkInputFromEnvoy(toCheckRequestMsg(req));
          } catch (err) {
            log.warn({ err: { message: (err as Error).message } }, 'unreadable CheckRequest');
            throw new ConnectError('unreadable CheckRequest', Code.InvalidArgument);
          }
          this.#inFlight++;
          try {
            const outcome = await raceSignal(authorizer.check(input), ctx.signal);
            return toCheckResponse(checkResponse(outcome, opts) as CheckResponseObject);
          } catch (err) {
            if (err instanceof ConnectError) throw err;
            log.error({ err: { message: (err as Error)?.message } }, 'check failed');
            throw new ConnectError('internal error', Code.Internal);
          } finally {
            this.#inFlight--;
          }
        },
      });
      router.service(Health, {
        check: (req) => {
          const status = this.#health.get(req.service);
          if (status === undefined) throw new ConnectError(`Health status unknown for service ${req.service.slice(0, 128)}`, Code.NotFound);
          return create(HealthCheckResponseSchema, { status });
        },
        watch: (req, ctx) => this.#watch(req.service, ctx.signal),
      });
    };
    const handler = connectNodeAdapter({
      routes,
      grpc: true,
      connect: false,
      grpcWeb: false,
      readMaxBytes: opts.maxReceiveBytes,
      writeMaxBytes: 1024 * 1024,
      // an unknown method is UNIMPLEMENTED in gRPC (connect's default is HTTP 404)
      fallback: (req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': 'application/grpc', 'grpc-status': '12', 'grpc-message': 'method not implemented' });
        res.end();
      },
    });
    this.server = http2.createServer({ settings: { maxConcurrentStreams: 1000 }, maxSessionMemory: Number.MAX_SAFE_INTEGER }, handler);
    this.server.on('session', (s) => {
      this.#sessions.add(s);
      s.on('close', () => this.#sessions.delete(s));
      s.on('error', () => {});
    });
  }

  async *#watch(service: string, signal: AbortSignal) {
    let last: Serving | undefined;
    const stop = AbortSignal.any([signal, this.#closing.signal]);
    while (!stop.aborted) {
      const status = this.#health.get(service) ?? Serving.SERVICE_UNKNOWN;
      if (status !== last) {
        last = status;
        yield create(HealthCheckResponseSchema, { status });
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          this.#changed.delete(done);
          stop.removeEventListener('abort', done);
          resolve();
        };
        this.#changed.add(done);
        stop.addEventListener('abort', done);
      });
    }
    if (this.#closing.signal.aborted) throw new ConnectError('server shutting down', Code.Unavailable);
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  async listen(): Promise<number> {
    return listenOn(this.server, this.#opts.port, this.#opts.host);
  }

  setServing(serving: boolean): void {
    for (const s of HEALTH_SERVICES) this.#health.set(s, serving ? Serving.SERVING : Serving.NOT_SERVING);
    for (const f of [...this.#changed]) f();
  }

  async close(timeoutMs: number): Promise<void> {
    this.#closing.abort();
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
}

/** Rejects with DEADLINE_EXCEEDED/CANCELED when the call's signal fires before the decision. */
function raceSignal<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(ConnectError.from(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(ConnectError.from(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
