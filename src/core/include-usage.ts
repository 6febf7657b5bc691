/**
 * Asking OpenAI for usage on a stream: an OpenAI streamed chat or completions request without
 * `stream_options.include_usage: true` gets no usage chunk, so keygate sets it in the request body
 * Envoy sends it (buffered). The body is changed by splicing bytes, never re-serialised: everything
 * else (the model the authorization read, numbers past 2^53, key order, spacing) stays byte for
 * byte as the client sent it.
 *
 * Usage cannot be switched off by the client (docs/metering.md, "Asking for usage"): a body that
 * cannot be made to ask is `refused` (the session answers 400 `USAGE_NOT_GUARANTEED`), never passed
 * on unchanged: not valid UTF-8 JSON, not an object, larger than `MAX_FORCE_BODY`, or with `stream`
 * or `stream_options` twice at the top level (readers disagree on which wins). A body is streamed
 * unless `stream` is absent, `false` or `null`. Cases: no `stream_options` →
 * `"stream_options":{"include_usage":true},` is inserted first; an object without `include_usage`
 * → `"include_usage":true,` is inserted first in it; `include_usage` not `true` (in any of its
 * occurrences, when repeated) → every occurrence's value replaced by `true`; `stream_options` that
 * is not an object → replaced by the object.
 */
import { isUtf8 } from 'node:buffer';
import { scanTopLevelKeys, type KeyNames, type TopLevelObject } from './model/json-scan.ts';

/**
 * The largest body changed: above what the shipped envoy.yaml sends (its buffer limit is 9 MiB), so
 * every body Envoy sends whole is rewritten; a larger one is refused, never passed on unchanged.
 */
export const MAX_FORCE_BODY = 16 * 1024 * 1024;

/** Why a streamed request cannot be made to ask for usage (the request is then refused, 400 `USAGE_NOT_GUARANTEED`). */
export type RefusedReason = 'too-large' | 'invalid-json' | 'not-object' | 'duplicate-key' | 'in-parts';

export type ForceUsage =
  | { readonly kind: 'changed'; readonly body: Buffer }
  | { readonly kind: 'unchanged'; readonly reason: 'not-streamed' | 'already-set' }
  | { readonly kind: 'refused'; readonly reason: RefusedReason; readonly key?: string };

/** The client's message of each refusal reason (safe text: no body content but a fixed key name). */
export function refusedMessage(r: { reason: RefusedReason; key?: string }): string {
  switch (r.reason) {
    case 'too-large':
      return `The request body is larger than the ${MAX_FORCE_BODY / (1024 * 1024)} MiB the gateway reads whole to ask for usage.`;
    case 'invalid-json':
      return 'The request body is not valid UTF-8 JSON.';
    case 'not-object':
      return 'The request body is not a JSON object.';
    case 'duplicate-key':
      return `The request body has the key "${r.key ?? 'stream_options'}" more than once.`;
    case 'in-parts':
      return 'The request body reached the gateway in parts, not whole.';
  }
}

const INCLUDE = '{"include_usage":true}';

interface Member {
  readonly key: string;
  /** The value's range in the text. */
  readonly start: number;
  readonly end: number;
}

const WS = /[ \t\n\r]*/y;

function skipWs(t: string, i: number): number {
  WS.lastIndex = i;
  WS.exec(t);
  return WS.lastIndex;
}

/**
 * `t[i]` is `"`: the index after the closing quote (the text is valid JSON). The closing quote is
 * the first `"` preceded by an even run of backslashes (found with the native search: a 9 MiB
 * string costs a few milliseconds).
 */
function skipString(t: string, i: number): number {
  for (i++; ; ) {
    const q = t.indexOf('"', i);
    let k = q - 1;
    while (t.charCodeAt(k) === 0x5c) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1;
    i = q + 1;
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
      if (depth > 0) i = skipWs(t, i);
    }
  } while (depth > 0);
  return i;
}

/** The members of the object starting at `i` (`t[i]` is `{`), every occurrence of a repeated key included. */
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

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

type Refused = Extract<ForceUsage, { kind: 'refused' }>;

/** A whole body read for the guarantee: its bytes, value, latin1 text, where its object opens and its top-level members. */
interface Read {
  readonly buf: Buffer;
  readonly parsed: Record<string, unknown>;
  readonly t: string;
  readonly open: number;
  readonly top: readonly Member[];
}

/** The checks that refuse whatever the body asks (see the module comment), or the body read. */
function readForUsage(body: Uint8Array): Refused | Read {
  if (body.length > MAX_FORCE_BODY) return { kind: 'refused', reason: 'too-large' };
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.length);
  if (!isUtf8(buf)) return { kind: 'refused', reason: 'invalid-json' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(buf.toString('utf8'));
  } catch {
    return { kind: 'refused', reason: 'invalid-json' };
  }
  if (!isObject(parsed)) return { kind: 'refused', reason: 'not-object' };
  // Scanned as latin1: one character per byte, so positions are byte offsets. JSON's structure is
  // ASCII and no byte of a multi-byte UTF-8 sequence is ASCII, so the scan sees the same structure;
  // the keys compared are ASCII.
  const t = buf.toString('latin1');
  const open = skipWs(t, 0);
  const top = members(t, open);
  // readers disagree on which of a repeated key wins: a request whose stream flag or options
  // depend on the reader is refused
  for (const key of ['stream', 'stream_options']) {
    if (top.filter((m) => m.key === key).length > 1) return { kind: 'refused', reason: 'duplicate-key', key };
  }
  return { buf, parsed, t, open, top };
}

/**
 * Why a whole OpenAI chat or completions body cannot be made to ask for usage (the request is then
 * refused, 400 `USAGE_NOT_GUARANTEED`), or null: the same rule as `forceIncludeUsage`, without
 * building the changed body. The Check applies it where it already holds the whole body, so the
 * refusal comes before the upstream there too (docs/metering.md, "Asking for usage").
 */
export function usageRefusal(body: Uint8Array): Refused | null {
  const r = usageScan(body);
  return r.kind === 'refused' ? r : null;
}

/**
 * `usageRefusal`'s rule, answering with what its scan read when the body is not refused (a JSON
 * object): `deep` names keys looked for at every depth meanwhile, and `readModel` asks for the
 * body's model as `scanJsonModel` reads it (`scanTopLevelKeys`), for the Check's next readers of
 * the same body.
 */
export function usageScan(body: Uint8Array, deep: KeyNames | null = null, readModel = false): Refused | TopLevelObject {
  // The same answer as readForUsage's checks, from one validating pass that builds nothing (the
  // Check runs it on every chat body it holds): what JSON.parse accepts, the top-level keys as it decodes them.
  if (body.length > MAX_FORCE_BODY) return { kind: 'refused', reason: 'too-large' };
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.length);
  if (!isUtf8(buf)) return { kind: 'refused', reason: 'invalid-json' };
  const r = scanTopLevelKeys(buf, STREAM_KEYS, deep, readModel);
  if (r.kind !== 'object') return { kind: 'refused', reason: r.kind };
  for (let k = 0; k < STREAM_KEYS.length; k++) if (r.counts[k]! > 1) return { kind: 'refused', reason: 'duplicate-key', key: STREAM_KEYS[k]! };
  return r;
}

/** The top-level keys a repeat of which refuses the body, in the order they are checked. */
const STREAM_KEYS = ['stream', 'stream_options'] as const;

/**
 * Sets `stream_options.include_usage` to true in a streamed request body (see the module comment),
 * so that whichever JSON reader the upstream uses (first or last of a repeated key wins, lax
 * booleans) the request asks for usage, or says why it cannot: `refused`.
 */
export function forceIncludeUsage(body: Uint8Array): ForceUsage {
  const r = readForUsage(body);
  if ('kind' in r) return r;
  const { buf, parsed, t, open, top } = r;
  // streamed unless the flag is absent, false or null: a lax upstream may take "true" or 1 for true
  const stream = parsed.stream;
  if (stream === undefined || stream === false || stream === null) return { kind: 'unchanged', reason: 'not-streamed' };
  const so = parsed.stream_options;
  const found = top.find((m) => m.key === 'stream_options');
  /** [start, end, replacement] byte ranges, in order. */
  const edits: Array<[number, number, string]> = [];
  if (found === undefined) edits.push([open + 1, open + 1, `"stream_options":${INCLUDE},`]);
  else if (!isObject(so)) edits.push([found.start, found.end, INCLUDE]);
  else {
    const all = members(t, found.start);
    const inner = all.filter((x) => x.key === 'include_usage');
    if (inner.length === 0) edits.push([found.start + 1, found.start + 1, `"include_usage":true${all.length === 0 ? '' : ','}`]);
    else {
      // every occurrence true, so that no reader sees another value
      if (inner.every((m) => t.slice(m.start, m.end) === 'true')) return { kind: 'unchanged', reason: 'already-set' };
      for (const m of inner) edits.push([m.start, m.end, 'true']);
    }
  }
  const parts: Buffer[] = [];
  let at = 0;
  for (const [a, b, text] of edits) {
    parts.push(buf.subarray(at, a), Buffer.from(text, 'latin1'));
    at = b;
  }
  parts.push(buf.subarray(at));
  return { kind: 'changed', body: Buffer.concat(parts) };
}
