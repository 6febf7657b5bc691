/**
 * What the route schemas cannot say, added to the generated OpenAPI document: each operation's body
 * limit (`x-body-limit-bytes`, answered with 413 beyond), the error answers every `/v1` operation
 * may give whichever module registered it (authentication, rate limit, the store, a change's body and
 * CSRF check, a bad parameter), and the web page's session routes (their bodies are checked by hand
 * so that a cross-site sign-in is refused before its body is read).
 */

const error = { $ref: '#/components/schemas/Error' };
const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: { error: { type: 'object', required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } } } },
};
const json = (schema: unknown, description: string) => ({ description, content: { 'application/json': { schema } } });
const session = {
  type: 'object',
  required: ['signed_in'],
  properties: {
    signed_in: { type: 'boolean' },
    account: { type: 'string' },
    token_name: { type: 'string' },
    csrf_token: { type: 'string', description: 'send it as x-csrf-token with every change' },
    expires_at: { type: 'string', format: 'date-time' },
    sso: { type: 'boolean', description: 'present (true) when the console offers sign-in with SSO (GET /auth/login)' },
    user: { type: 'object', description: 'a person signed in with SSO', properties: { name: { type: 'string' }, email: { type: ['string', 'null'] }, sub: { type: 'string' } } },
    role: { type: 'string', enum: ['owner', 'developer', 'viewer'], description: "the person's role in `account`" },
    accounts: { type: 'array', description: 'the accounts the person may pick', items: { type: 'object', properties: { account: { type: 'string' }, role: { type: 'string' } } } },
  },
};
const errs = (codes: number[]) => Object.fromEntries(codes.map((c) => [String(c), json(error, 'Error')]));

/** The session routes' requests and answers. */
const SESSION_PATHS: Record<string, Record<string, unknown>> = {
  get: { responses: { 200: json(session, "The page's session, or {signed_in: false}"), ...errs([429, 500, 503]) } },
  post: {
    requestBody: {
      required: true,
      content: { 'application/json': { schema: { type: 'object', required: ['token'], additionalProperties: false, properties: { token: { type: 'string', description: 'an account-scoped management token' } } } } },
    },
    responses: {
      200: json(session, 'Signed in: the session cookie is set'),
      ...errs([400, 401, 403, 413, 415, 429, 500, 503]),
    },
  },
  delete: {
    responses: { 200: json({ type: 'object', required: ['signed_out'], properties: { signed_out: { type: 'boolean' } } }, 'Signed out'), ...errs([403, 413, 415, 429, 500, 503]) },
  },
};

/** `/v1/keys/:id` → `/v1/keys/{id}`. */
export const openApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}');

interface Doc {
  paths?: Record<string, Record<string, Record<string, unknown>>>;
  components?: { schemas?: Record<string, unknown> };
}

/**
 * The answers any `/v1` operation may give, whatever its route module says: 401 (no or a bad
 * credential), 429 (rate limit), 500 (a stored record off the schema), 503 (the store is
 * unavailable); a change (any method but GET) also 403 (a web session without its CSRF token), 413
 * and 415 (its body); an operation with parameters or a body also 400.
 */
export function standardStatuses(method: string, op: { parameters?: unknown[]; requestBody?: unknown }): number[] {
  const out = [401, 429, 500, 503];
  if (method !== 'get') out.push(403, 413, 415);
  if (op.requestBody !== undefined || (op.parameters?.length ?? 0) > 0) out.push(400);
  return out;
}

/** Adds the body limits (from `bodyLimits`: "METHOD /openapi/path" → bytes) and the session routes. */
export function completeDocument<T>(doc: T, bodyLimits: ReadonlyMap<string, number>): T {
  const d = doc as Doc;
  d.components ??= {};
  d.components.schemas = { ...d.components.schemas, Error: errorSchema };
  for (const [path, ops] of Object.entries(d.paths ?? {})) {
    for (const [method, op] of Object.entries(ops)) {
      if (path === '/session' && SESSION_PATHS[method]) Object.assign(op, SESSION_PATHS[method]);
      if (path.startsWith('/v1/')) {
        const responses = (op.responses ??= {}) as Record<string, unknown>;
        for (const c of standardStatuses(method, op as { parameters?: unknown[]; requestBody?: unknown })) responses[String(c)] ??= json(error, 'Error');
      }
      const limit = bodyLimits.get(`${method.toUpperCase()} ${path}`);
      if (limit !== undefined && method !== 'get') op['x-body-limit-bytes'] = limit;
    }
  }
  return doc;
}
