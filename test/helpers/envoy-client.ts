/**
 * A gRPC client built from Envoy's own protos that calls Check the way Envoy does: lower-case
 * header names, repeated headers joined with ",", body per `with_request_body`, per-route
 * `context_extensions`.
 */
import * as grpc from '@grpc/grpc-js';
import { authorizationService } from '../../proto/envoy-protos.ts';

export interface EnvoyRequest {
  method?: string;
  path: string;
  headers?: Record<string, string | string[]>;
  contextExtensions?: Record<string, string>;
  body?: Buffer | string;
  /** Envoy's allow_partial_message: body cut short, with x-envoy-auth-partial-body: true. */
  partial?: boolean;
  rawHeaders?: boolean;
}

export interface CheckResponseMsg {
  status?: { code?: number; message?: string };
  ok_response?: {
    headers?: Array<{ header: { key: string; value: string }; append?: { value: boolean } }>;
    headers_to_remove?: string[];
    response_headers_to_add?: Array<{ header: { key: string; value: string }; append?: { value: boolean } }>;
  };
  denied_response?: {
    status?: { code?: number };
    headers?: Array<{ header: { key: string; value: string }; append?: { value: boolean } }>;
    body?: string;
  };
  dynamic_metadata?: { fields?: Record<string, { stringValue?: string; numberValue?: number; structValue?: { fields?: Record<string, { stringValue?: string; numberValue?: number }> } }> };
}

export function checkRequest(r: EnvoyRequest): object {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers ?? {})) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(',') : v;
  if (r.partial) headers['x-envoy-auth-partial-body'] = 'true';
  const http: Record<string, unknown> = {
    id: '1234',
    method: r.method ?? 'POST',
    path: r.path,
    host: 'gateway.test',
    scheme: 'https',
    protocol: 'HTTP/1.1',
  };
  if (r.rawHeaders) {
    http.header_map = {
      headers: Object.entries(r.headers ?? {}).flatMap(([k, v]) =>
        (Array.isArray(v) ? v : [v]).map((x) => ({ key: k.toLowerCase(), raw_value: Buffer.from(x) })),
      ),
    };
  } else {
    http.headers = headers;
  }
  if (r.body !== undefined) {
    const b = Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body);
    http.raw_body = b;
    http.size = String(r.partial ? b.length * 2 : b.length);
  }
  return {
    attributes: {
      source: { address: { socket_address: { address: '10.0.0.1', port_value: 5555 } } },
      request: { time: { seconds: String(Math.floor(Date.now() / 1000)) }, http },
      context_extensions: r.contextExtensions ?? {},
    },
  };
}

export class EnvoyClient {
  readonly #client: grpc.Client;
  constructor(target: string) {
    const Ctor = grpc.makeGenericClientConstructor(authorizationService().service, 'Authorization');
    this.#client = new Ctor(target, grpc.credentials.createInsecure());
  }

  check(r: EnvoyRequest, deadlineMs = 5000): Promise<CheckResponseMsg> {
    return this.raw(checkRequest(r), deadlineMs);
  }

  raw(msg: object, deadlineMs = 5000): Promise<CheckResponseMsg> {
    return new Promise((resolve, reject) => {
      (this.#client as unknown as Record<string, Function>).Check!(
        msg,
        { deadline: Date.now() + deadlineMs },
        (err: grpc.ServiceError | null, res: CheckResponseMsg) => (err ? reject(err) : resolve(res)),
      );
    });
  }

  close(): void {
    this.#client.close();
  }
}

/** Deny helpers for assertions. */
export function deniedBody(res: CheckResponseMsg): any {
  if (!res.denied_response) throw new Error(`expected a deny, got ${JSON.stringify(res)}`);
  return JSON.parse(res.denied_response.body ?? '');
}

export function deniedHeaders(res: CheckResponseMsg): Record<string, string> {
  return Object.fromEntries((res.denied_response?.headers ?? []).map((h) => [h.header.key, h.header.value]));
}

export function okHeaders(res: CheckResponseMsg): Record<string, string> {
  return Object.fromEntries((res.ok_response?.headers ?? []).map((h) => [h.header.key, h.header.value]));
}

/** The headers an allow asks Envoy to add to the client's response (`response_headers_to_add`). */
export function responseHeadersToAdd(res: CheckResponseMsg): Record<string, string> {
  return Object.fromEntries((res.ok_response?.response_headers_to_add ?? []).map((h) => [h.header.key, h.header.value]));
}
