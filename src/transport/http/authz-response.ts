/**
 * HTTP external authorization, response side: a decision → status, headers, body.
 *
 * - Allow: 200, empty body, the identity headers for the proxy to copy upstream,
 *   `x-envoy-auth-headers-to-remove` naming the key headers (Envoy `http_service` honours it;
 *   other proxies strip them in their own config), and the request's booking id in
 *   `x-keygate-booking-id` for the proxy to hand to metering (Envoy: `dynamic_metadata_from_headers`;
 *   docs/metering.md, "Which key, which booking id").
 * - Deny (modes `envoy`, `forward`): the status, headers and body of a deny (`src/core/deny-response.ts`), for the proxy to copy
 *   to the client as they are.
 * - Deny (mode `nginx`): nginx `auth_request` passes only 401 and 403 and drops the body, so the
 *   answer is 401 (for 401) or 403 (for 400, 402, 403, 429, 503), and the real status and the whole body
 *   travel in `x-keygate-status` and `x-keygate-body` for the shipped nginx snippet to replay
 *   (`deploy/nginx/keygate.conf`).
 */
import type { CheckOutcome } from '../../authorizer.ts';
import { KEY_HEADERS } from '../../core/credentials.ts';
import { denyResponse } from '../../core/deny-response.ts';
import type { ResponseOptions } from '../response-options.ts';
import type { AuthzMode } from './authz-request.ts';
import { BOOKING_ID_HEADER } from '../../core/booking-id.ts';
import { nextBookingId } from '../booking-id.ts';

export interface AuthzResponse {
  readonly status: number;
  readonly headers: Array<[string, string]>;
  readonly body: string;
}

export const STATUS_HEADER = 'x-keygate-status';
export const BODY_HEADER = 'x-keygate-body';
const REMOVE_HEADER = 'x-envoy-auth-headers-to-remove';
const KEY_HEADER_LIST = KEY_HEADERS.join(',');

/**
 * JSON made safe for a header value: every character outside printable ASCII becomes a `\uXXXX`
 * escape. Outside strings, deny bodies are ASCII; inside them an escape is the same JSON text.
 */
export function headerSafeJson(json: string): string {
  return json.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function authzResponse(outcome: CheckOutcome, mode: AuthzMode, opts: ResponseOptions): AuthzResponse {
  const d = outcome.decision;
  if (d.allow) {
    const headers: Array<[string, string]> = [
      [opts.accountHeader, d.accountId],
      [opts.keyIdHeader, d.keyId],
      ['x-request-id', outcome.requestId],
      ['cache-control', 'no-store'],
      [BOOKING_ID_HEADER, nextBookingId()],
    ];
    // The account's own credential (SPEC 18) in place of the gateway's; it is then not among the removed headers.
    if (d.upstream !== undefined) headers.push([d.upstream.header, d.upstream.value]);
    if (opts.stripKeyHeaders) headers.push([REMOVE_HEADER, d.upstream === undefined ? KEY_HEADER_LIST : KEY_HEADERS.filter((h) => h !== d.upstream!.header).join(',')]);
    if (d.rate) for (const [k, v] of d.rate.headers) headers.push([k, v]);
    return { status: 200, headers, body: '' };
  }
  const r = denyResponse(outcome.family, d, outcome.requestId, opts);
  const headers: Array<[string, string]> = r.headers.map(([k, v]) => [k, v]);
  headers.push(['cache-control', 'no-store']);
  if (mode !== 'nginx') return { status: r.status, headers, body: r.body };
  headers.push([STATUS_HEADER, String(r.status)], [BODY_HEADER, headerSafeJson(r.body)]);
  return { status: r.status === 401 ? 401 : 403, headers, body: r.body };
}
