/**
 * Envoy's ext_authz Check, for every transport: a typed view of a CheckRequest → `CheckInput`, and
 * a `CheckOutcome` → a typed CheckResponse. Field names are the proto names; a gRPC server decodes
 * into `CheckRequestMsg` and encodes `CheckResponse` (h2: its own codec; grpc-js: protobufjs).
 */
import type { CheckInput, CheckOutcome } from '../../authorizer.ts';
import { KEY_HEADERS, type HeaderValue } from '../../core/credentials.ts';
import type { Allow, AllowRate } from '../../core/decision.ts';
import { totalLimitMetadata } from '../../core/rate.ts';
import { denyResponse } from '../../core/deny-response.ts';
import type { ResponseOptions } from '../response-options.ts';
import { GrpcStatus } from './grpc.ts';
import { BOOKING_ID_FIELD } from '../../core/booking-id.ts';
import { PLACEHOLDER_BOOKING_ID } from '../booking-id.ts';

/** The parts of AttributeContext.HttpRequest keygate reads. */
interface HttpRequestMsg {
  id?: string;
  method?: string;
  headers?: Record<string, string>;
  header_map?: { headers?: Array<{ key?: string; value?: string; raw_value?: Buffer }> };
  path?: string;
  size?: string | number;
  body?: string;
  /**
   * Not a proto field: the `body` field's bytes when they are valid UTF-8 (the h2 server leaves them
   * in the message instead of decoding a string). Same text as `body`; set instead of it.
   */
  body_utf8?: Buffer;
  raw_body?: Buffer;
  /**
   * Not a proto field: a transport's own lookup over the `headers` map (the h2 server reads the
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
  const textBytes = http.body_utf8 && http.body_utf8.length > 0 ? http.body_utf8 : undefined;
  const body = rawBody ?? textBytes ?? (http.body !== undefined && http.body !== '' ? http.body : undefined);
  const partial = header('x-envoy-auth-partial-body');
  const declared = Number(http.size ?? -1);
  const got = body === undefined ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.length;
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

/** envoy.config.core.v3.HeaderValueOption, as keygate sets it (always overwrite). */
export interface HeaderValueOption {
  readonly header: { readonly key: string; readonly value: string };
  readonly append: { readonly value: boolean };
}

/** A google.protobuf.Value as keygate sets it (protobufjs bundles the well-known types with camelCase names). */
export type MetadataValue =
  | { readonly stringValue: string }
  | { readonly numberValue: number }
  | { readonly structValue: { readonly fields: Readonly<Record<string, MetadataValue>> } };

/**
 * envoy.service.auth.v3.CheckResponse, the fields keygate sets. `dynamic_metadata` is a
 * google.protobuf.Struct: string values, and `total_limit` (a struct) for a rate-limited key.
 * `response_headers_to_add` (OkHttpResponse field 6) are added by Envoy to the response the client
 * gets (the `x-ratelimit-*` headers).
 */
export interface CheckResponse {
  readonly status: { readonly code: number; readonly message?: string };
  readonly ok_response?: {
    readonly headers: readonly HeaderValueOption[];
    readonly headers_to_remove: readonly string[];
    readonly response_headers_to_add?: readonly HeaderValueOption[];
  };
  readonly denied_response?: { readonly status: { readonly code: number }; readonly headers: readonly HeaderValueOption[]; readonly body: string };
  readonly dynamic_metadata?: { readonly fields: Readonly<Record<string, MetadataValue>> };
}

/** `append: false` of every option keygate sets: one shared value (options are read, never written). */
const NO_APPEND: HeaderValueOption['append'] = Object.freeze({ value: false });

export const overwrite = (key: string, value: string): HeaderValueOption => ({ header: { key, value }, append: NO_APPEND });

/**
 * The parts of an allow its response is made of, besides `rate`. An allow without `rate` (a key and
 * account without rates) has a response that is a function of these and the fixed options alone, so
 * a server may keep its encoded bytes under `allowKey`: a field read here must be listed here, and is
 * then part of the key. An allow with `rate` carries headers that change with every request: its
 * response is built each time (`allowResponse(parts, opts, rate)`), never kept.
 */
const ALLOW_PARTS = ['accountId', 'keyId', 'model'] as const;
/**
 * `upstream` (an account's own credential) is not part of `allowKey`: an allow that carries one is
 * never kept under that key (its bytes hold the secret), only by the allow's identity, which lives
 * as long as the cached credential version (`CheckAnswers`).
 */
export type AllowParts = Pick<Allow, (typeof ALLOW_PARTS)[number] | 'upstream'>;

export function allowParts(d: Allow): AllowParts {
  return d.upstream === undefined ? { accountId: d.accountId, keyId: d.keyId, model: d.model } : { accountId: d.accountId, keyId: d.keyId, model: d.model, upstream: d.upstream };
}

/**
 * The key headers removed upstream: all three, but the one the account's own credential is set in
 * (Envoy applies an answer's removals after its sets, so a removed header would drop the credential).
 */
export function headersToRemove(opts: ResponseOptions, upstream: AllowParts['upstream']): readonly string[] {
  if (!opts.stripKeyHeaders) return [];
  if (upstream === undefined) return KEY_HEADERS;
  return KEY_HEADERS.filter((h) => h !== upstream.header);
}

/** A string that differs whenever any allow part differs (length-prefixed; `null` kept apart from any string). */
export function allowKey(p: AllowParts): string {
  let k = '';
  for (const f of ALLOW_PARTS) {
    const v = p[f];
    k += v === null ? '-;' : `${v.length}:${v};`;
  }
  return k;
}

/**
 * The allow's CheckResponse. Its dynamic metadata ends with `booking_id` (the last Struct entry of
 * the last field: the id is the answer's last bytes, which `CheckAnswers` replaces per request in
 * kept bytes); `bookingId` defaults to the placeholder those kept bytes carry.
 */
export function allowResponse(p: AllowParts, opts: ResponseOptions, rate: AllowRate | null = null, bookingId: string = PLACEHOLDER_BOOKING_ID): CheckResponse {
  const fields: Record<string, MetadataValue> = { account_id: { stringValue: p.accountId }, key_id: { stringValue: p.keyId } };
  if (p.model !== null) fields.model = { stringValue: p.model };
  const ok: { headers: HeaderValueOption[]; headers_to_remove: readonly string[]; response_headers_to_add?: HeaderValueOption[] } = {
    headers: [overwrite(opts.accountHeader, p.accountId), overwrite(opts.keyIdHeader, p.keyId)],
    headers_to_remove: headersToRemove(opts, p.upstream),
  };
  // The account's own credential in place of the gateway's (OVERWRITE): the upstream sees it alone.
  if (p.upstream !== undefined) ok.headers.push(overwrite(p.upstream.header, p.upstream.value));
  if (rate !== null) {
    if (rate.headers.length > 0) ok.response_headers_to_add = rate.headers.map(([k, v]) => overwrite(k, v));
    if (rate.limit !== null) {
      const t = totalLimitMetadata(rate.limit).total_limit;
      fields.total_limit = { structValue: { fields: { requests_per_unit: { numberValue: t.requests_per_unit }, unit: { stringValue: t.unit } } } };
    }
  }
  fields[BOOKING_ID_FIELD] = { stringValue: bookingId }; // last (see above)
  return { status: { code: GrpcStatus.OK }, ok_response: ok, dynamic_metadata: { fields } };
}

/** The gRPC code in a deny's CheckResponse.status, by its HTTP status. */
export function denyRpcCode(httpStatus: number): number {
  if (httpStatus === 429) return GrpcStatus.RESOURCE_EXHAUSTED;
  return httpStatus === 401 ? GrpcStatus.UNAUTHENTICATED : httpStatus === 503 ? GrpcStatus.UNAVAILABLE : GrpcStatus.PERMISSION_DENIED;
}

export function checkResponse(outcome: CheckOutcome, opts: ResponseOptions, bookingId?: string): CheckResponse {
  const d = outcome.decision;
  if (d.allow) return allowResponse(allowParts(d), opts, d.rate ?? null, bookingId);
  const r = denyResponse(outcome.family, d, outcome.requestId, opts);
  return {
    status: { code: denyRpcCode(d.status), message: d.code },
    denied_response: {
      status: { code: r.status },
      headers: r.headers.map(([k, v]) => overwrite(k, v)),
      body: r.body,
    },
  };
}
