/**
 * A streaming reader of the top-level `model` of a JSON body, over bytes.
 *
 * One forward pass, O(n), no recursion (nesting is tracked in a byte stack, so a body of 8 MiB of
 * `[` cannot overflow anything), nothing built for nested values: strings, numbers and containers
 * below the top level are only validated and skipped. Only top-level keys and the model value are
 * ever decoded.
 *
 * Contract (property-tested against `JSON.parse`): when the answer is `model`, `JSON.parse` of the
 * same bytes (decoded as UTF-8, a leading BOM dropped) yields an object whose `model` is that exact
 * string; when it is `absent`, it yields an object with no `model`. Anything else is `refused`,
 * including bodies JSON.parse accepts but other parsers could read differently (docs/models.md).
 */
import { Buffer, isUtf8 } from 'node:buffer';
import { couldBeReadAsModel, type BodyScan } from './names.ts';

/** The most body bytes keygate will scan: the gRPC receive limit (16 MiB). */
export const MAX_SCAN_BYTES = 16 * 1024 * 1024;

export type JsonRefusal =
  | 'too-large'
  | 'invalid-utf8'
  | 'invalid-json'
  | 'not-object'
  | 'duplicate-model'
  | 'model-like-key'
  | 'escaped-model-key'
  | 'not-string';

export type JsonModelScan = BodyScan<JsonRefusal>;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;
const MINUS = 0x2d;

/** Byte classes inside a string: 0 ordinary, 1 closing quote, 2 escape, 3 invalid (control). */
const STR = new Uint8Array(256);
for (let c = 0; c < 0x20; c++) STR[c] = 3;
STR[QUOTE] = 1;
STR[BACKSLASH] = 2;
const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;
const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;
const SIMPLE_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SIMPLE_ESCAPE[c.charCodeAt(0)] = 1;
const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];
const MODEL = [0x6d, 0x6f, 0x64, 0x65, 0x6c];

const ABSENT: JsonModelScan = Object.freeze({ kind: 'absent' });
const REFUSED = new Map<JsonRefusal, JsonModelScan>();
function refuse(refusal: JsonRefusal): JsonModelScan {
  let r = REFUSED.get(refusal);
  if (r === undefined) REFUSED.set(refusal, (r = Object.freeze({ kind: 'refused', refusal })));
  return r;
}

function asBuffer(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

/** The body as bytes, or a refusal: a string body must be well-formed UTF-16 (no lone surrogates). */
export function bodyBytes(body: Uint8Array | string): Buffer | null {
  if (typeof body !== 'string') return asBuffer(body);
  return body.isWellFormed() ? Buffer.from(body, 'utf8') : null;
}

function skipWs(b: Uint8Array, i: number, n: number): number {
  while (i < n && WS[b[i]!] === 1) i++;
  return i;
}

/** Set by skipString: whether the string just skipped had an escape sequence. */
let sawEscape = false;

/** Set by afterMember: whether the member just read was the object's last (its `}` read). */
let closedObject = false;

/**
 * `i` after an object member's value (negative: the value was not JSON). Returns the index of the
 * next member's key (after the `,` and whitespace), or the index after the closing `}` (and sets
 * `closedObject`), or -1 when neither follows.
 */
function afterMember(b: Uint8Array, i: number, n: number): number {
  closedObject = false;
  if (i < 0) return -1;
  i = skipWs(b, i, n);
  if (i < n && b[i] === COMMA) return skipWs(b, i + 1, n);
  if (i < n && b[i] === RBRACE) {
    closedObject = true;
    return i + 1;
  }
  return -1;
}

/**
 * The body as 32-bit words for skipping long string runs four bytes at a time: `words[k]` holds the
 * bytes at `wordStart + 4k` (the first 4-byte-aligned offset of the body's memory).
 */
let words: Uint32Array<ArrayBufferLike> = new Uint32Array(0);
let wordStart = 0;
/** The body `words` was made for; the view is made on the first long run only. */
let wordsOf: Buffer | null = null;
let wordsFor: Buffer | null = null;

function makeWords(buf: Buffer): void {
  wordStart = (4 - (buf.byteOffset & 3)) & 3;
  const count = Math.max(0, (buf.length - wordStart) >> 2);
  words = new Uint32Array(buf.buffer, buf.byteOffset + Math.min(wordStart, buf.length), count);
  wordsFor = buf;
}

/** True when a word has a byte that ends an ordinary string run: `"`, `\\` or a control byte (SWAR). */
function wordHasSpecial(x: number): boolean {
  const q = x ^ 0x22222222;
  const s = x ^ 0x5c5c5c5c;
  return ((((x - 0x20202020) & ~x) | ((q - 0x01010101) & ~q) | ((s - 0x01010101) & ~s)) & 0x80808080) !== 0;
}

/** Skips ordinary string bytes from `i`: a byte loop, then 4-byte words once the run is long. */
function skipOrdinary(b: Uint8Array, i: number, n: number): number {
  const end = i + 16 < n ? i + 16 : n;
  while (i < end && STR[b[i]!] === 0) i++;
  if (i < end || i === n) return i;
  if (wordsFor !== wordsOf) makeWords(wordsOf!);
  while (i < n && ((i - wordStart) & 3) !== 0 && STR[b[i]!] === 0) i++;
  if (i < n && STR[b[i]!] === 0) {
    let k = (i - wordStart) >> 2;
    while (k < words.length && !wordHasSpecial(words[k]!)) k++;
    i = wordStart + (k << 2);
  }
  while (i < n && STR[b[i]!] === 0) i++;
  return i;
}

/** `i` at an opening quote; returns the index after the closing quote, or -1. */
function skipString(b: Uint8Array, i: number, n: number): number {
  i++;
  for (;;) {
    i = skipOrdinary(b, i, n);
    if (i >= n) return -1;
    const cls = STR[b[i]!];
    if (cls === 1) return i + 1;
    if (cls === 3) return -1;
    sawEscape = true;
    if (i + 1 >= n) return -1;
    const e = b[i + 1]!;
    if (SIMPLE_ESCAPE[e] === 1) {
      i += 2;
    } else if (e === 0x75 && i + 5 < n && HEX[b[i + 2]!] && HEX[b[i + 3]!] && HEX[b[i + 4]!] && HEX[b[i + 5]!]) {
      i += 6;
    } else {
      return -1;
    }
  }
}

/**
 * For other single-pass readers of the same grammar (the references scan): `buf[i]` is an opening
 * quote; the index after the closing quote, or -1 when the string is not valid JSON. Whether it had
 * an escape is then `lastStringEscaped()`. Long runs are skipped four bytes at a time.
 */
export function skipJsonString(buf: Buffer, i: number): number {
  wordsOf = buf;
  sawEscape = false;
  return skipString(buf, i, buf.length);
}

export function lastStringEscaped(): boolean {
  return sawEscape;
}

function skipDigits(b: Uint8Array, i: number, n: number): number {
  while (i < n && b[i]! >= 0x30 && b[i]! <= 0x39) i++;
  return i;
}

/** `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`; returns the index after, or -1. */
function skipNumber(b: Uint8Array, i: number, n: number): number {
  if (b[i] === MINUS) i++;
  if (i >= n) return -1;
  const c = b[i]!;
  if (c === 0x30) i++;
  else if (c >= 0x31 && c <= 0x39) i = skipDigits(b, i + 1, n);
  else return -1;
  if (i < n && b[i] === 0x2e) {
    const s = i + 1;
    i = skipDigits(b, s, n);
    if (i === s) return -1;
  }
  if (i < n && (b[i] === 0x65 || b[i] === 0x45)) {
    i++;
    if (i < n && (b[i] === 0x2b || b[i] === MINUS)) i++;
    const s = i;
    i = skipDigits(b, s, n);
    if (i === s) return -1;
  }
  return i;
}

function skipLiteral(b: Uint8Array, i: number, n: number, lit: readonly number[]): number {
  if (i + lit.length > n) return -1;
  for (let k = 0; k < lit.length; k++) if (b[i + k] !== lit[k]) return -1;
  return i + lit.length;
}

/**
 * Key names looked for at every depth by `scanTopLevelKeys` (`KeyNames.of`): their bytes by length,
 * for comparing an unescaped key without decoding it, and the names, for a decoded (escaped) one.
 */
export class KeyNames {
  readonly names: ReadonlySet<string>;
  readonly byLength: readonly (readonly Uint8Array[] | undefined)[];

  private constructor(names: ReadonlySet<string>, byLength: readonly (readonly Uint8Array[] | undefined)[]) {
    this.names = names;
    this.byLength = byLength;
  }

  /** The names (each ASCII). */
  static of(names: Iterable<string>): KeyNames {
    const set = new Set(names);
    const byLength: Uint8Array[][] = [];
    for (const name of set) {
      if (!/^[\x20-\x7e]*$/.test(name)) throw new Error(`KeyNames: ${JSON.stringify(name)} is not printable ASCII`);
      (byLength[name.length] ??= []).push(Buffer.from(name, 'latin1'));
    }
    return new KeyNames(set, byLength);
  }

  /** Whether the key token `b[start, end)` (quotes included; `escaped`: it has an escape) is one of the names, as JSON.parse decodes it. */
  has(b: Buffer, start: number, end: number, escaped: boolean): boolean {
    if (escaped) return this.names.has(decodeString(b, start, end));
    const same = this.byLength[end - start - 2];
    if (same === undefined) return false;
    for (const name of same) if (sameBytes(b, start + 1, name)) return true;
    return false;
  }
}

/** Set by scanTopLevelKeys for skipValue: the names looked for at every depth (null: none), and what was seen. */
let deepNames: KeyNames | null = null;
let deepNamed = false;
/** Set by skipValue: the deepest container nesting it opened (empty containers included), the longest number it read. */
let deepest = 0;
let longestNumber = 0;

/** After `,` or `{` in an object: `ws "key" ws : `; returns the index after the colon, or -1. */
function skipKeyColon(b: Uint8Array, i: number, n: number): number {
  i = skipWs(b, i, n);
  if (i >= n || b[i] !== QUOTE) return -1;
  const start = i;
  sawEscape = false;
  i = skipString(b, i, n);
  if (i < 0) return -1;
  if (deepNames !== null && !deepNamed) deepNamed = deepNames.has(b as Buffer, start, i, sawEscape);
  i = skipWs(b, i, n);
  return i < n && b[i] === COLON ? i + 1 : -1;
}

/** Open containers of skipValue (`{` or `[`), reused across calls and grown on demand. */
let stack = new Uint8Array(256);

/** Validates and skips one JSON value starting at or after `i`; returns the index after it, or -1. */
function skipValue(b: Uint8Array, i: number, n: number): number {
  let depth = 0;
  for (;;) {
    i = skipWs(b, i, n);
    if (i >= n) return -1;
    let c = b[i]!;
    if (c === LBRACE || c === LBRACKET) {
      if (depth >= deepest) deepest = depth + 1;
      i = skipWs(b, i + 1, n);
      if (i >= n) return -1;
      if (b[i] === (c === LBRACE ? RBRACE : RBRACKET)) {
        i++;
      } else {
        if (depth === stack.length) {
          const grown = new Uint8Array(stack.length * 2);
          grown.set(stack);
          stack = grown;
        }
        stack[depth++] = c;
        if (c === LBRACE && (i = skipKeyColon(b, i, n)) < 0) return -1;
        continue;
      }
    } else if (c === QUOTE) {
      i = skipString(b, i, n);
    } else if (c === MINUS || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      i = skipNumber(b, i, n);
      if (i - start > longestNumber) longestNumber = i - start;
    } else if (c === 0x74) {
      i = skipLiteral(b, i, n, TRUE);
    } else if (c === 0x66) {
      i = skipLiteral(b, i, n, FALSE);
    } else if (c === 0x6e) {
      i = skipLiteral(b, i, n, NULL);
    } else {
      return -1;
    }
    if (i < 0) return -1;
    // A value is complete: close containers until one continues with `,`.
    for (;;) {
      if (depth === 0) return i;
      i = skipWs(b, i, n);
      if (i >= n) return -1;
      c = b[i]!;
      const open = stack[depth - 1];
      if (c === COMMA) {
        i++;
        if (open === LBRACE && (i = skipKeyColon(b, i, n)) < 0) return -1;
        break;
      }
      if (c !== (open === LBRACE ? RBRACE : RBRACKET)) return -1;
      depth--;
      i++;
    }
  }
}

/** JSON.parse's own reading of one already-validated string token `b[start, end)` (quotes included). */
function decodeString(buf: Buffer, start: number, end: number): string {
  return JSON.parse(buf.toString('utf8', start, end)) as string;
}

const KEY_OTHER = 0;
const KEY_MODEL = 1;
type KeyClass = typeof KEY_OTHER | typeof KEY_MODEL | JsonRefusal;

/** A top-level key token `buf[start, end)`: exactly `model`, something else, or a look-alike. */
function classifyKey(buf: Buffer, start: number, end: number, escaped: boolean): KeyClass {
  const len = end - start - 2;
  if (!escaped) {
    let ascii = true;
    for (let k = start + 1; k < end - 1; k++) if (buf[k]! >= 0x80) { ascii = false; break; }
    if (ascii) {
      if (len < 5) return KEY_OTHER;
      if (len === 5 && MODEL.every((m, k) => buf[start + 1 + k] === m)) return KEY_MODEL;
      if (len > 64) return KEY_OTHER;
      return couldBeReadAsModel(buf.toString('latin1', start + 1, end - 1)) ? 'model-like-key' : KEY_OTHER;
    }
  }
  const key = decodeString(buf, start, end);
  if (key === 'model') return escaped ? 'escaped-model-key' : KEY_MODEL;
  return couldBeReadAsModel(key) ? 'model-like-key' : KEY_OTHER;
}

/** Reads the top-level `model` of a JSON body (bytes or text). See the module comment. */
export function scanJsonModel(body: Uint8Array | string): JsonModelScan {
  const buf = bodyBytes(body);
  if (buf === null) return refuse('invalid-utf8');
  const n = buf.length;
  if (n > MAX_SCAN_BYTES) return refuse('too-large');
  if (!isUtf8(buf)) return refuse('invalid-utf8');
  wordsOf = buf;
  let i = n >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  i = skipWs(buf, i, n);
  if (i >= n) return refuse('invalid-json');
  if (buf[i] !== LBRACE) {
    const end = skipValue(buf, i, n);
    return refuse(end >= 0 && skipWs(buf, end, n) === n ? 'not-object' : 'invalid-json');
  }
  let modelStart = -1;
  let modelEnd = -1;
  i = skipWs(buf, i + 1, n);
  if (i < n && buf[i] === RBRACE) {
    i++;
  } else {
    for (;;) {
      if (i >= n || buf[i] !== QUOTE) return refuse('invalid-json');
      const keyStart = i;
      sawEscape = false;
      i = skipString(buf, i, n);
      if (i < 0) return refuse('invalid-json');
      const key = classifyKey(buf, keyStart, i, sawEscape);
      i = skipWs(buf, i, n);
      if (i >= n || buf[i] !== COLON) return refuse('invalid-json');
      i = skipWs(buf, i + 1, n);
      if (key === KEY_MODEL) {
        if (modelStart !== -1) return refuse('duplicate-model');
        if (i >= n || buf[i] !== QUOTE) return refuse(skipValue(buf, i, n) < 0 ? 'invalid-json' : 'not-string');
        modelStart = i;
        i = skipString(buf, i, n);
        modelEnd = i;
      } else if (key === KEY_OTHER) {
        i = skipValue(buf, i, n);
      } else {
        return refuse(key);
      }
      i = afterMember(buf, i, n);
      if (i < 0) return refuse('invalid-json');
      if (closedObject) break;
    }
  }
  if (skipWs(buf, i, n) !== n) return refuse('invalid-json');
  if (modelStart === -1) return ABSENT;
  return { kind: 'model', model: decodeString(buf, modelStart, modelEnd) };
}

/** A JSON object as `scanTopLevelKeys` read it. */
export interface TopLevelObject {
  readonly kind: 'object';
  /** How often each asked name is a top-level key. */
  readonly counts: readonly number[];
  /** Whether a key at any depth (the top level's included) is one of the names asked for at every depth. */
  readonly deepNamed: boolean;
  /** The deepest nesting of containers, the top-level object counting 1 (empty containers included). */
  readonly depth: number;
  /** The longest number token, in bytes (0: none). */
  readonly longestNumber: number;
  /** The body's length in bytes. */
  readonly length: number;
  /** When asked for (`readModel`): `scanJsonModel`'s answer for the same bytes. */
  readonly model?: JsonModelScan;
}

/** What `scanTopLevelKeys` found, or why the body is not a JSON object. */
export type TopLevelKeys = TopLevelObject | { readonly kind: 'invalid-json' | 'not-object' };
const INVALID_JSON: TopLevelKeys = Object.freeze({ kind: 'invalid-json' });
const NOT_OBJECT: TopLevelKeys = Object.freeze({ kind: 'not-object' });

/**
 * Validates a whole JSON body in one pass (the same grammar as `scanJsonModel`: whatever
 * `JSON.parse` accepts) and counts how often each of `names` is a key of its top-level object
 * (keys compared as `JSON.parse` decodes them, escapes included), without building any value.
 * Stricter than `scanJsonModel` on one point: a leading byte-order mark is invalid JSON here, as it
 * is for `JSON.parse` of the bytes decoded with `Buffer#toString`. The caller checks UTF-8 and size.
 * `deep`: names looked for as keys at every depth (decoded likewise); the answer says whether one
 * was seen, with the nesting depth and the longest number, so that a later reader of the same
 * body with its own bounds can tell whether it has anything to find. `readModel`: the answer also
 * carries what `scanJsonModel` answers for the same bytes (read in the same pass: the top-level
 * keys it classifies and the model's value), so that a body is not scanned twice.
 */
export function scanTopLevelKeys(buf: Buffer, names: readonly string[], deep: KeyNames | null = null, readModel = false): TopLevelKeys {
  deepNames = deep;
  try {
    return topLevelKeys(buf, names, readModel);
  } finally {
    deepNames = null;
  }
}

function topLevelKeys(buf: Buffer, names: readonly string[], readModel: boolean): TopLevelKeys {
  const n = buf.length;
  wordsOf = buf;
  deepNamed = false;
  deepest = 0;
  longestNumber = 0;
  const counts = names.map(() => 0);
  // scanJsonModel's reading: its refusal at a top-level key (the first, in order), the model's value
  let modelRefusal: JsonModelScan | null = null;
  let modelStart = -1;
  let modelEnd = -1;
  let i = skipWs(buf, 0, n);
  if (i >= n) return INVALID_JSON;
  if (buf[i] !== LBRACE) {
    const end = skipValue(buf, i, n);
    return end >= 0 && skipWs(buf, end, n) === n ? NOT_OBJECT : INVALID_JSON;
  }
  i = skipWs(buf, i + 1, n);
  if (i < n && buf[i] === RBRACE) i++;
  else {
    for (;;) {
      if (i >= n || buf[i] !== QUOTE) return INVALID_JSON;
      const keyStart = i;
      sawEscape = false;
      i = skipString(buf, i, n);
      if (i < 0) return INVALID_JSON;
      const len = i - keyStart - 2;
      if (deepNames !== null && !deepNamed) deepNamed = deepNames.has(buf, keyStart, i, sawEscape);
      for (let k = 0; k < names.length; k++) {
        const name = names[k]!;
        if (sawEscape ? decodeString(buf, keyStart, i) === name : len === name.length && sameAscii(buf, keyStart + 1, name)) counts[k]!++;
      }
      const key = readModel && modelRefusal === null ? classifyKey(buf, keyStart, i, sawEscape) : KEY_OTHER;
      i = skipWs(buf, i, n);
      if (i >= n || buf[i] !== COLON) return INVALID_JSON;
      const valueStart = skipWs(buf, i + 1, n);
      const valueEnd = skipValue(buf, valueStart, n);
      if (key === KEY_MODEL) {
        if (modelStart !== -1) modelRefusal = refuse('duplicate-model');
        else if (valueStart >= n || buf[valueStart] !== QUOTE) modelRefusal = refuse('not-string');
        else {
          modelStart = valueStart;
          modelEnd = valueEnd;
        }
      } else if (key !== KEY_OTHER) modelRefusal = refuse(key);
      i = afterMember(buf, valueEnd, n);
      if (i < 0) return INVALID_JSON;
      if (closedObject) break;
    }
  }
  if (skipWs(buf, i, n) !== n) return INVALID_JSON;
  const object = { kind: 'object', counts, deepNamed, depth: deepest + 1, longestNumber, length: n } as const;
  if (!readModel) return object;
  const model =
    n > MAX_SCAN_BYTES ? refuse('too-large') : (modelRefusal ?? (modelStart === -1 ? ABSENT : { kind: 'model' as const, model: decodeString(buf, modelStart, modelEnd) }));
  return { ...object, model };
}

/** Whether the bytes at `at` are `name`'s (its length already checked). */
function sameBytes(b: Uint8Array, at: number, name: Uint8Array): boolean {
  for (let k = 0; k < name.length; k++) if (b[at + k] !== name[k]) return false;
  return true;
}

/** Whether the bytes at `at` are the ASCII `name` (its length already checked). */
function sameAscii(b: Uint8Array, at: number, name: string): boolean {
  for (let k = 0; k < name.length; k++) if (b[at + k] !== name.charCodeAt(k)) return false;
  return true;
}
