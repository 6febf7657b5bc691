/**
 * The model a request path names (docs/models.md, "Paths"):
 *   - Gemini API   `…/{version}/models/{model}:{method}`          (`/v1beta`, `/v1`, `/v1alpha`, …)
 *   - Vertex AI    `…/publishers/{publisher}/models/{model}:{method}`, with or without
 *                  `projects/{p}/locations/{l}/` before it
 *   - model resources (GET/HEAD/DELETE): OpenAI and Anthropic `/v1/models/{model}`, Gemini
 *                  `/{version}/models/{model}` and its `/operations/{id}`, Vertex
 *                  `…/publishers/{publisher}/models/{model}`
 *
 * Any path that has a `models` segment must be plain: no empty (repeated or trailing slash), `.`
 * or `..` segments, no characters outside a small ASCII set, one `models` segment only (no
 * look-alikes such as `Models` or `mod%65ls`), and percent-encoding only in the model part of an
 * OpenAI/Anthropic model resource (where the SDKs encode `/` as `%2F`). Otherwise the path is
 * refused as ambiguous: a server that decodes or normalises it differently could route it to
 * another model.
 */
import { familyModule, pathOnly, type Family } from '../families/index.ts';
import { isValidModelName } from './names.ts';

export type PathRefusal = 'ambiguous-path' | 'google-path-on-other-entry' | 'invalid-model-name';

export type PathRead =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'model';
      readonly model: string;
      /** `method`: a Google `{model}:{method}` call; `resource`: a read or delete of the model itself. */
      readonly form: 'method' | 'resource';
    }
  | { readonly kind: 'refused'; readonly refusal: PathRefusal };

const NONE: PathRead = Object.freeze({ kind: 'none' });
const refused = (refusal: PathRefusal): PathRead => ({ kind: 'refused', refusal });

/** Raw characters a segment of a model path may contain. */
const RAW_SEGMENT = /^[A-Za-z0-9._~:@+=,%-]+$/;
const VERSION = /^v\d+(?:(?:alpha|beta)\d*)?$/;
const GOOGLE_METHOD = /^[A-Za-z][A-Za-z0-9]*$/;
const PERCENT = /%([0-9A-Fa-f]{2})/g;
/** Characters a percent-escape in a model name may stand for (not `%` itself: no double decoding). */
const DECODABLE = /^[A-Za-z0-9._:@/-]$/;

/**
 * How many segments the most lenient server could read as `models`: percent-escapes decoded
 * (repeatedly: double encoding), `\\` taken as `/`, path parameters (`;x`) cut, any letter case.
 */
function looseModelsSegments(path: string): number {
  let p = path;
  for (let k = 0; k < 3 && p.includes('%'); k++) {
    p = p.replace(PERCENT, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
  }
  let count = 0;
  for (const seg of p.split(/[/\\]/)) {
    const semi = seg.indexOf(';');
    if ((semi === -1 ? seg : seg.slice(0, semi)).trim().toLowerCase() === 'models') count++;
  }
  return count;
}

/** Strict percent-decoding of a model part; null when an escape is malformed or not a model character. */
function decodeModelPart(seg: string): string | null {
  let ok = true;
  const out = seg.replace(/%(..)?/g, (_m, h: string | undefined) => {
    const c = h !== undefined && /^[0-9A-Fa-f]{2}$/.test(h) ? String.fromCharCode(parseInt(h, 16)) : '';
    if (!DECODABLE.test(c)) ok = false;
    return c;
  });
  return ok ? out : null;
}

const isReadMethod = (m: string) => m === 'GET' || m === 'HEAD';

function googlePathModel(segs: readonly string[], at: number, method: string, ownPublisher: string | null): PathRead {
  const tail = segs.slice(at + 1);
  const publisher = at >= 2 && segs[at - 2] === 'publishers' ? segs[at - 1]! : null;
  if (publisher === null && !VERSION.test(segs[at - 1] ?? '')) return refused('ambiguous-path');
  const qualify = (m: string) => (publisher === null || publisher === ownPublisher ? m : `${publisher}/${m}`);
  const first = tail[0]!;
  if (tail.some((seg) => seg.includes(':'))) {
    const parts = first.split(':');
    if (tail.length !== 1 || parts.length !== 2 || !GOOGLE_METHOD.test(parts[1]!)) return refused('ambiguous-path');
    return isValidModelName(parts[0]!) ? { kind: 'model', model: qualify(parts[0]!), form: 'method' } : refused('invalid-model-name');
  }
  const operation = tail.length === 3 && tail[1] === 'operations';
  if (!isReadMethod(method) || !(tail.length === 1 || operation)) return NONE;
  return isValidModelName(first) ? { kind: 'model', model: qualify(first), form: 'resource' } : refused('invalid-model-name');
}

function otherPathModel(segs: readonly string[], at: number, method: string): PathRead {
  const tail = segs.slice(at + 1);
  const prev = segs[at - 1] ?? '';
  const readOrDelete = isReadMethod(method) || method === 'DELETE';
  if (!readOrDelete) {
    // `/v1beta/models/x:generateContent` sent to an OpenAI or Anthropic entry: the upstream could be
    // a Gemini endpoint that runs the path's model, whatever the body says.
    const googleShaped = tail.length === 1 && tail[0]!.includes(':') && (VERSION.test(prev) || segs[at - 2] === 'publishers');
    return googleShaped ? refused('google-path-on-other-entry') : NONE;
  }
  if (prev !== 'v1') return NONE;
  const parts: string[] = [];
  for (const seg of tail) {
    const d = decodeModelPart(seg);
    if (d === null) return refused('ambiguous-path');
    parts.push(d);
  }
  const model = parts.join('/');
  return isValidModelName(model) ? { kind: 'model', model, form: 'resource' } : refused('invalid-model-name');
}

/** The model named by `path` (with query) for a request of `method` at an entry of `family`. */
export function readPathModel(family: Family, method: string, path: string): PathRead {
  const p = pathOnly(path);
  if (!/models/i.test(p) && !p.includes('%')) return NONE;
  const loose = looseModelsSegments(p);
  if (loose === 0) return NONE;
  const segs = p.split('/');
  const at = segs.indexOf('models');
  if (loose !== 1 || at === -1 || segs[0] !== '') return refused('ambiguous-path');
  const rules = familyModule(family).model;
  const google = rules.pathForm === 'gemini';
  for (let i = 1; i < segs.length; i++) {
    const s = segs[i]!;
    if (s === '' || s === '.' || s === '..' || !RAW_SEGMENT.test(s)) return refused('ambiguous-path');
    if (s.includes('%') && (google || i <= at)) return refused('ambiguous-path');
  }
  if (at === segs.length - 1) return NONE; // a listing: `/v1/models`
  const m = method.toUpperCase();
  return google ? googlePathModel(segs, at, m, rules.ownPublisher) : otherPathModel(segs, at, m);
}
