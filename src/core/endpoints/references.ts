/**
 * References inside a request body (docs/endpoints.md, "References in bodies"): the provider objects
 * a metered request names by id — an OpenAI Responses `previous_response_id` or `conversation`, file
 * ids in content parts and tool resources, an Anthropic file or container, a Google file URI or
 * cached content. The Check allows a request only when each is the account's: a response id must be
 * in the account's owned records; the others are stateful objects, open only with the account's own
 * credential.
 *
 * One forward pass over the bytes, no recursion (a container stack with its bound), every key at every
 * depth looked at after its escapes are decoded: a reference cannot hide behind a duplicate key (each
 * occurrence is collected, whichever one a parser keeps), an escaped key (`"file\u005fid"`), or
 * nesting. A body that is not JSON is unreadable (refused: USAGE_NOT_GUARANTEED), as is one cut short.
 */
import { isUtf8 } from 'node:buffer';
import { bodyBytes, KeyNames, lastStringEscaped, MAX_SCAN_BYTES, skipJsonString, type TopLevelObject } from '../model/json-scan.ts';

/** What a reference names that is not a tracked (owned) object. */
export type StatefulRef = 'conversation' | 'file' | 'vector store' | 'container' | 'stored prompt' | 'cached content';

export type RefScan =
  | { readonly kind: 'read'; /** `previous_response_id`s, in order (each must be owned). */ readonly responses: readonly string[]; /** The first stateful reference, or null. */ readonly stateful: StatefulRef | null }
  | { readonly kind: 'unreadable'; readonly reason: string };

/** The most response references one body may carry (each is one owned-record lookup). */
export const MAX_RESPONSE_REFS = 8;
const MAX_DEPTH = 512;

const STRING_KEYS = new Map<string, StatefulRef | 'response'>([
  ['previous_response_id', 'response'],
  ['conversation', 'conversation'],
  ['conversation_id', 'conversation'],
  ['file_id', 'file'],
  ['input_file_id', 'file'],
  ['training_file', 'file'],
  ['validation_file', 'file'],
  ['container', 'container'],
  ['cachedContent', 'cached content'],
  ['cached_content', 'cached content'],
]);
/** Objects whose `id` is a reference. */
const OBJECT_KEYS = new Map<string, StatefulRef>([
  ['conversation', 'conversation'],
  ['prompt', 'stored prompt'],
]);
/** Arrays of ids. */
const ARRAY_KEYS = new Map<string, StatefulRef>([
  ['file_ids', 'file'],
  ['vector_store_ids', 'vector store'],
]);
/** Google file URIs: a Files API resource, or a Cloud Storage object read with the gateway's identity. */
const URI_KEYS = new Set(['fileUri', 'file_uri']);
/** Every key a reference hangs on (an object's `id` counts only below `OBJECT_KEYS`). */
export const REFERENCE_KEYS = KeyNames.of([...STRING_KEYS.keys(), ...OBJECT_KEYS.keys(), ...ARRAY_KEYS.keys(), ...URI_KEYS]);
/** The longest number or literal token read. */
const MAX_SCALAR = 400;

/**
 * Whether `scanReferences` can find anything in a body that a validating scan (`scanTopLevelKeys`
 * with `REFERENCE_KEYS` at every depth) read as a JSON object: false only when it
 * would read the body as naming no reference: no key is one a reference hangs on (escapes
 * decoded), and the body is within this scan's bounds (size, nesting, token length), so it would
 * not refuse it either. Property-tested against `scanReferences`.
 */
export function mayNameReferences(s: TopLevelObject): boolean {
  return s.deepNamed || s.depth > MAX_DEPTH || s.longestNumber > MAX_SCALAR || s.length > MAX_SCAN_BYTES;
}
const PROVIDER_FILE_URI = /^(?:gs:\/\/|files\/|https?:\/\/generativelanguage\.googleapis\.com\/)/i;

const unreadable = (reason: string): RefScan => ({ kind: 'unreadable', reason });

const OBJ = 1;
const ARR = 2;
// what the parser expects next
const VALUE = 0;
const KEY_OR_END = 1;
const KEY = 2;
const COLON = 3;
const NEXT = 4;
const VALUE_OR_END = 5;

interface Frame {
  readonly kind: typeof OBJ | typeof ARR;
  /** OBJ: the reference this object is the value of (its `id` counts); ARR: the reference its strings are. */
  readonly ref: StatefulRef | null;
  key: string | null;
}

const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;

/** The references `body` (JSON) names. */
export function scanReferences(body: Uint8Array | string): RefScan {
  const b = bodyBytes(body);
  if (b === null || !isUtf8(b)) return unreadable('the body is not UTF-8');
  if (b.length > MAX_SCAN_BYTES) return unreadable('the body is larger than keygate reads');
  const n = b.length;
  let i = n >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf ? 3 : 0;
  const stack: Frame[] = [];
  const responses: string[] = [];
  let stateful: StatefulRef | null = null;
  let want = VALUE;
  let done = false;

  /** b[i] is the opening quote: the string's end (after the closing quote), or -1; `i` is left alone. */
  const strEnd = (): number => skipJsonString(b, i);
  /** The string token b[start, end) (quotes included) as JSON.parse reads it. */
  const decode = (start: number, end: number): string | null => {
    if (!lastStringEscaped()) return b.toString('utf8', start + 1, end - 1);
    try {
      return JSON.parse(b.toString('utf8', start, end)) as string;
    } catch {
      return null;
    }
  };
  /** Whether a string value here can be a reference (only those are decoded: a 64 KiB message is skipped). */
  const valueWanted = (): boolean => {
    const top = stack[stack.length - 1];
    if (top === undefined) return false;
    if (top.kind === ARR) return top.ref !== null;
    const k = top.key!;
    return (top.ref !== null && k === 'id') || STRING_KEYS.has(k) || URI_KEYS.has(k);
  };

  const seen = (ref: StatefulRef | 'response', v: string) => {
    if (ref === 'response') {
      if (!responses.includes(v)) responses.push(v);
    } else stateful ??= ref;
  };

  /** A string value: is it a reference, by its key or its container? */
  const stringValue = (v: string) => {
    const top = stack[stack.length - 1];
    if (top === undefined) return;
    if (top.kind === ARR) {
      if (top.ref !== null) seen(top.ref, v);
      return;
    }
    const k = top.key!;
    if (top.ref !== null && k === 'id') seen(top.ref, v);
    const r = STRING_KEYS.get(k);
    if (r !== undefined && v !== '') seen(r, v);
    else if (URI_KEYS.has(k) && PROVIDER_FILE_URI.test(v)) seen('file', v);
  };

  const open = (kind: typeof OBJ | typeof ARR) => {
    const top = stack[stack.length - 1];
    const k = top?.kind === OBJ ? top.key! : null;
    const ref = k === null ? null : ((kind === OBJ ? OBJECT_KEYS : ARRAY_KEYS).get(k) ?? null);
    stack.push({ kind, ref, key: null });
    i++;
    want = kind === OBJ ? KEY_OR_END : VALUE_OR_END;
  };

  const close = () => {
    stack.pop();
    i++;
    if (stack.length === 0) done = true;
    want = NEXT;
  };

  while (true) {
    while (i < n && WS[b[i]!] === 1) i++;
    if (done) return i === n ? (responses.length > MAX_RESPONSE_REFS ? unreadable('the body names too many responses') : { kind: 'read', responses, stateful }) : unreadable('the body is not one JSON value');
    if (i >= n) return unreadable('the body is not complete JSON');
    const c = b[i]!;
    switch (want) {
      case KEY_OR_END:
      case KEY:
        if (c === 0x7d && want === KEY_OR_END) {
          close();
          break;
        }
        if (c !== 0x22) return unreadable('the body is not JSON');
        {
          const end = strEnd();
          const k = end < 0 ? null : decode(i, end);
          if (k === null) return unreadable('the body is not JSON');
          stack[stack.length - 1]!.key = k;
          i = end;
        }
        want = COLON;
        break;
      case COLON:
        if (c !== 0x3a) return unreadable('the body is not JSON');
        i++;
        want = VALUE;
        break;
      case NEXT: {
        const top = stack[stack.length - 1]!;
        if (c === 0x2c) {
          i++;
          want = top.kind === OBJ ? KEY : VALUE;
        } else if ((c === 0x7d && top.kind === OBJ) || (c === 0x5d && top.kind === ARR)) close();
        else return unreadable('the body is not JSON');
        break;
      }
      case VALUE_OR_END:
      case VALUE:
        if (c === 0x5d && want === VALUE_OR_END) {
          close();
          break;
        }
        if (c === 0x7b || c === 0x5b) {
          if (stack.length >= MAX_DEPTH) return unreadable('the body is nested too deeply');
          open(c === 0x7b ? OBJ : ARR);
          break;
        }
        if (c === 0x22) {
          const end = strEnd();
          if (end < 0) return unreadable('the body is not JSON');
          if (valueWanted()) {
            const v = decode(i, end);
            if (v === null) return unreadable('the body is not JSON');
            stringValue(v);
          }
          i = end;
        } else {
          const end = scalarEnd(b, i);
          if (end === -1) return unreadable('the body is not JSON');
          i = end;
        }
        if (stack.length === 0) done = true;
        want = NEXT;
        break;
    }
  }
}

const NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

/** The end of a number, `true`, `false` or `null` starting at `i`, or -1. */
function scalarEnd(b: Buffer, i: number): number {
  let j = i;
  while (j < b.length) {
    const c = b[j]!;
    if (c === 0x2c || c === 0x7d || c === 0x5d || WS[c] === 1) break;
    j++;
    if (j - i > MAX_SCALAR) return -1;
  }
  const t = b.toString('latin1', i, j);
  return t === 'true' || t === 'false' || t === 'null' || NUMBER.test(t) ? j : -1;
}
