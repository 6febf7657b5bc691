/**
 * A deny as the client's SDK expects it: status, headers and a body in the entry family's
 * own error shape (its module's `deny`, src/core/families/), with the deny code
 * machine-readable. Pure; bodies are built by string concatenation of pre-escaped fragments
 * (no JSON.stringify of objects on the hot path).
 */
import { DENY_MESSAGE } from './codes.ts';
import type { Deny } from './decision.ts';
import { familyModule, type Family } from './families/index.ts';
import { retryHeaders } from './rate.ts';

export interface DenyResponse {
  readonly status: number;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: string;
}

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
  return familyModule(family).deny.body(d.status, q(message(d)), q(d.code), requestId, opts.errorDomain, q);
}

export function denyResponse(family: Family, d: Deny, requestId: string, opts: DenyRenderOptions): DenyResponse {
  const headers: [string, string][] = [
    ['content-type', 'application/json'],
    ['x-request-id', requestId],
  ];
  if (familyModule(family).deny.requestIdHeader) headers.push(['request-id', requestId]);
  if (d.retryAfterMs !== undefined) {
    // A rate refusal (429): the wait to the window that admits the request, and no
    // `x-should-retry: false`, so the SDKs wait and retry.
    headers.push(...retryHeaders(d.retryAfterMs, 0));
  } else if (d.status < 500) headers.push(['x-should-retry', 'false']);
  else headers.push(['retry-after', '1']);
  return { status: d.status, headers, body: denyBody(family, d, requestId, opts) };
}
