/**
 * What every transport's answer is shaped by, written once: the identity headers set on an allow,
 * whether the key headers are removed upstream, and the deny body's error domain.
 */
import type { DenyRenderOptions } from '../core/deny-response.ts';

export interface ResponseOptions extends DenyRenderOptions {
  readonly accountHeader: string;
  readonly keyIdHeader: string;
  readonly stripKeyHeaders: boolean;
}

/** The response options out of a wider settings object (the sidecar's config). */
export function responseOptions(c: ResponseOptions): ResponseOptions {
  return { accountHeader: c.accountHeader, keyIdHeader: c.keyIdHeader, stripKeyHeaders: c.stripKeyHeaders, errorDomain: c.errorDomain };
}
