/**
 * Phase 1 of a check: find the one API key a request carries.
 * Pure: header values in, a credential verdict out. No key is ever logged from here.
 */
export const KEY_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key'] as const;
export type KeyHeader = (typeof KEY_HEADERS)[number];

/** A header's value as a transport sees it: one string (Envoy joins repeats with ","), or several. */
export type HeaderValue = string | readonly string[] | undefined;

export type Credential =
  | { readonly kind: 'missing' }
  | { readonly kind: 'ambiguous' }
  | { readonly kind: 'bad-scheme' }
  | { readonly kind: 'key'; readonly key: string; readonly header: KeyHeader };

const MISSING: Credential = { kind: 'missing' };
const AMBIGUOUS: Credential = { kind: 'ambiguous' };
const BAD_SCHEME: Credential = { kind: 'bad-scheme' };

/** Trim HTTP optional whitespace (SP, HTAB) only, as an HTTP parser does. */
export function trimOws(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

const NONE = 0;
const ONE = 1;
const MANY = 2;

/** How many non-empty values a header carries, and the single one when there is exactly one. */
function single(value: HeaderValue): { count: 0 | 1 | 2; value: string } {
  if (value === undefined) return { count: NONE, value: '' };
  if (typeof value === 'string') {
    const v = trimOws(value);
    if (v.length === 0) return { count: NONE, value: '' };
    if (v.indexOf(',') !== -1) {
      // Envoy joins repeated headers with ","; a key never contains one. Count non-empty parts.
      let n = 0;
      let last = '';
      for (const part of v.split(',')) {
        const p = trimOws(part);
        if (p.length > 0) {
          n++;
          last = p;
        }
      }
      return n === 1 ? { count: ONE, value: last } : { count: n === 0 ? NONE : MANY, value: '' };
    }
    return { count: ONE, value: v };
  }
  let count: 0 | 1 | 2 = NONE;
  let found = '';
  for (const item of value as readonly string[]) {
    const s = single(item);
    if (s.count === NONE) continue;
    if (s.count === MANY || count === ONE) return { count: MANY, value: '' };
    count = ONE;
    found = s.value;
  }
  return { count, value: found };
}

/**
 * The credential a request carries. `get` returns a key header's value by lower-case name.
 * Rows: nothing non-empty → missing; two or more values → ambiguous (even the same key twice);
 * `Authorization` with a scheme other than Bearer → bad-scheme; else the key.
 */
export function findCredential(get: (name: KeyHeader) => HeaderValue): Credential {
  let auth = single(get('authorization'));
  // "Bearer" with no token is an empty credential, not a value.
  if (auth.count === ONE && /^bearer$/i.test(auth.value)) auth = { count: NONE, value: '' };
  const xApi = single(get('x-api-key'));
  const xGoog = single(get('x-goog-api-key'));
  const total = auth.count + xApi.count + xGoog.count;
  if (total === 0) return MISSING;
  if (total > 1) return AMBIGUOUS;
  if (auth.count === ONE) {
    const v = auth.value;
    const sp = v.search(/[ \t]/);
    const scheme = sp === -1 ? v : v.slice(0, sp);
    if (scheme.toLowerCase() !== 'bearer') return BAD_SCHEME;
    const token = sp === -1 ? '' : trimOws(v.slice(sp + 1));
    if (token.length === 0) return MISSING;
    return { kind: 'key', key: token, header: 'authorization' };
  }
  if (xApi.count === ONE) return { kind: 'key', key: xApi.value, header: 'x-api-key' };
  return { kind: 'key', key: xGoog.value, header: 'x-goog-api-key' };
}
