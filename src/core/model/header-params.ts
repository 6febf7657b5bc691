/**
 * Strict reading of `value *( ";" param )` headers: Content-Type and a multipart part's
 * Content-Disposition. Anything a lenient parser might read another way (backslash escapes in
 * quoted strings, repeated or RFC 2231 `name*` parameters, stray characters) is refused (null).
 */

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export interface HeaderWithParams {
  /** The leading value, lower-cased (`multipart/form-data`, `form-data`). */
  readonly value: string;
  /** Parameters by lower-cased name. */
  readonly params: ReadonlyMap<string, string>;
}

/** `leading` checks the value before the first `;` (already trimmed and lower-cased). */
export function parseHeaderParams(header: string, leading: (v: string) => boolean): HeaderWithParams | null {
  const n = header.length;
  let i = header.indexOf(';');
  if (i === -1) i = n;
  const value = header.slice(0, i).trim().toLowerCase();
  if (!leading(value)) return null;
  const params = new Map<string, string>();
  while (i < n) {
    i++; // past ';'
    while (i < n && (header[i] === ' ' || header[i] === '\t')) i++;
    if (i >= n) break;
    if (header[i] === ';') continue;
    const eq = header.indexOf('=', i);
    if (eq === -1) return null;
    const name = header.slice(i, eq).trim().toLowerCase();
    if (!TOKEN.test(name) || name.includes('*') || params.has(name)) return null;
    i = eq + 1;
    let v: string;
    if (header[i] === '"') {
      const close = header.indexOf('"', i + 1);
      if (close === -1) return null;
      v = header.slice(i + 1, close);
      if (v.includes('\\')) return null;
      i = close + 1;
    } else {
      let end = header.indexOf(';', i);
      if (end === -1) end = n;
      v = header.slice(i, end).trim();
      if (!TOKEN.test(v)) return null;
      i = end;
    }
    while (i < n && (header[i] === ' ' || header[i] === '\t')) i++;
    if (i < n && header[i] !== ';') return null;
    params.set(name, v);
  }
  return { value, params };
}

const MEDIA_TYPE = /^[!#$%&'*+.^_`|~0-9a-z-]+\/[!#$%&'*+.^_`|~0-9a-z-]+$/;

/** A Content-Type header: `type/subtype` plus parameters; null when it cannot be read strictly. */
export function parseContentType(header: string): HeaderWithParams | null {
  return parseHeaderParams(header, (v) => MEDIA_TYPE.test(v));
}

/** A charset parameter that means UTF-8 (US-ASCII is a subset). Absent counts as UTF-8 for JSON. */
export function isUtf8Charset(charset: string | undefined): boolean {
  if (charset === undefined) return true;
  const c = charset.toLowerCase();
  return c === 'utf-8' || c === 'utf8' || c === 'us-ascii';
}
