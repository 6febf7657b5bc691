/**
 * A deny as the client's SDK expects it: status, headers and a body in the entry family's
 * own error shape, with the deny code machine-readable. Pure; bodies are built by string
 * concatenation of pre-escaped fragments (no JSON.stringify of objects on the hot path).
 */
import { DENY_MESSAGE } from './codes.ts';
import type { Deny } from './decision.ts';
import type { Family } from './families/index.ts';
import { retryHeaders } from './rate.ts';

export interface DenyResponse {
  readonly status: number;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: string;
}

const OPENAI_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  429: 'rate_limit_error',
  503: 'server_error',
};
const ANTHROPIC_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  429: 'rate_limit_error',
  503: 'api_error',
};
const GOOGLE_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'FAILED_PRECONDITION',
  403: 'PERMISSION_DENIED',
  429: 'RESOURCE_EXHAUSTED',
  503: 'UNAVAILABLE',
};

export interface DenyRenderOptions {
  /** `domain` of Google's ErrorInfo. */
  readonly errorDomain: string;
}

function message(d: Deny): string {
  if (d.message !== undefined) return d.message;
  return d.detail === undefined ? DENY_MESSAGE[d.code] : `${d.detail} ${DENY_MESSAGE[d.code]}`;
}

/** JSON string literal; request ids and details are hostile input too. */
const q = JSON.stringify as (s: string) => string;

export function denyBody(family: Family, d: Deny, requestId: string, opts: DenyRenderOptions): string {
  const msg = q(message(d));
  const code = q(d.code);
  switch (family) {
    case 'openai':
      return `{"error":{"message":${msg},"type":"${OPENAI_TYPE[d.status]}","param":null,"code":${code}}}`;
    case 'anthropic':
      return `{"type":"error","error":{"type":"${ANTHROPIC_TYPE[d.status]}","message":${msg},"code":${code}},"request_id":${q(requestId)}}`;
    case 'google':
      return (
        `{"error":{"code":${d.status},"message":${msg},"status":"${GOOGLE_STATUS[d.status]}",` +
        `"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":${code},"domain":${q(opts.errorDomain)},` +
        `"metadata":{"code":${code},"request_id":${q(requestId)}}}]}}`
      );
  }
}

export function denyResponse(family: Family, d: Deny, requestId: string, opts: DenyRenderOptions): DenyResponse {
  const headers: [string, string][] = [
    ['content-type', 'application/json'],
    ['x-request-id', requestId],
  ];
  if (family === 'anthropic') headers.push(['request-id', requestId]);
  if (d.retryAfterMs !== undefined) {
    // A rate refusal (429): the wait to the window that admits the request, and no
    // `x-should-retry: false`, so the SDKs wait and retry.
    headers.push(...retryHeaders(d.retryAfterMs, 0));
  } else if (d.status < 500) headers.push(['x-should-retry', 'false']);
  else headers.push(['retry-after', '1']);
  return { status: d.status, headers, body: denyBody(family, d, requestId, opts) };
}
