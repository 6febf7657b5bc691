/**
 * HTTP external authorization, request side: which original request a proxy asks about.
 * Pure: the authz request's target, method and raw headers in; the original method, path and the
 * protocol the proxy speaks out.
 *
 * The original request is read from, in order:
 *   1. the path after `/authz` (Envoy `http_service` with `path_prefix: /authz`)  → mode `envoy`
 *   2. `X-Forwarded-Uri` + `X-Forwarded-Method` (Caddy `forward_auth`, Traefik)   → mode `forward`
 *   3. `X-Original-URI` + `X-Original-Method` (nginx `auth_request`)               → mode `nginx`
 * A bare `/authz` (or `/authz/`) with neither header is a request for `/`.
 */
import type { HeaderValue } from '../../core/credentials.ts';

export const AUTHZ_PREFIX = '/authz';

/** Which proxy protocol the authz request follows; decides how a deny is answered. */
export type AuthzMode = 'envoy' | 'forward' | 'nginx';

export interface OriginalRequest {
  readonly mode: AuthzMode;
  readonly method: string;
  /** Path with query string, as the client sent it. */
  readonly path: string;
}

/** A misconfigured proxy: the authz request cannot name an original request. */
export class BadAuthzRequest extends Error {
  override name = 'BadAuthzRequest';
}

/** An HTTP method token (RFC 9110 §5.6.2), bounded. */
const METHOD = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/;
/** Longest original request target accepted from a header (the header-size limit bounds it too). */
export const MAX_TARGET_LENGTH = 16 * 1024;

/**
 * Header lookup over Node's `rawHeaders` ([name, value, name, value, …]): one value as a string,
 * repeats as an array (so a repeated `Authorization` stays ambiguous; Node's own `headers` object
 * would silently keep only the first).
 */
export function rawHeaderLookup(raw: readonly string[]): (name: string) => HeaderValue {
  return (name) => {
    let one: string | undefined;
    let many: string[] | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const n = raw[i]!;
      if (n.length !== name.length || n.toLowerCase() !== name) continue;
      const v = raw[i + 1]!;
      if (many !== undefined) many.push(v);
      else if (one !== undefined) many = [one, v];
      else one = v;
    }
    return many ?? one;
  };
}

/** A header that must appear at most once (proxy-set metadata); repeats are a misconfiguration. */
function soleHeader(header: (name: string) => HeaderValue, name: string): string | undefined {
  const v = header(name);
  if (v === undefined || typeof v === 'string') return v;
  throw new BadAuthzRequest(`the ${name} header is repeated`);
}

function target(value: string, from: string): string {
  if (value.length === 0 || value.charCodeAt(0) !== 47 /* / */ || value.length > MAX_TARGET_LENGTH) {
    throw new BadAuthzRequest(`${from} must be an origin-form request target (a path starting with "/")`);
  }
  return value;
}

function method(value: string | undefined, fallback: string, from: string): string {
  if (value === undefined) return fallback;
  if (!METHOD.test(value)) throw new BadAuthzRequest(`${from} is not an HTTP method`);
  return value.toUpperCase();
}

/**
 * The original request behind an authz request, or null when `url` is not under `/authz` (→ 404).
 * Throws BadAuthzRequest when a proxy header is malformed.
 */
export function originalRequest(url: string, authzMethod: string, header: (name: string) => HeaderValue): OriginalRequest | null {
  if (!url.startsWith(AUTHZ_PREFIX)) return null;
  const rest = url.slice(AUTHZ_PREFIX.length);
  const next = rest.charCodeAt(0);
  if (rest.length > 0 && next !== 47 /* / */ && next !== 63 /* ? */) return null;

  if (next === 47 && rest.length > 1 && rest.charCodeAt(1) !== 63) {
    return { mode: 'envoy', method: method(undefined, authzMethod, ''), path: rest };
  }
  const fwd = soleHeader(header, 'x-forwarded-uri');
  if (fwd !== undefined) {
    return {
      mode: 'forward',
      method: method(soleHeader(header, 'x-forwarded-method'), authzMethod, 'X-Forwarded-Method'),
      path: target(fwd, 'X-Forwarded-Uri'),
    };
  }
  const orig = soleHeader(header, 'x-original-uri');
  if (orig !== undefined) {
    return {
      mode: 'nginx',
      method: method(soleHeader(header, 'x-original-method'), authzMethod, 'X-Original-Method'),
      path: target(orig, 'X-Original-URI'),
    };
  }
  return { mode: 'envoy', method: method(undefined, authzMethod, ''), path: '/' };
}
