/**
 * The model rule of a check: which model a request asks for. In the decision order it comes after
 * the key, expiry and account rules and after both money rules (empty wallet, key spend limit)
 * (docs/models.md: the model rule of the decision, allowed-model patterns, known endpoints).
 *
 * Only restricted keys get here (decision.ts reads the model lazily). The answer is either a model
 * read with certainty — exactly the one the upstream will run — or `uncertain` with a reason that
 * completes "This key is limited to certain models and <reason>.". The rule is positive:
 *   1. the path must be plain and name an endpoint of the entry's table (endpoints.ts, plus the
 *      operator's rows); an endpoint that takes no model (files, batches, listings) refuses;
 *   2. the model is read from where that endpoint carries it: the body (JSON → json-scan.ts,
 *      multipart → multipart.ts), a `{model}` path segment, or a Gemini/Vertex/model-resource
 *      path (path.ts);
 *   3. every other place that could name a model — the body of a path endpoint, a `model` query
 *      parameter — is absent or names the same model.
 */
import { pathOnly, type Family } from '../families/index.ts';
import { MAX_SCAN_BYTES, bodyBytes, scanJsonModel, type JsonModelScan, type JsonRefusal } from './json-scan.ts';
import { isUtf8Charset, parseContentType } from './header-params.ts';
import { scanMultipartModel, type MultipartRefusal } from './multipart.ts';
import { matchEndpoint, type EndpointTable } from './endpoints.ts';
import { isValidModelName, MODEL_NAME_RULE } from './names.ts';
import { readPathModel, type PathRefusal } from './path.ts';
import { queryNamesOtherModel } from './query.ts';

export { allowsEveryModel, isValidModelPattern, modelAllowed, modelPatternError, qualifyModel } from './patterns.ts';
export { MAX_SCAN_BYTES } from './json-scan.ts';
export { BUILTIN_ENDPOINTS, compileModelEndpoints, formatBareProviders, parseBareProviders, withBareProviders, type EndpointTable } from './endpoints.ts';

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
  /** `scanJsonModel(body)`, when a scan of the same bytes already read it (the Check's usage guarantee). */
  readonly bodyJsonModel?: JsonModelScan;
  /** The operator's extra endpoints (KEYGATE_MODEL_ENDPOINTS), tried before the built-in ones. */
  readonly endpoints?: EndpointTable;
}

export type ModelRead =
  | {
      readonly kind: 'model';
      readonly model: string;
      /** A bare name as the operator says it is meant at this entry (KEYGATE_BARE_MODEL_PROVIDER): `provider/model`. */
      readonly alias?: string;
    }
  | {
      readonly kind: 'uncertain';
      readonly reason: string;
      /**
       * Set when the gateway, not the client, is at fault (no body reaches the key check): the
       * whole message for the client, and a note for the operator's log.
       */
      readonly gatewayCannotCheck?: { readonly message: string; readonly log: string };
    };

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
  | 'body-disagrees'
  | 'query-disagrees'
  | 'unknown-endpoint'
  | 'no-model-endpoint';

const NAME_RULE = `is not a model name keygate can vouch for (${MODEL_NAME_RULE})`;

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
  'query-disagrees': 'the query string names a model ("model" or a look-alike parameter) other than the one the request is checked for',
  'unknown-endpoint':
    'the request is to an endpoint keygate does not know how to read the model for (only listed model endpoints are checked; the gateway operator can add routes)',
  'no-model-endpoint':
    'the request is to an endpoint that takes no model (files, batches, listings, assistants), so it cannot be shown to use an allowed one; use a key without model limits for it',
};

/** No body reached the key check: the gateway cannot check this route for a restricted key. */
const NO_BODY: ModelRead = Object.freeze({
  kind: 'uncertain',
  reason: REASONS['no-body'],
  gatewayCannotCheck: Object.freeze({
    message:
      'The gateway cannot check the model for this route: no request body reaches its key check, so a key limited to certain models cannot be used here. Use a key without model limits on this route, or ask the gateway operator to send request bodies to the key check.',
    log: 'a key limited to models was refused because no request body reaches keygate for a route whose model is in the body; the proxy in front of keygate does not send bodies (Caddy forward_auth, nginx auth_request, Envoy without with_request_body). Route such keys through Envoy with with_request_body, see docs/models.md',
  }),
});

const UNCERTAIN = new Map<Refusal, ModelRead>();
function uncertain(r: Refusal): ModelRead {
  if (r === 'no-body') return NO_BODY;
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

/** What the body says about the model, by Content-Type: a model, none, or a refusal. */
function scanBody(req: ModelRequest & { readonly body: Uint8Array | string }): { kind: 'model'; model: string } | { kind: 'absent' } | Refusal {
  if (req.bodyTruncated) return 'truncated';
  const bytes = bodyBytes(req.body);
  if (bytes === null) return 'invalid-utf8';
  if (bytes.length > MAX_SCAN_BYTES) return 'too-large';
  let kind: 'json' | 'multipart' = 'json';
  let boundary: string | undefined;
  if (req.contentType !== undefined && req.contentType.trim() !== '') {
    const ct = parseContentType(req.contentType);
    if (ct === null) return 'unreadable-content-type';
    if (ct.value === 'multipart/form-data') {
      kind = 'multipart';
      boundary = ct.params.get('boundary');
      if (boundary === undefined) return 'invalid-multipart';
    } else if (ct.value === 'application/json' || (ct.value.startsWith('application/') && ct.value.endsWith('+json'))) {
      if (!isUtf8Charset(ct.params.get('charset'))) return 'charset';
    } else {
      return 'content-type';
    }
  }
  const r = kind === 'multipart' ? scanMultipartModel(bytes, boundary!) : (req.bodyJsonModel ?? scanJsonModel(bytes));
  return r.kind === 'refused' ? r.refusal : r;
}

/** The model in the body of a body endpoint. */
function readBodyModel(req: ModelRequest): ModelRead {
  if (!hasBody(req.body)) {
    const method = req.method.toUpperCase();
    return method === 'GET' || method === 'HEAD' || method === 'DELETE' || method === 'OPTIONS'
      ? uncertain('no-model')
      : uncertain('no-body');
  }
  const r = scanBody({ ...req, body: req.body });
  if (typeof r === 'string') return uncertain(r);
  if (r.kind === 'absent') return uncertain('no-model');
  return named(r.model);
}

/**
 * A `{model}` path endpoint (Azure-style deployments, legacy engines, the operator's routes): a
 * body that names a model must name the same one, and must be read completely to show it.
 */
function bodyAgreesStrictly(req: ModelRequest, model: string): Refusal | null {
  if (!hasBody(req.body)) return null;
  const r = scanBody({ ...req, body: req.body });
  if (typeof r === 'string') return r;
  return r.kind === 'absent' || r.model === model ? null : 'body-disagrees';
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
  const r = req.bodyJsonModel ?? scanJsonModel(req.body);
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

/** Raw characters a path segment may contain (path.ts narrows `%` further). */
const RAW_SEGMENT = /^[A-Za-z0-9._~:@+=,%-]+$/;

function plainPath(p: string): boolean {
  const segs = p.split('/');
  if (segs[0] !== '' || segs.length < 2) return false;
  for (let i = 1; i < segs.length; i++) {
    const s = segs[i]!;
    if (s === '' || s === '.' || s === '..' || !RAW_SEGMENT.test(s)) return false;
  }
  return true;
}

/** The model from where the matched endpoint carries it (before the query check). */
function readAtEndpoint(req: ModelRequest, p: string): ModelRead {
  if (!plainPath(p)) return uncertain('ambiguous-path');
  const match = matchEndpoint(req.family, req.method, p, req.endpoints);
  if (match.kind === 'no-model') return uncertain('no-model-endpoint');
  if (match.kind === 'unknown') return uncertain('unknown-endpoint');
  const place = match.endpoint.place;
  if (place === 'body') return readBodyModel(req);
  if (place === 'path') {
    const r = named(match.model!);
    if (r.kind !== 'model') return r;
    const disagree = bodyAgreesStrictly(req, r.model);
    return disagree === null ? r : uncertain(disagree);
  }
  const pr = readPathModel(req.family, req.method, p);
  if (pr.kind === 'refused') return uncertain(pr.refusal);
  if (pr.kind === 'none') return uncertain('unknown-endpoint');
  if (pr.form === 'method' && !agreesWithBody(req, pr.model)) return uncertain('body-disagrees');
  return named(pr.model);
}

/** The model a request names, or why it cannot be known with certainty. */
export function readModel(req: ModelRequest): ModelRead {
  const p = pathOnly(req.path);
  const r = readAtEndpoint(req, p);
  if (r.kind !== 'model') return r;
  if (p.length !== req.path.length && queryNamesOtherModel(req.path.slice(p.length), r.model)) return uncertain('query-disagrees');
  return withAlias(r, req);
}

/** A bare name at an entry whose family the operator maps to a provider also reads as `provider/name`. */
function withAlias(r: ModelRead & { kind: 'model' }, req: ModelRequest): ModelRead {
  const provider = req.endpoints?.bareProviders?.get(req.family);
  if (provider === undefined || r.model.includes('/')) return r;
  const alias = `${provider}/${r.model}`;
  return isValidModelName(alias) ? { kind: 'model', model: r.model, alias } : r;
}
