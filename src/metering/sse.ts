/**
 * An incremental reader of `text/event-stream` (the WHATWG "event stream" format) that keeps no
 * event: the `data` of each event is handed on as byte ranges of the chunks it arrives in, with
 * `\n` between its lines, while it streams; nothing is buffered but a field name of at most 16
 * bytes. Lines end with CRLF, LF or CR (a CRLF split across chunks is one end); a line starting
 * with `:` is a comment; other fields (`event`, `id`, `retry`) are skipped. A field name is ASCII,
 * so a split inside a UTF-8 character of a value changes nothing here (values are passed as bytes).
 *
 * Bounds: an event whose data passes `maxEventBytes` is cut: its data stops being handed on, the
 * sink is told (`oversized`), and the reader goes on with the next event; an event that never ends
 * costs the same fixed memory as any other.
 */
export interface SseSink {
  /** A new event's first data line starts. */
  begin(): void;
  /** Data bytes `b[start, end)` of the current event (a `\n` between lines comes as its own call). */
  data(b: Uint8Array, start: number, end: number): void;
  /** The event ended (blank line) with all its data handed on. */
  end(): void;
  /** The event's data passed the bound: it is dropped (no `end`). */
  oversized(): void;
}

const NL = new Uint8Array([0x0a]);
/** The typed array's own search (Buffer's override adds argument handling and a native call per use). */
const indexOf = Uint8Array.prototype.indexOf;
const FIELD_MAX = 16;

// line states
const L_FIELD = 0; // reading a field name at the start of a line
const L_SPACE = 1; // after `data:`, an optional space
const L_DATA = 2; // in a data value
const L_SKIP = 3; // in a line that is skipped (comment, other field)

/** `data` as bytes. */
const DATA = [0x64, 0x61, 0x74, 0x61];

export class SseReader {
  private readonly sink: SseSink;
  private readonly maxEventBytes: number;
  private line = L_FIELD;
  private readonly field = new Uint8Array(FIELD_MAX);
  private fieldLen = 0;
  private afterCr = false;
  /** Data lines of the current event so far (0: no event open). */
  private dataLines = 0;
  private eventBytes = 0;
  private cut = false;
  /** Events dispatched and cut. */
  events = 0;
  oversizedEvents = 0;

  constructor(sink: SseSink, maxEventBytes: number) {
    this.sink = sink;
    this.maxEventBytes = maxEventBytes;
  }

  write(b: Uint8Array, start = 0, end = b.length): void {
    let i = start;
    if (this.afterCr && i < end) {
      this.afterCr = false;
      if (b[i] === 0x0a) i++; // the LF of a CRLF split across chunks
    }
    // the next CR at or after i (end: none in the chunk): most streams have none, so the end of a
    // line is found by one native search for LF
    let cr = -1;
    while (i < end) {
      const line = this.line;
      if (line === L_DATA || line === L_SKIP) {
        if (cr < i) {
          cr = indexOf.call(b, 0x0d, i);
          if (cr === -1 || cr > end) cr = end;
        }
        let j = indexOf.call(b, 0x0a, i);
        if (j === -1 || j > end) j = end;
        if (cr < j) j = cr;
        if (line === L_DATA && j > i) this.dataBytes(b, i, j);
        if (j >= end) return;
        i = this.endOfLine(b, j, end);
        continue;
      }
      const c = b[i]!;
      if (c === 0x0a || c === 0x0d) {
        if (line === L_FIELD && this.fieldLen === 0) this.dispatch();
        else this.fieldLine();
        i = this.endOfLine(b, i, end);
        continue;
      }
      if (line === L_SPACE) {
        this.line = L_DATA;
        if (c === 0x20) i++;
        continue;
      }
      // L_FIELD
      if (c === 0x3a) {
        i++;
        if (this.fieldLen === 0) this.line = L_SKIP; // a comment
        else if (this.isData()) this.startDataLine();
        else this.line = L_SKIP;
        this.fieldLen = 0;
        continue;
      }
      if (this.fieldLen < FIELD_MAX) this.field[this.fieldLen] = c;
      this.fieldLen = this.fieldLen < FIELD_MAX ? this.fieldLen + 1 : FIELD_MAX + 1;
      i++;
    }
  }

  private isData(): boolean {
    return this.fieldLen === 4 && this.field[0] === DATA[0] && this.field[1] === DATA[1] && this.field[2] === DATA[2] && this.field[3] === DATA[3];
  }

  /** A line that was only a field name (`data` alone is an empty data line). */
  private fieldLine(): void {
    if (this.line === L_FIELD && this.isData()) this.startDataLine();
    this.fieldLen = 0;
  }

  private startDataLine(): void {
    this.line = L_SPACE;
    if (this.dataLines === 0) {
      this.eventBytes = 0;
      this.cut = false;
      this.sink.begin();
    } else this.dataBytes(NL, 0, 1);
    this.dataLines++;
  }

  private dataBytes(b: Uint8Array, start: number, end: number): void {
    if (this.cut) return;
    this.eventBytes += end - start;
    if (this.eventBytes > this.maxEventBytes) {
      this.cut = true;
      this.oversizedEvents++;
      this.sink.oversized();
      return;
    }
    this.sink.data(b, start, end);
  }

  /** `b[i]` is CR or LF: ends the line; returns the index after it. */
  private endOfLine(b: Uint8Array, i: number, end: number): number {
    this.line = L_FIELD;
    this.fieldLen = 0;
    if (b[i] === 0x0d) {
      if (i + 1 < end) return b[i + 1] === 0x0a ? i + 2 : i + 1;
      this.afterCr = true;
    }
    return i + 1;
  }

  private dispatch(): void {
    if (this.dataLines === 0) return;
    this.dataLines = 0;
    if (this.cut) {
      this.cut = false;
      return;
    }
    this.events++;
    this.sink.end();
  }
}
