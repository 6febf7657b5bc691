/**
 * The `model` field of a `multipart/form-data` body (OpenAI audio transcriptions and translations,
 * image edits and variations), read strictly (docs/models.md, "Multipart"):
 *   - the body starts with the first delimiter (no preamble) and ends at the close delimiter
 *     (optionally followed by one CRLF); every `--boundary` in the body is a delimiter keygate
 *     consumed, so no parser that splits on bare LF or ignores line starts sees other parts;
 *   - part headers are CRLF lines `Name: value` (no folding), with exactly one
 *     `Content-Disposition: form-data; name=…`;
 *   - exactly one part is named `model`; it has no filename, only Content-Disposition and at most a
 *     `text/plain` UTF-8 Content-Type, and valid UTF-8 content; no other part has a name some
 *     framework reads as `model` (`Model`, `model[]`, `model.x`, percent-encoded forms).
 * Part contents (files) are never copied or decoded: the delimiters are found with Buffer.indexOf.
 */
import { Buffer, isUtf8 } from 'node:buffer';
import { couldBeReadAsModel, type BodyScan } from './names.ts';
import { isUtf8Charset, parseContentType, parseHeaderParams } from './header-params.ts';

export type MultipartRefusal =
  | 'invalid-multipart'
  | 'duplicate-model'
  | 'model-like-field'
  | 'model-field-not-plain'
  | 'invalid-utf8';

export type MultipartScan = BodyScan<MultipartRefusal>;

const BOUNDARY = /^[0-9A-Za-z'()+_,./:=? -]{0,69}[0-9A-Za-z'()+_,./:=?-]$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Header values: visible ASCII, space, tab, and UTF-8 (filenames); no other control characters. */
const HEADER_VALUE = /^[^\x00-\x08\x0a-\x1f\x7f]*$/;
const MAX_HEADER_BLOCK = 16 * 1024;
const CRLF = Buffer.from('\r\n');
const CRLFCRLF = Buffer.from('\r\n\r\n');

const refused = (refusal: MultipartRefusal): MultipartScan => ({ kind: 'refused', refusal });

/** A boundary RFC 2046 allows: 1-70 of its characters, not ending in a space. */
export function isValidBoundary(boundary: string): boolean {
  return BOUNDARY.test(boundary);
}

/** For a part name other than `model`: could a form library map it to `model` (`Model`, `model[]`, `model.x`, `mod%65l`)? */
function nameCouldBeModel(name: string): boolean {
  if (name.includes('%') || name.includes('\\')) return true;
  const base = name.split(/[[.]/)[0]!;
  return couldBeReadAsModel(name) || base === 'model' || couldBeReadAsModel(base);
}

interface Part {
  readonly name: string;
  readonly hasFilename: boolean;
  readonly headers: ReadonlyMap<string, string>;
}

/** One part's header block; null when it is not strictly readable. */
function parsePartHeaders(block: Buffer): Part | null {
  if (block.length > MAX_HEADER_BLOCK || !isUtf8(block)) return null;
  const headers = new Map<string, string>();
  for (const line of block.toString('utf8').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) return null;
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (!HEADER_NAME.test(name) || !HEADER_VALUE.test(value) || value.includes('\r') || headers.has(name)) return null;
    headers.set(name, value);
  }
  const cd = headers.get('content-disposition');
  if (cd === undefined) return null;
  const disposition = parseHeaderParams(cd, (v) => v === 'form-data');
  const name = disposition?.params.get('name');
  if (disposition === null || name === undefined) return null;
  return { name, hasFilename: disposition.params.has('filename'), headers };
}

/** A model part carries nothing that a framework could decode into another value. */
function isPlainField(part: Part): boolean {
  if (part.hasFilename) return false;
  for (const [h, v] of part.headers) {
    if (h === 'content-disposition') continue;
    if (h !== 'content-type') return false;
    const ct = parseContentType(v);
    if (ct === null || ct.value !== 'text/plain' || !isUtf8Charset(ct.params.get('charset'))) return false;
    for (const p of ct.params.keys()) if (p !== 'charset') return false;
  }
  return true;
}

/** Reads the one `model` field of a multipart/form-data body with the given boundary. */
export function scanMultipartModel(body: Buffer, boundary: string): MultipartScan {
  if (!isValidBoundary(boundary)) return refused('invalid-multipart');
  const dash = Buffer.from(`--${boundary}`, 'latin1');
  const delimiter = Buffer.concat([CRLF, dash]);
  const n = body.length;
  if (!body.subarray(0, dash.length).equals(dash) || !body.subarray(dash.length, dash.length + 2).equals(CRLF)) {
    return refused('invalid-multipart');
  }
  let i = dash.length + 2;
  let consumed = 1;
  let model: string | undefined;
  for (;;) {
    const next = body.indexOf(delimiter, i);
    const headerEnd = body.indexOf(CRLFCRLF, i);
    if (next === -1 || headerEnd === -1 || headerEnd + 4 > next) return refused('invalid-multipart');
    const part = parsePartHeaders(body.subarray(i, headerEnd));
    if (part === null) return refused('invalid-multipart');
    if (part.name === 'model') {
      if (model !== undefined) return refused('duplicate-model');
      if (!isPlainField(part)) return refused('model-field-not-plain');
      const content = body.subarray(headerEnd + 4, next);
      if (!isUtf8(content)) return refused('invalid-utf8');
      model = content.toString('utf8');
    } else if (nameCouldBeModel(part.name)) {
      return refused('model-like-field');
    }
    consumed++;
    const after = next + delimiter.length;
    if (body[after] === 0x2d && body[after + 1] === 0x2d) {
      const rest = n - (after + 2);
      if (rest !== 0 && !(rest === 2 && body[after + 2] === 0x0d && body[after + 3] === 0x0a)) return refused('invalid-multipart');
      break;
    }
    if (body[after] !== 0x0d || body[after + 1] !== 0x0a) return refused('invalid-multipart');
    i = after + 2;
  }
  // Every `--boundary` in the body must be one of the delimiters above.
  let seen = 0;
  for (let at = body.indexOf(dash); at !== -1; at = body.indexOf(dash, at + 1)) {
    if (++seen > consumed) return refused('invalid-multipart');
  }
  if (seen !== consumed) return refused('invalid-multipart');
  return model === undefined ? { kind: 'absent' } : { kind: 'model', model };
}
