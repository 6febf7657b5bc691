/**
 * Phase 6 of a check: which model a request asks for (SPEC §1 row 6, §4; docs/models.md).
 *
 * Only restricted keys get here (decision.ts reads the model lazily). The answer is either a model
 * read with certainty — exactly the one the upstream will run — or `uncertain` with a reason that
 * completes "This key is limited to certain models and <reason>.". Strict: a request that names no
 * model at all (listing models, files, batches) is uncertain too, so a restricted key only ever
 * passes with a model that is provably allowed.
 *
 * Where the model is read from:
 *   1. the path, when it has a `models` segment (Google `…/models/{m}:{method}`, Vertex
 *      `…/publishers/{p}/models/{m}:{method}`, model resources `/v1/models/{m}`) — path.ts;
 *   2. otherwise the body, by Content-Type: `multipart/form-data` → the `model` field
 *      (multipart.ts); JSON (`application/json`, `application/*+json`, or none) → the top-level
 *      `model` (json-scan.ts). Any other Content-Type is uncertain.
 */
import type { Family } from '../family.ts';
import { MAX_SCAN_BYTES, bodyBytes, scanJsonModel, type JsonRefusal } from './json-scan.ts';
import { isUtf8Charset, parseContentType } from './header-params.ts';
import { scanMultipartModel, type MultipartRefusal } from './multipart.ts';
import { isValidModelName } from './names.ts';
import { readPathModel, type PathRefusal } from './path.ts';

export { allowsEveryModel, isValidModelPattern, modelAllowed, modelPatternError, qualifyModel } from './patterns.ts';
export { MAX_SCAN_BYTES } from './json-scan.ts';

export interface ModelRequest {
  readonly family: Family;
  readonly method: string;
  /** Path with query, as the proxy saw it. */
  readonly path: string;
  readonly contentType: string | undefined;
  /** The body as the proxy sent it, or undefined when it sent none. */
  readonly body: Uint8Array | string | undefined;
  /** True when the proxy says the body was cut short (allow_partial_message). */
  readonly bodyTruncated: boolean;
}

export type ModelRead =
  | { readonly kind: 'model'; readonly model: string }
  | { readonly kind: 'uncertain'; readonly reason: string };

type Refusal =
  | JsonRefusal
  | MultipartRefusal
  | PathRefusal
  | 'no-model'
  | 'no-body'
  | 'truncated'
  | 'content-type'
  | 'unreadable-content-type'
  | 'charset'
  | 'body-disagrees';

const NAME_RULE = 'is not a model name keygate can vouch for (1-256 characters of letters, digits and . _ : @ + = , ~ / -)';

/** Each reason completes "This key is limited to certain models and <reason>." */
const REASONS: Record<Refusal, string> = {
  'no-model': 'the request does not name a model, so it cannot be shown to use an allowed one',
  'no-body': 'no request body reached the key check to read the model from',
  truncated:
    'the request body is larger than the gateway reads for the key check, so its model cannot be verified; send a smaller request or use a key without model limits',
  'too-large': `the request body is larger than the ${MAX_SCAN_BYTES / 1024 / 1024} MiB the key check reads, so its model cannot be verified`,
  'content-type': 'the request body is neither JSON nor a multipart form, so its model cannot be read',
  'unreadable-content-type': 'the request\'s Content-Type header cannot be read unambiguously',
  charset: 'the request body is not in UTF-8, so its model cannot be read with certainty',
  'invalid-utf8': 'the request body is not valid UTF-8, so its model cannot be read with certainty',
  'invalid-json': 'the request body is not valid JSON, so its model cannot be read',
  'not-object': 'the request body is not a JSON object, so it names no model',
  'duplicate-model': 'the request names "model" more than once',
  'model-like-key': 'the request body has a field that some parsers read as "model" (such as another letter case)',
  'escaped-model-key': 'the request body spells the "model" field with escape sequences',
  'not-string': 'the request\'s "model" is not a string',
  'invalid-model-name': `the requested model name ${NAME_RULE}`,
  'invalid-multipart': 'the multipart form body is malformed or could be split differently by another parser',
  'model-like-field': 'the multipart form has a field that some parsers read as "model" (such as "Model" or "model[]")',
  'model-field-not-plain': 'the multipart "model" field is a file or carries its own encoding',
  'ambiguous-path':
    'the request path is ambiguous (encoded characters, dot segments, repeated slashes or an unexpected form), so its model cannot be read',
  'google-path-on-other-entry': 'the request path names a model the Google way at an entry that is not a Google entry',
  'body-disagrees': 'the request body names a different model than the request path',
};

const UNCERTAIN = new Map<Refusal, ModelRead>();
function uncertain(r: Refusal): ModelRead {
  let u = UNCERTAIN.get(r);
  if (u === undefined) UNCERTAIN.set(r, (u = Object.freeze({ kind: 'uncertain', reason: REASONS[r] })));
  return u;
}

const MAX_ECHOED = 128;
function named(model: string): ModelRead {
  if (isValidModelName(model)) return { kind: 'model', model };
  const shown = JSON.stringify(model.length > MAX_ECHOED ? `${model.slice(0, MAX_ECHOED)}…` : model);
  return { kind: 'uncertain', reason: `the requested model ${shown} ${NAME_RULE}` };
}

const hasBody = (body: Uint8Array | string | undefined): body is Uint8Array | string =>
  body !== undefined && body.length > 0;

/** The model in the body, by Content-Type. */
function readBodyModel(req: ModelRequest): ModelRead {
  const method = req.method.toUpperCase();
  if (!hasBody(req.body)) {
    return method === 'GET' || method === 'HEAD' || method === 'DELETE' || method === 'OPTIONS'
      ? uncertain('no-model')
      : uncertain('no-body');
  }
  if (req.bodyTruncated) return uncertain('truncated');
  const bytes = bodyBytes(req.body);
  if (bytes === null) return uncertain('invalid-utf8');
  if (bytes.length > MAX_SCAN_BYTES) return uncertain('too-large');
  let kind: 'json' | 'multipart' = 'json';
  let boundary: string | undefined;
  if (req.contentType !== undefined && req.contentType.trim() !== '') {
    const ct = parseContentType(req.contentType);
    if (ct === null) return uncertain('unreadable-content-type');
    if (ct.value === 'multipart/form-data') {
      kind = 'multipart';
      boundary = ct.params.get('boundary');
      if (boundary === undefined) return uncertain('invalid-multipart');
    } else if (ct.value === 'application/json' || (ct.value.startsWith('application/') && ct.value.endsWith('+json'))) {
      if (!isUtf8Charset(ct.params.get('charset'))) return uncertain('charset');
    } else {
      return uncertain('content-type');
    }
  }
  const r = kind === 'multipart' ? scanMultipartModel(bytes, boundary!) : scanJsonModel(bytes);
  if (r.kind === 'refused') return uncertain(r.refusal);
  if (r.kind === 'absent') return uncertain('no-model');
  return named(r.model);
}

/**
 * A Google path model, checked against a complete JSON body that also names one (defense in
 * depth: the Gemini and Vertex APIs take the model from the URL, but an upstream that preferred the
 * body must not see another model). A truncated or non-JSON body is not used: the path decides.
 */
function agreesWithBody(req: ModelRequest, model: string): boolean {
  if (!hasBody(req.body) || req.bodyTruncated) return true;
  const ct = req.contentType === undefined ? null : parseContentType(req.contentType);
  if (ct !== null && ct.value === 'multipart/form-data') return true;
  const r = scanJsonModel(req.body);
  if (r.kind === 'absent') return true;
  if (r.kind === 'refused') {
    return r.refusal === 'invalid-json' || r.refusal === 'not-object' || r.refusal === 'invalid-utf8' || r.refusal === 'too-large';
  }
  const b = r.model.toLowerCase();
  const slash = model.indexOf('/');
  const publisher = slash === -1 ? 'google' : model.slice(0, slash).toLowerCase();
  const bare = model.slice(slash + 1).toLowerCase();
  const resource = `publishers/${publisher}/models/${bare}`;
  if (b === bare || b === `models/${bare}` || b === resource) return true;
  return b.endsWith(`/${resource}`) && /^projects\/[^/]+\/locations\/[^/]+$/.test(b.slice(0, -resource.length - 1));
}

/** The model a request names, or why it cannot be known with certainty. */
export function readModel(req: ModelRequest): ModelRead {
  const p = readPathModel(req.family, req.method, req.path);
  if (p.kind === 'refused') return uncertain(p.refusal);
  if (p.kind === 'model') {
    if (p.form === 'method' && !agreesWithBody(req, p.model)) return uncertain('body-disagrees');
    return named(p.model);
  }
  return readBodyModel(req);
}
