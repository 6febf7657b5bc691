/**
 * An Envoy-faithful ext_proc client for tests (like `envoy-client.ts` for Check): opens
 * `envoy.service.ext_proc.v3.ExternalProcessor/Process` with @grpc/grpc-js over Envoy's own protos
 * and sends one HTTP exchange the way the ext_proc filter does — request headers (with the
 * ext_authz metadata forwarded), the request body when the route sends it, response headers, the
 * response body in chunks (STREAMED), trailers skipped. Without `observability`, every message
 * waits for its answer (as Envoy does); in observability mode nothing is awaited. A stream the
 * server ends early (OK) stops the exchange there, as Envoy stops sending.
 */
import * as grpc from '@grpc/grpc-js';
import { loadEnvoyProtos } from '../../proto/envoy-protos.ts';

const def = loadEnvoyProtos(['envoy/service/ext_proc/v3/external_processor.proto']);
const Processor = grpc.makeGenericClientConstructor(def['envoy.service.ext_proc.v3.ExternalProcessor'] as grpc.ServiceDefinition, 'ExternalProcessor');

export interface MeteredExchange {
  readonly path: string;
  readonly requestHeaders?: Record<string, string>;
  readonly requestId?: string;
  /** Forwarded as `metadata_context.filter_metadata["envoy.filters.http.ext_authz"]`. */
  readonly identity?: { keyId: string; accountId: string; model?: string; bookingId?: string };
  /** Sent whole (BUFFERED) when given. */
  readonly requestBody?: string | Buffer;
  readonly status?: number;
  readonly responseHeaders?: Record<string, string>;
  readonly chunks: readonly (string | Uint8Array)[];
  /** false: the last chunk carries no end_of_stream and the stream is cancelled (client gone). */
  readonly complete?: boolean;
  readonly observability?: boolean;
}

export interface ExchangeResult {
  /** The ProcessingResponse of each message answered (decoded by proto-loader). */
  readonly answers: Record<string, unknown>[];
  /** The gRPC status the server ended with (null: cancelled by us). */
  readonly code: number | null;
  /** Messages sent before the server ended the stream. */
  readonly sent: number;
}

const headerMap = (h: Record<string, string>) => ({ headers: Object.entries(h).map(([key, v]) => ({ key, raw_value: Buffer.from(v) })) });
// google.protobuf.Value comes from protobufjs's bundled well-known types: camelCase field names
const str = (v: string) => ({ stringValue: v });

export class ExtProcClient {
  readonly #client: grpc.Client & { Process(): grpc.ClientDuplexStream<unknown, Record<string, unknown>> };

  constructor(address: string) {
    // Envoy takes an answer of any size (a rewritten request body may pass grpc-js's 4 MiB default)
    this.#client = new Processor(address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 64 * 1024 * 1024, 'grpc.max_send_message_length': 64 * 1024 * 1024 }) as never;
  }

  close(): void {
    this.#client.close();
  }

  /** One exchange as Envoy meters it; resolves when the stream is over. */
  exchange(x: MeteredExchange): Promise<ExchangeResult> {
    const call = this.#client.Process();
    const answers: Record<string, unknown>[] = [];
    let code: number | null = null;
    let sent = 0;
    let waiting: (() => void) | null = null;
    let ended = false;
    const over = new Promise<void>((resolve) => {
      call.on('data', (m: Record<string, unknown>) => {
        answers.push(m);
        const w = waiting;
        waiting = null;
        w?.();
      });
      call.on('status', (s: grpc.StatusObject) => {
        code = s.code;
        ended = true;
        waiting?.();
        resolve();
      });
      call.on('error', () => {});
    });
    const metadata = x.identity
      ? {
          metadata_context: {
            filter_metadata: {
              'envoy.filters.http.ext_authz': {
                fields: { key_id: str(x.identity.keyId), account_id: str(x.identity.accountId), ...(x.identity.model ? { model: str(x.identity.model) } : {}), ...(x.identity.bookingId ? { booking_id: str(x.identity.bookingId) } : {}) },
              },
            },
          },
        }
      : {};
    const obs = x.observability === true;
    const send = async (m: Record<string, unknown>): Promise<boolean> => {
      if (ended) return false;
      const answered = obs ? null : new Promise<void>((r) => (waiting = r));
      call.write({ ...m, ...metadata, ...(obs ? { observability_mode: true } : {}) });
      sent++;
      if (answered) await answered;
      return !ended;
    };
    const run = async () => {
      const rq = { ':method': 'POST', ':path': x.path, ':scheme': 'http', ':authority': 'gateway', 'x-request-id': x.requestId ?? `req-${Math.random().toString(36).slice(2)}`, ...x.requestHeaders };
      if (!(await send({ request_headers: { headers: headerMap(rq), end_of_stream: x.requestBody === undefined } }))) return;
      if (x.requestBody !== undefined && !(await send({ request_body: { body: Buffer.from(x.requestBody), end_of_stream: true } }))) return;
      const rs = { ':status': String(x.status ?? 200), ...x.responseHeaders };
      if (!(await send({ response_headers: { headers: headerMap(rs), end_of_stream: x.chunks.length === 0 } }))) return;
      const complete = x.complete !== false;
      for (let i = 0; i < x.chunks.length; i++) {
        const last = complete && i === x.chunks.length - 1;
        if (!(await send({ response_body: { body: Buffer.from(x.chunks[i]!), end_of_stream: last } }))) return;
      }
      if (!complete) {
        call.cancel();
        return;
      }
      if (!ended) call.end();
    };
    return run().then(async () => {
      await over;
      return { answers, code, sent };
    });
  }
}
