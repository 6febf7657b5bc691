/**
 * Envoy ext_authz (gRPC) adapter: CheckRequest → CheckInput, and a decision → CheckResponse
 * (SPEC §2, §3). Field names are proto names (`keepCase`).
 */
import type { CheckInput, CheckOutcome } from '../../authorizer.ts';
import { KEY_HEADERS, type HeaderValue } from '../../core/credentials.ts';
import { denyResponse, type DenyRenderOptions } from '../../core/deny-response.ts';
import { RpcCode } from './protos.ts';

/** The parts of AttributeContext.HttpRequest keygate reads. */
interface HttpRequestMsg {
  id?: string;
  method?: string;
  headers?: Record<string, string>;
  header_map?: { headers?: Array<{ key?: string; value?: string; raw_value?: Buffer }> };
  path?: string;
  size?: string | number;
  body?: string;
  raw_body?: Buffer;
  /**
   * Not a proto field: a transport's own lookup over the `headers` map (the lean transport reads the
   * encoded map on demand instead of decoding every header). Same semantics as the map.
   */
  lookup?: (name: string) => HeaderValue;
}

export interface CheckRequestMsg {
  attributes?: {
    request?: { http?: HttpRequestMsg };
    context_extensions?: Record<string, string>;
  };
}

const EMPTY: Record<string, string> = {};

/** Header lookup over `headers` (map, repeats joined with ",") or `header_map` (raw, repeats separate). */
function headerLookup(http: HttpRequestMsg): (name: string) => HeaderValue {
  const map = http.headers;
  const list = http.header_map?.headers;
  if ((map === undefined || Object.keys(map).length === 0) && list && list.length > 0) {
    return (name) => {
      let found: string[] | undefined;
      for (const h of list) {
        if (h.key?.toLowerCase() !== name) continue;
        const v = h.raw_value && h.raw_value.length > 0 ? h.raw_value.toString('latin1') : (h.value ?? '');
        (found ??= []).push(v);
      }
      return found === undefined ? undefined : found.length === 1 ? found[0] : found;
    };
  }
  const m = map ?? EMPTY;
  return (name) => (Object.hasOwn(m, name) ? m[name] : undefined);
}

export function checkInputFromEnvoy(req: CheckRequestMsg): CheckInput {
  const http = req.attributes?.request?.http ?? {};
  const header = http.lookup ?? headerLookup(http);
  const rawBody = http.raw_body && http.raw_body.length > 0 ? http.raw_body : undefined;
  const body = rawBody ?? (http.body !== undefined && http.body !== '' ? http.body : undefined);
  const partial = header('x-envoy-auth-partial-body');
  const declared = Number(http.size ?? -1);
  const got = rawBody ? rawBody.length : body !== undefined ? Buffer.byteLength(body as string) : 0;
  const bodyTruncated = partial === 'true' || (declared > 0 && got < declared && body !== undefined);
  const rid = header('x-request-id');
  return {
    header,
    method: http.method ?? '',
    path: http.path ?? '',
    protocol: req.attributes?.context_extensions?.protocol,
    body,
    bodyTruncated,
    requestId: typeof rid === 'string' && rid !== '' ? rid : http.id || undefined,
  };
}

export interface ResponseOptions extends DenyRenderOptions {
  readonly accountHeader: string;
  readonly keyIdHeader: string;
  readonly stripKeyHeaders: boolean;
}

const overwrite = (key: string, value: string) => ({ header: { key, value }, append: { value: false } });

/** google.protobuf.Value: protobufjs bundles the well-known types with camelCase field names. */
function str(v: string) {
  return { stringValue: v };
}

export function checkResponse(outcome: CheckOutcome, opts: ResponseOptions): object {
  const d = outcome.decision;
  if (d.allow) {
    const fields: Record<string, { stringValue: string }> = {
      account_id: str(d.accountId),
      key_id: str(d.keyId),
    };
    if (d.model !== null) fields.model = str(d.model);
    return {
      status: { code: RpcCode.OK },
      ok_response: {
        headers: [overwrite(opts.accountHeader, d.accountId), overwrite(opts.keyIdHeader, d.keyId)],
        headers_to_remove: opts.stripKeyHeaders ? KEY_HEADERS : [],
      },
      dynamic_metadata: { fields },
    };
  }
  const r = denyResponse(outcome.family, d, outcome.requestId, opts);
  const rpc = d.status === 401 ? RpcCode.UNAUTHENTICATED : d.status === 503 ? RpcCode.UNAVAILABLE : RpcCode.PERMISSION_DENIED;
  return {
    status: { code: rpc, message: d.code },
    denied_response: {
      status: { code: r.status },
      headers: r.headers.map(([k, v]) => overwrite(k, v)),
      body: r.body,
    },
  };
}
