/**
 * Asking OpenAI for usage on a stream: an OpenAI streamed chat or completions request without
 * `stream_options.include_usage: true` gets no usage chunk, so keygate sets it in the request body
 * Envoy sends it (buffered). The body is changed by splicing bytes, never re-serialised: everything
 * else (the model the authorization read, numbers past 2^53, key order, spacing) stays byte for
 * byte as the client sent it.
 *
 * The body must be valid UTF-8 JSON (`JSON.parse` accepts it), an object with `stream: true`; a
 * body with the key `stream_options` twice at the top level (readers disagree on which wins) is
 * left alone. Cases: no `stream_options` → `"stream_options":{"include_usage":true},` is inserted
 * first; an object without `include_usage` → `"include_usage":true,` is inserted first in it; an
 * `include_usage` that is not `true` → its value is replaced (the last one, which JSON.parse reads,
 * when it appears twice); `stream_options` that is not an object → replaced by the object.
 */
import { isUtf8 } from 'node:buffer';

/** The largest body changed (larger bodies are left alone). */
export const MAX_FORCE_BODY = 4 * 1024 * 1024;

export type ForceUsage =
  | { readonly kind: 'changed'; readonly body: Buffer }
  | { readonly kind: 'unchanged'; readonly reason: 'not-streamed' | 'already-set' }
  | { readonly kind: 'refused'; readonly reason: 'too-large' | 'invalid-json' | 'not-object' | 'duplicate-key' };

const INCLUDE = '{"include_usage":true}';

interface Member {
  readonly key: string;
  /** The value's range in the text. */
  readonly start: number;
  readonly end: number;
}

function skipWs(t: string, i: number): number {
  while (i < t.length) {
    const c = t.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    i++;
  }
  return i;
}

/** `t[i]` is `"`: the index after the closing quote (the text is valid JSON). */
function skipString(t: string, i: number): number {
  i++;
  for (;;) {
    const c = t.charCodeAt(i);
    if (c === 0x22) return i + 1;
    i += c === 0x5c ? 2 : 1;
  }
}

/** The index after the value at `i` (valid JSON). */
function skipValue(t: string, i: number): number {
  let depth = 0;
  do {
    const c = t.charCodeAt(i);
    if (c === 0x22) i = skipString(t, i);
    else {
      if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d) depth--;
      i++;
      if (depth === 0 && c !== 0x7d && c !== 0x5d && c !== 0x7b && c !== 0x5b) {
        // a scalar at depth 0: runs until a delimiter
        while (i < t.length && !/[\s,}\]]/.test(t[i]!)) i++;
        return i;
      }
    }
  } while (depth > 0);
  return i;
}

/** The members of the object starting at `i` (`t[i]` is `{`), and the index of its `{`. */
function members(t: string, i: number): Member[] {
  const out: Member[] = [];
  i = skipWs(t, i + 1);
  if (t.charCodeAt(i) === 0x7d) return out;
  for (;;) {
    const ks = i;
    i = skipString(t, i);
    const key = JSON.parse(t.slice(ks, i)) as string;
    i = skipWs(t, i);
    i = skipWs(t, i + 1); // the colon
    const start = i;
    i = skipValue(t, i);
    out.push({ key, start, end: i });
    i = skipWs(t, i);
    if (t.charCodeAt(i) === 0x7d) return out;
    i = skipWs(t, i + 1); // the comma
  }
}

/** Sets `stream_options.include_usage` to true in a streamed request body (see the module comment). */
export function forceIncludeUsage(body: Uint8Array): ForceUsage {
  if (body.length > MAX_FORCE_BODY) return { kind: 'refused', reason: 'too-large' };
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.length);
  if (!isUtf8(buf)) return { kind: 'refused', reason: 'invalid-json' };
  const text = buf.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { kind: 'refused', reason: 'invalid-json' };
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return { kind: 'refused', reason: 'not-object' };
  const o = parsed as Record<string, unknown>;
  if (o.stream !== true) return { kind: 'unchanged', reason: 'not-streamed' };
  const so = o.stream_options;
  if (so !== null && typeof so === 'object' && !Array.isArray(so) && (so as Record<string, unknown>).include_usage === true) {
    return { kind: 'unchanged', reason: 'already-set' };
  }
  const open = skipWs(text, 0);
  const top = members(text, open);
  const found = top.filter((m) => m.key === 'stream_options');
  if (found.length > 1) return { kind: 'refused', reason: 'duplicate-key' };
  let out: string;
  if (found.length === 0) {
    out = `${text.slice(0, open + 1)}"stream_options":${INCLUDE},${text.slice(open + 1)}`;
  } else {
    const m = found[0]!;
    if (so === null || typeof so !== 'object' || Array.isArray(so)) {
      out = text.slice(0, m.start) + INCLUDE + text.slice(m.end);
    } else {
      const all = members(text, m.start);
      const inner = all.filter((x) => x.key === 'include_usage');
      if (inner.length === 0) {
        const empty = all.length === 0;
        out = `${text.slice(0, m.start + 1)}"include_usage":true${empty ? '' : ','}${text.slice(m.start + 1)}`;
      } else {
        const last = inner[inner.length - 1]!;
        out = `${text.slice(0, last.start)}true${text.slice(last.end)}`;
      }
    }
  }
  return { kind: 'changed', body: Buffer.from(out, 'utf8') };
}
