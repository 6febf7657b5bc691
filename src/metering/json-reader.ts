/**
 * An incremental JSON reader for metering: bytes in, chunk by chunk, split anywhere (inside a
 * string, a number, a UTF-8 character or an escape), nothing of the body kept. It follows a schema
 * (`JsonNode`) of the few paths metering reads and captures only those: integer counts into number
 * slots, short strings (model, event type) into string slots, and the length in Unicode code points
 * of generated text. Everything else is skipped byte by byte without building anything.
 *
 * A "record" is the top-level value, or each element when the top level is an array (Google's
 * streamed JSON array `[{…},{…}]`): when a record's closing bracket is read, `onRecord` is called
 * with the slots and they are cleared for the next.
 *
 * Memory per reader is fixed: a stack of MAX_DEPTH entries, SLOT_COUNT numbers, STRING_SLOTS strings of at
 * most STRING_MAX bytes. Deeper nesting or bytes that are not JSON stop the reader (`failed`); it
 * reads nothing more until `reset()` (each SSE event resets it).
 *
 * It is a reader of the values metering needs, not a validator: malformed JSON is not always
 * detected, and what a malformed record yields is bounded by the same checks as any count (a count
 * is a non-negative integer of at most MAX_COUNT, or it is marked bad and never used).
 *
 * Why not the request side's scanner (`src/core/model/json-scan.ts`) or primitives shared with it:
 * the two look alike (whitespace table, string runs ended by `"` or `\`, escapes, numbers) but do
 * different jobs. The scanner has the whole body in one buffer, validates it strictly (control bytes,
 * `\u` hex digits, every number's grammar: its answer is property-tested against JSON.parse), and
 * its primitives are index functions (`skipString(b, i, n)` → the index after, or -1 = refuse) with
 * a 4-byte-word fast path over the body's memory. This reader gets a response body in chunks split
 * at any byte and must not keep them, so each primitive here is a resumable state (S_STRING, S_ESC,
 * S_UHEX, S_NUMBER, S_LITERAL) that may stop at a chunk's end and continue in the next; and it does
 * not validate. Sharing the scanner's functions would mean buffering the body (the fixed memory per
 * stream is the point); making them resumable would add state stores to the Check path's scan. What
 * is literally common is two 256-byte tables (whitespace; `"`/`\`), not worth a module between
 * core/model and metering.
 */

/** What a value at a schema position is read for. */
export interface JsonNode {
  /** Object members read (anything else is skipped): names as bytes, and their nodes, in the same order. */
  readonly keys?: readonly Uint8Array[];
  readonly keyNodes?: readonly JsonNode[];
  /** The node of every element when the value is an array. */
  readonly items?: JsonNode;
  /** A count: the number slot it goes to. */
  readonly count?: number;
  /** A short string: the string slot it goes to. */
  readonly str?: number;
  /** A boolean: the number slot it goes to (true 1, false 0; null: unseen; anything else bad). */
  readonly flag?: number;
  /** Generated text: its code points are added to `text`. */
  readonly text?: boolean;
  /** Every string below this value (at any depth) is text. */
  readonly deepText?: boolean;
  /**
   * An object counted by its modality (Gemini's `ModalityTokenCount`): when it closes, the count it
   * read into `MODALITY_COUNT_SLOT` is added to the slot of the modality it read into
   * `MODALITY_STRING_SLOT` (pairs of modality name and slot; other modalities: not counted).
   */
  readonly modalityOf?: readonly (readonly [string, number])[];
}

/**
 * A node with every field present (absent ones undefined), in one order: the reader reads a field
 * of the node at every value, and nodes of one shape keep those reads monomorphic (a schema of
 * mixed literal shapes made each read a megamorphic lookup, most of the reader's time).
 */
function node(n: JsonNode): JsonNode {
  return {
    keys: n.keys,
    keyNodes: n.keyNodes,
    items: n.items,
    count: n.count,
    str: n.str,
    flag: n.flag,
    text: n.text,
    deepText: n.deepText,
    modalityOf: n.modalityOf,
  };
}

/** An object node: its members by name (ASCII names without escapes: the only ones matched). */
export function obj(members: Record<string, JsonNode>): JsonNode {
  const names = Object.keys(members);
  return node({ keys: names.map((k) => Buffer.from(k, 'latin1')), keyNodes: names.map((k) => members[k]!) });
}
export function arr(items: JsonNode): JsonNode {
  return node({ items });
}
export const count = (slot: number): JsonNode => node({ count: slot });
export const str = (slot: number): JsonNode => node({ str: slot });
export const flag = (slot: number): JsonNode => node({ flag: slot });
export const TEXT: JsonNode = node({ text: true });
/** The slots a modality element reads into before it is folded (reserved: the last number and string slots). */
export const MODALITY_COUNT_SLOT = 14;
export const MODALITY_STRING_SLOT = 5;
/** An object of `{modality, tokenCount}` whose count goes to its modality's slot. */
export function byModality(slots: Record<string, number>): JsonNode {
  return node({ ...obj({ modality: str(MODALITY_STRING_SLOT), tokenCount: count(MODALITY_COUNT_SLOT) }), modalityOf: Object.entries(slots) });
}
export const DEEP_TEXT: JsonNode = node({ deepText: true });

/** Number slots per record. */
export const SLOT_COUNT = 15;
/** String slots per record. */
export const STRING_SLOTS = 6;
/** The longest captured string, in bytes (longer: the slot is marked bad). */
export const STRING_MAX = 256;
/** The deepest nesting read. */
export const MAX_DEPTH = 64;
/** The longest key compared with the schema's names, in bytes. */
const KEY_MAX = 48;
/** The largest count taken (2^40, about 1.1e12 tokens); larger is hostile. */
export const MAX_COUNT = 2 ** 40;

/** Slot states. */
export const UNSEEN = 0;
export const SEEN = 1;
/** Negative, fractional, too large, or not a number. */
export const BAD = 2;

export interface RecordView {
  readonly counts: readonly number[];
  readonly countState: readonly number[];
  readonly strings: readonly (string | null)[];
  /** String slots whose value was not a short string. */
  readonly stringBad: readonly number[];
  /** Code points of text in this record. */
  readonly text: number;
}

const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;

// states
const S_VALUE = 0; // expecting a value
const S_AFTER = 1; // after a value: `,` or a closing bracket
const S_KEY = 2; // expecting a key's opening quote (or `}` right after `{`)
const S_COLON = 3;
const S_STRING = 4;
const S_ESC = 5;
const S_UHEX = 6;
const S_NUMBER = 7;
const S_LITERAL = 8;
const S_FAILED = 9;
const S_DONE = 10; // a top-level non-array value completed

// what the current string is
const STR_SKIP = 0;
const STR_KEY = 1;
const STR_TEXT = 2;
const STR_CAPTURE = 3;
const STR_BADCOUNT = 4; // a string where a count was expected

const NONE = new Uint8Array(0);

/**
 * The index after the scalar value at `b[i]` when it ends before `end` (a string without escapes,
 * a number, a literal), else -1 (not a scalar, an escape, or cut by the chunk's end). Not a
 * validator, as the reader is not: what it passes over is never read.
 */
function skipScalar(b: Uint8Array, i: number, end: number): number {
  const c = b[i]!;
  let j = i + 1;
  if (c === 0x22) {
    while (j < end) {
      const k = b[j]!;
      if (k === 0x22) return j + 1;
      if (k === 0x5c) return -1;
      j++;
    }
    return -1;
  }
  if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
    while (j < end) {
      const k = b[j]!;
      if ((k >= 0x30 && k <= 0x39) || k === 0x2e || k === 0x65 || k === 0x45 || k === 0x2b || k === 0x2d) j++;
      else return j;
    }
    return -1;
  }
  if (c === 0x74 || c === 0x66 || c === 0x6e) {
    while (j < end && b[j]! >= 0x61 && b[j]! <= 0x7a) j++;
    return j < end ? j : -1;
  }
  return -1;
}

const OBJ = 1;
const ARR = 2;

export class JsonReader implements RecordView {
  private readonly rootObject: JsonNode;
  private readonly arrayRoot: JsonNode;
  private readonly onRecord: (r: RecordView) => void;

  private state = S_VALUE;
  private depth = 0;
  private readonly kinds: number[] = new Array<number>(MAX_DEPTH + 1).fill(0);
  private readonly nodes: (JsonNode | null)[] = new Array(MAX_DEPTH + 1).fill(null);
  /** >0: inside a deep-text subtree opened at that depth. */
  private deepFrom = 0;
  /** The node the next value is read for (null: skipped). */
  private next: JsonNode | null;
  private recordDepth = 0; // 0: the top value is the record; 1: each element of a top array
  private topArray = false;

  private strMode = STR_SKIP;
  private hex = 0;
  private hexLeft = 0;
  /** The key being read and the string being captured: two views of one small allocation. */
  private readonly keyBuf: Uint8Array;
  private keyLen = 0; // > KEY_MAX: too long to match
  private readonly capBuf: Uint8Array;
  private capLen = 0;
  private capSlot = 0;
  /** Per string slot, the bytes and string of its last capture: a stream repeats its model and types, decoded once. */
  private readonly lastCap: Uint8Array[] = [NONE, NONE, NONE, NONE, NONE, NONE];
  private readonly lastCapStr: (string | null)[] = [null, null, null, null, null, null];

  // number being read
  private numSlot = -1;
  private numVal = 0;
  private numBad = false;
  private numDigits = 0;

  // the record being read (this reader is the RecordView handed to onRecord)
  readonly counts: number[] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
  readonly countState: number[] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]; // SLOT_COUNT × UNSEEN (a literal: packed elements)
  readonly strings: (string | null)[] = [null, null, null, null, null, null]; // STRING_SLOTS
  readonly stringBad: number[] = [0, 0, 0, 0, 0, 0];
  /** Code points of text read in the current record (not yet complete: a stream cut short served it too). */
  text = 0;

  /** Records seen since the last reset. */
  records = 0;

  constructor(root: JsonNode, onRecord: (r: RecordView) => void) {
    this.rootObject = root;
    this.arrayRoot = node({ items: root });
    const mem = new Uint8Array(KEY_MAX + STRING_MAX);
    this.keyBuf = mem.subarray(0, KEY_MAX);
    this.capBuf = mem.subarray(KEY_MAX);
    this.onRecord = onRecord;
    this.next = root;
  }

  get failed(): boolean {
    return this.state === S_FAILED;
  }

  /** Ready for a new document (an SSE event's data). */
  reset(): void {
    this.state = S_VALUE;
    this.depth = 0;
    this.deepFrom = 0;
    this.next = this.rootObject;
    this.recordDepth = 0;
    this.topArray = false;
    this.records = 0;
    this.clearRecord();
  }

  private clearRecord(): void {
    // element by element: Array.prototype.fill costs more than the stores on arrays this small
    const cs = this.countState;
    for (let k = 0; k < SLOT_COUNT; k++) cs[k] = UNSEEN;
    const st = this.strings;
    const sb = this.stringBad;
    for (let k = 0; k < STRING_SLOTS; k++) {
      st[k] = null;
      sb[k] = 0;
    }
    this.text = 0;
  }

  private fail(): void {
    this.state = S_FAILED;
  }

  /**
   * Reads `b[start, end)`. A loop over states, the frequent ones first; a member whose key lies
   * whole in the chunk is read in one step (key, colon and the start of its value), and a string's
   * run is scanned by a plain loop (the typed array's own `indexOf` costs more per call than a
   * string of a response is long).
   */
  write(b: Uint8Array, start = 0, end = b.length): void {
    let i = start;
    let state = this.state;
    while (i < end) {
      switch (state) {
        case S_STRING: {
          const mode = this.strMode;
          let stop = i;
          if (mode === STR_TEXT) {
            // generated text: its code points counted in the same pass (every byte that is not a
            // UTF-8 continuation byte starts one)
            let cont = 0;
            while (stop < end) {
              const c = b[stop]!;
              if (c === 0x22 || c === 0x5c) break;
              if ((c & 0xc0) === 0x80) cont++;
              stop++;
            }
            this.text += stop - i - cont;
          } else {
            while (stop < end) {
              const c = b[stop]!;
              if (c === 0x22 || c === 0x5c) break;
              stop++;
            }
          }
          if (mode === STR_KEY) {
            const buf = this.keyBuf;
            let len = this.keyLen;
            for (let k = i; k < stop; k++, len++) if (len < KEY_MAX) buf[len] = b[k]!;
            this.keyLen = len;
          } else if (mode === STR_CAPTURE) {
            const buf = this.capBuf;
            let len = this.capLen;
            for (let k = i; k < stop; k++, len++) if (len < STRING_MAX) buf[len] = b[k]!;
            this.capLen = len;
          }
          i = stop;
          if (i >= end) break;
          if (b[i] === 0x5c) {
            state = S_ESC;
            i++;
            break;
          }
          i++; // closing quote
          state = this.endString();
          break;
        }
        case S_KEY: {
          while (i < end && WS[b[i]!] === 1) i++;
          if (i >= end) break;
          const c = b[i++]!;
          if (c !== 0x22) {
            state = c === 0x7d && this.kinds[this.depth] === OBJ ? this.close() : S_FAILED;
            break;
          }
          const node = this.nodes[this.depth];
          let q = i;
          while (q < end) {
            const k = b[q]!;
            if (k === 0x22 || k === 0x5c) break;
            q++;
          }
          if (q < end && b[q] === 0x22) {
            // the whole key in this chunk, unescaped: matched where it lies, then its colon and the
            // start of its value in the same step
            this.next = node != null && node.keys !== undefined && q - i <= KEY_MAX ? this.memberAt(node, b, i, q - i) : null;
            i = q + 1;
            while (i < end && WS[b[i]!] === 1) i++;
            if (i >= end) {
              state = S_COLON;
              break;
            }
            if (b[i++] !== 0x3a) {
              state = S_FAILED;
              break;
            }
            while (i < end && WS[b[i]!] === 1) i++;
            if (i >= end) {
              state = S_VALUE;
              break;
            }
            if (this.next === null && this.deepFrom === 0) {
              // a member not read whose scalar value lies whole in the chunk: passed over here,
              // with the comma after it (a string with an escape, a container, or a value the
              // chunk cuts goes the long way)
              const j = skipScalar(b, i, end);
              if (j !== -1) {
                i = j;
                while (i < end && WS[b[i]!] === 1) i++;
                if (i < end && b[i] === 0x2c) {
                  i++;
                  state = S_KEY;
                } else state = S_AFTER;
                break;
              }
            }
            state = this.startValue(b[i++]!);
            break;
          }
          // split across chunks, or escaped: read as a string
          if (node != null && node.keys !== undefined) {
            this.strMode = STR_KEY;
            this.keyLen = 0;
          } else {
            this.strMode = STR_SKIP;
            this.keyLen = -1; // marks "a key, not read"
          }
          state = S_STRING;
          break;
        }
        case S_AFTER: {
          while (i < end && WS[b[i]!] === 1) i++;
          if (i >= end) break;
          const c = b[i++]!;
          const kind = this.kinds[this.depth];
          if (c === 0x2c) {
            if (kind === OBJ) state = S_KEY;
            else {
              this.next = this.nodes[this.depth]?.items ?? null;
              state = S_VALUE;
            }
          } else if ((c === 0x7d && kind === OBJ) || (c === 0x5d && kind === ARR)) {
            state = this.close();
          } else state = S_FAILED;
          break;
        }
        case S_VALUE: {
          while (i < end && WS[b[i]!] === 1) i++;
          if (i >= end) break;
          state = this.startValue(b[i++]!);
          break;
        }
        case S_NUMBER: {
          while (i < end) {
            const c = b[i]!;
            if (c >= 0x30 && c <= 0x39) {
              if (this.numDigits < 17) this.numVal = this.numVal * 10 + (c - 0x30);
              this.numDigits++;
            } else if (c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d) this.numBad = true;
            else break;
            i++;
          }
          if (i >= end) break;
          this.endNumber();
          state = this.afterValue();
          break;
        }
        case S_LITERAL: {
          while (i < end && b[i]! >= 0x61 && b[i]! <= 0x7a) i++;
          if (i >= end) break;
          state = this.afterValue();
          break;
        }
        case S_COLON: {
          while (i < end && WS[b[i]!] === 1) i++;
          if (i >= end) break;
          state = b[i++] === 0x3a ? S_VALUE : S_FAILED;
          break;
        }
        case S_ESC: {
          const e = b[i++]!;
          if (e === 0x75) {
            state = S_UHEX;
            this.hex = 0;
            this.hexLeft = 4;
          } else {
            this.escaped(e === 0x6e ? 0x0a : e === 0x74 ? 0x09 : e === 0x72 ? 0x0d : e === 0x62 ? 0x08 : e === 0x66 ? 0x0c : e);
            state = S_STRING;
          }
          break;
        }
        case S_UHEX: {
          const c = b[i++]!;
          const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : (c | 0x20) >= 0x61 && (c | 0x20) <= 0x66 ? (c | 0x20) - 0x57 : -1;
          if (d < 0) {
            state = S_FAILED;
            break;
          }
          this.hex = (this.hex << 4) | d;
          if (--this.hexLeft === 0) {
            this.escapedUnit(this.hex);
            state = S_STRING;
          }
          break;
        }
        case S_FAILED:
        case S_DONE:
          // after a complete top-level value only whitespace may follow
          if (state === S_DONE) {
            while (i < end && WS[b[i]!] === 1) i++;
            if (i < end) state = S_FAILED;
          }
          this.state = state;
          return;
      }
    }
    this.state = state;
  }

  private escaped(byte: number): void {
    const mode = this.strMode;
    if (mode === STR_TEXT) this.text++;
    else if (mode === STR_KEY) {
      // escaped keys never match a schema key (keys metering reads are plain)
      this.keyLen = KEY_MAX + 1;
    } else if (mode === STR_CAPTURE) {
      if (this.capLen < STRING_MAX) this.capBuf[this.capLen] = byte;
      this.capLen++;
    }
  }

  private escapedUnit(unit: number): void {
    const mode = this.strMode;
    // a low surrogate completes the pair its high surrogate already counted
    if (mode === STR_TEXT) {
      if (unit < 0xdc00 || unit > 0xdfff) this.text++;
    } else if (mode === STR_KEY) this.keyLen = KEY_MAX + 1;
    else if (mode === STR_CAPTURE) this.capLen = STRING_MAX + 1; // \u in a model name: refused
  }

  private endString(): number {
    const mode = this.strMode;
    if (mode === STR_KEY || (mode === STR_SKIP && this.keyLen === -1)) {
      // a key: choose the node of its value
      let child: JsonNode | null = null;
      if (mode === STR_KEY && this.keyLen <= KEY_MAX) child = this.member(this.nodes[this.depth]!);
      this.keyLen = 0;
      this.next = child;
      return S_COLON;
    }
    if (mode === STR_CAPTURE) {
      const slot = this.capSlot;
      if (this.capLen <= STRING_MAX) {
        this.strings[slot] = this.captured(slot);
        this.stringBad[slot] = 0;
      } else {
        this.strings[slot] = null;
        this.stringBad[slot] = 1;
      }
    } else if (mode === STR_BADCOUNT) {
      this.countState[this.numSlot] = BAD;
    }
    return this.afterValue();
  }

  /** The string captured in capBuf for `slot`: the last one of the slot again when its bytes are the same. */
  private captured(slot: number): string {
    const n = this.capLen;
    const cb = this.capBuf;
    const last = this.lastCap[slot]!;
    const prev = this.lastCapStr[slot] ?? null;
    if (prev !== null && last.length === n) {
      let j = 0;
      while (j < n && last[j] === cb[j]) j++;
      if (j === n) return prev;
    }
    const str = Buffer.from(cb.buffer, cb.byteOffset, n).toString('utf8');
    this.lastCap[slot] = cb.slice(0, n);
    this.lastCapStr[slot] = str;
    return str;
  }

  /** The node of the member whose name is `b[start, start + n)`, or null. */
  private memberAt(node: JsonNode, b: Uint8Array, start: number, n: number): JsonNode | null {
    const keys = node.keys!;
    for (let k = 0; k < keys.length; k++) {
      const name = keys[k]!;
      if (name.length !== n) continue;
      let j = 0;
      while (j < n && name[j] === b[start + j]) j++;
      if (j === n) return node.keyNodes![k]!;
    }
    return null;
  }

  /** The node of the member whose name is in keyBuf, or null. */
  private member(node: JsonNode): JsonNode | null {
    return this.memberAt(node, this.keyBuf, 0, this.keyLen);
  }

  private endNumber(): void {
    const slot = this.numSlot;
    if (slot < 0) return;
    const v = this.numVal;
    if (this.numBad || this.numDigits === 0 || this.numDigits > 16 || v > MAX_COUNT) this.countState[slot] = BAD;
    else {
      this.counts[slot] = v;
      this.countState[slot] = SEEN;
    }
  }

  private startValue(c: number): number {
    const node = this.next;
    const deep = this.deepFrom > 0;
    if (c === 0x22) {
      if (deep || node?.text === true || node?.deepText === true) this.strMode = STR_TEXT;
      else if (node?.str !== undefined) {
        this.strMode = STR_CAPTURE;
        this.capSlot = node.str;
        this.capLen = 0;
      } else if (node?.count !== undefined) {
        this.strMode = STR_BADCOUNT;
        this.numSlot = node.count;
      } else this.strMode = STR_SKIP;
      return S_STRING;
    }
    if (c === 0x7b || c === 0x5b) {
      if (this.depth === MAX_DEPTH) return S_FAILED;
      if (node?.count !== undefined) this.countState[node.count] = BAD;
      if (node?.str !== undefined) this.stringBad[node.str] = 1;
      const d = ++this.depth;
      this.kinds[d] = c === 0x7b ? OBJ : ARR;
      if (d === 1 && c === 0x5b && node === this.rootObject) {
        // a top-level array: each element is a record
        this.topArray = true;
        this.recordDepth = 1;
        this.nodes[d] = this.arrayRoot;
      } else this.nodes[d] = node !== null && (c === 0x7b ? node.keys : node.items) ? node : null;
      if (node?.deepText === true && this.deepFrom === 0) this.deepFrom = d;
      if (c === 0x7b) return S_KEY;
      this.next = this.nodes[d]?.items ?? null;
      return S_VALUE;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      this.numSlot = node?.count ?? -1;
      this.numVal = c === 0x2d ? 0 : c - 0x30;
      this.numBad = c === 0x2d;
      this.numDigits = c === 0x2d ? 0 : 1;
      return S_NUMBER;
    }
    if (c === 0x74 || c === 0x66 || c === 0x6e) {
      // true/false/null: a count that is a literal is bad, except null (absent, as OpenAI's `"usage": null`)
      if (node?.count !== undefined && c !== 0x6e) this.countState[node.count] = BAD;
      if (node?.flag !== undefined && c !== 0x6e) {
        this.counts[node.flag] = c === 0x74 ? 1 : 0;
        this.countState[node.flag] = SEEN;
      }
      return S_LITERAL;
    }
    if (c === 0x5d && this.kinds[this.depth] === ARR && this.depth > 0) {
      // `[]`: an empty array closes right after its opening bracket
      return this.close();
    }
    return S_FAILED;
  }

  /** After a scalar value (or a closed container) at the current depth. */
  private afterValue(): number {
    if (this.depth === this.recordDepth) {
      if (this.depth === 0) {
        this.emit();
        return S_DONE;
      }
      this.emit();
    }
    return this.depth === 0 ? S_DONE : S_AFTER;
  }

  private close(): number {
    const d = this.depth--;
    const mo = this.nodes[d]?.modalityOf;
    if (mo !== undefined && this.kinds[d] === OBJ) this.foldModality(mo);
    if (this.deepFrom === d) this.deepFrom = 0;
    if (d === 1 && this.topArray) return S_DONE;
    return this.afterValue();
  }

  /** A modality element closed: its count is added to its modality's slot; the element's slots are cleared. */
  private foldModality(mo: readonly (readonly [string, number])[]): void {
    const cs = this.countState;
    const m = this.strings[MODALITY_STRING_SLOT];
    if (cs[MODALITY_COUNT_SLOT] === SEEN && m !== null && m !== undefined) {
      for (const [name, slot] of mo) {
        if (name !== m) continue;
        const sum = (cs[slot] === SEEN ? this.counts[slot]! : 0) + this.counts[MODALITY_COUNT_SLOT]!;
        if (sum > MAX_COUNT) cs[slot] = BAD;
        else if (cs[slot] !== BAD) {
          this.counts[slot] = sum;
          cs[slot] = SEEN;
        }
      }
    } else if (cs[MODALITY_COUNT_SLOT] === BAD) {
      for (const [name, slot] of mo) if (name === m) cs[slot] = BAD;
    }
    cs[MODALITY_COUNT_SLOT] = UNSEEN;
    this.strings[MODALITY_STRING_SLOT] = null;
    this.stringBad[MODALITY_STRING_SLOT] = 0;
  }

  private emit(): void {
    this.records++;
    this.onRecord(this);
    this.clearRecord();
  }
}

