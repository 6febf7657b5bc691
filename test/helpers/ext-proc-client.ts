/**
 * An Envoy-faithful ext_proc client for tests (like `envoy-client.ts` for Check): opens
 * `envoy.service.ext_proc.v3.ExternalProcessor/Process` with @grpc/grpc-js and sends one HTTP
 * exchange the way the ext_proc filter does — request headers (with the ext_authz metadata
 * forwarded), the request body when the route sends it, response headers, the response body in
 * chunks (STREAMED), trailers skipped — encoded by the one Envoy-side encoder
 * (`src/transport/envoy/ext-proc-envoy.ts`, checked against Envoy's protos in
 * test/unit/ext-proc-envoy.test.ts); the answers are decoded with Envoy's own protos. Without
 * `observability`, every message waits for its answer (as Envoy does); in observability mode
 * nothing is awaited. A stream the server ends early (OK) stops the exchange there, as Envoy stops
 * sending.
 */
import * as grpc from '@grpc/grpc-js';
import { loadEnvoyProtos } from '../../proto/envoy-protos.ts';
import { exchangeParts, forwardedFields, processingRequest } from '../../src/transport/envoy/ext-proc-envoy.ts';

const def = loadEnvoyProtos(['envoy/service/ext_proc/v3/external_processor.proto']);
const service = def['envoy.service.ext_proc.v3.ExternalProcessor'] as grpc.ServiceDefinition;
// requests go out as the encoder's bytes; answers are decoded by proto-loader
const Processor = grpc.makeGenericClientConstructor({ Process: { ...service.Process!, requestSerialize: (b: Buffer) => b } }, 'ExternalProcessor');

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

export class ExtProcClient {
  readonly #client: grpc.Client & { Process(): grpc.ClientDuplexStream<Buffer, Record<string, unknown>> };

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
    const obs = x.observability === true;
    const forwarded = forwardedFields(x.identity, obs);
    const send = async (m: Buffer): Promise<boolean> => {
      if (ended) return false;
      const answered = obs ? null : new Promise<void>((r) => (waiting = r));
      call.write(m);
      sent++;
      if (answered) await answered;
      return !ended;
    };
    const run = async () => {
      const parts = exchangeParts({
        requestHeaders: { ':method': 'POST', ':path': x.path, ':scheme': 'http', ':authority': 'gateway', 'x-request-id': x.requestId ?? `req-${Math.random().toString(36).slice(2)}`, ...x.requestHeaders },
        requestBody: x.requestBody === undefined ? undefined : Buffer.from(x.requestBody),
        responseHeaders: { ':status': String(x.status ?? 200), ...x.responseHeaders },
        chunks: x.chunks.map((c) => Buffer.from(c)),
        complete: x.complete,
      });
      for (const p of parts) if (!(await send(processingRequest(p, forwarded)))) return;
      if (x.complete === false) {
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
