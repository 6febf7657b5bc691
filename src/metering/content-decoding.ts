/**
 * Response content decoding for metering: `gzip` (`x-gzip`), `deflate` (zlib-wrapped, or raw as
 * some servers send it) and `br`, streamed chunk by chunk through Node's zlib (its native
 * decoders; output arrives in chunks of `OUTPUT_CHUNK` bytes and is handed on at once, so it never
 * accumulates). Bounded:
 *
 * - decoded bytes: at most `maxDecodedBytes` per response; past it decoding stops (a
 *   decompression bomb costs CPU up to that bound, never memory);
 * - input waiting to be decoded: a batch of at most INPUT_BATCH bytes, and at most
 *   `maxPendingBytes` inside zlib (when Envoy does not wait for answers, `observability_mode`,
 *   chunks can arrive faster than they are decoded);
 * - decoder state: zlib's window (32 KiB) and state for gzip/deflate; for `br`, the window the
 *   sender declares, up to 16 MiB (the format's largest without the large-window extension, which
 *   is off).
 *
 * A broken stream (bad header, corrupt data, truncated at the end) or a bound passed is a
 * `failure`: reported, never thrown; what was decoded before it has been handed on.
 */
import * as zlib from 'node:zlib';

export type ContentEncoding = 'identity' | 'gzip' | 'deflate' | 'br';

export type DecodeFailure = 'unsupported-encoding' | 'corrupt' | 'truncated' | 'too-large' | 'backlog';

const OUTPUT_CHUNK = 16 * 1024;
/**
 * Encoded input is handed to zlib in batches of this many bytes (or at the end): every zlib write
 * is a trip to the thread pool, far dearer than the few bytes of one SSE event it would decode.
 * Metering needs the counts only at the end, so decoding later costs nothing but this buffer.
 */
const INPUT_BATCH = 16 * 1024;

/** The most output of a response decoded at once (synchronously). */
const SYNC_MAX_OUTPUT = 1024 * 1024;

/** deflate: RFC 9110 says zlib-wrapped; a raw stream is told by its first two bytes (the CMF/FLG check). */
function zlibWrapped(b: Buffer): boolean {
  return b.length >= 2 && (b[0]! & 0x0f) === 8 && b[0]! >> 4 <= 7 && ((b[0]! << 8) | b[1]!) % 31 === 0;
}

/** The encoding of a `content-encoding` value, or null when keygate cannot decode it (several, or unknown). */
export function contentEncodingOf(header: string | undefined): ContentEncoding | null {
  if (header === undefined) return 'identity';
  const v = header.trim().toLowerCase();
  if (v === '' || v === 'identity') return 'identity';
  if (v === 'gzip' || v === 'x-gzip') return 'gzip';
  if (v === 'deflate') return 'deflate';
  if (v === 'br') return 'br';
  return null;
}

export interface DecoderLimits {
  readonly maxDecodedBytes: number;
  readonly maxPendingBytes: number;
}

/**
 * A streaming decoder: `write` chunks (copied: the caller may reuse its buffer), `end()` resolves
 * once everything written has been decoded and handed to `onData`. Failures are reported once
 * through `failure` and stop decoding.
 */
export class ContentDecoder {
  private readonly encoding: Exclude<ContentEncoding, 'identity'>;
  private readonly onData: (b: Buffer) => void;
  private readonly limits: DecoderLimits;
  private stream: zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress | null = null;
  private decoded = 0;
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private done: Promise<void> | null = null;
  private settle: (() => void) | null = null;
  failure: DecodeFailure | null = null;
  /** Bytes handed on. */
  get decodedBytes(): number {
    return this.decoded;
  }

  constructor(encoding: Exclude<ContentEncoding, 'identity'>, onData: (b: Buffer) => void, limits: DecoderLimits) {
    this.encoding = encoding;
    this.onData = onData;
    this.limits = limits;
  }

  private open(s: zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress): void {
    this.stream = s;
    s.on('data', (b: Buffer) => {
      if (this.failure !== null) return;
      this.decoded += b.length;
      if (this.decoded > this.limits.maxDecodedBytes) {
        this.fail('too-large');
        return;
      }
      this.onData(b);
    });
    s.on('error', (e: NodeJS.ErrnoException) => this.fail(e.code === 'Z_BUF_ERROR' ? 'truncated' : 'corrupt'));
    s.on('end', () => this.finishWait());
  }

  private fail(f: DecodeFailure): void {
    if (this.failure !== null) return;
    this.failure = f;
    const s = this.stream;
    this.stream = null;
    s?.destroy();
    this.finishWait();
  }

  private finishWait(): void {
    const s = this.settle;
    this.settle = null;
    s?.();
  }

  write(chunk: Uint8Array): void {
    if (this.failure !== null || chunk.length === 0) return;
    this.batch.push(Buffer.from(chunk));
    this.batchBytes += chunk.length;
    if (this.batchBytes >= INPUT_BATCH) this.flushBatch();
  }

  private flushBatch(): void {
    if (this.batchBytes === 0 || this.failure !== null) return;
    const b = this.batch.length === 1 ? this.batch[0]! : Buffer.concat(this.batch, this.batchBytes);
    this.batch = [];
    this.batchBytes = 0;
    if (this.stream === null) {
      const o = { chunkSize: OUTPUT_CHUNK };
      if (this.encoding === 'gzip') this.open(zlib.createGunzip(o));
      else if (this.encoding === 'br') this.open(zlib.createBrotliDecompress(o));
      else this.open(zlibWrapped(b) ? zlib.createInflate(o) : zlib.createInflateRaw(o));
    }
    const s = this.stream!;
    if (s.writableLength + b.length > this.limits.maxPendingBytes) {
      this.fail('backlog');
      return;
    }
    s.write(b);
  }

  /**
   * A whole response that fits one batch (a JSON answer) is decoded synchronously, its output at
   * most SYNC_MAX_OUTPUT: creating a zlib stream and a thread-pool trip cost ten times the
   * decoding. False (nothing consumed) when it does not decode that way: the streaming path then
   * reports what is wrong, after handing on what it can.
   */
  private decodeAtOnce(): boolean {
    const b = this.batch.length === 1 ? this.batch[0]! : Buffer.concat(this.batch, this.batchBytes);
    const o = { maxOutputLength: SYNC_MAX_OUTPUT };
    let out: Buffer;
    try {
      if (this.encoding === 'gzip') out = zlib.gunzipSync(b, o);
      else if (this.encoding === 'br') out = zlib.brotliDecompressSync(b, o);
      else out = zlibWrapped(b) ? zlib.inflateSync(b, o) : zlib.inflateRawSync(b, o);
    } catch {
      return false;
    }
    this.batch = [];
    this.batchBytes = 0;
    this.decoded += out.length;
    if (this.decoded > this.limits.maxDecodedBytes) this.failure = 'too-large';
    else this.onData(out);
    return true;
  }

  /** The response ended: resolves when all of it is decoded (or decoding failed). */
  end(): Promise<void> {
    if (this.done) return this.done;
    if (this.stream === null && this.failure === null && this.batchBytes > 0 && this.decodeAtOnce()) return (this.done = Promise.resolve());
    this.flushBatch();
    if (this.failure !== null || this.stream === null) return (this.done = Promise.resolve()); // failed, or nothing written
    this.done = new Promise<void>((resolve) => {
      this.settle = resolve;
    });
    this.stream.end();
    return this.done;
  }

}
