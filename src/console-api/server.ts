/**
 * `keygate console`: the management API (Fastify). Request schemas are zod (fastify-type-provider-zod)
 * and the OpenAPI 3.1 document at `/openapi.json` is generated from them (@fastify/swagger).
 * Every error answer is `{"error": {"code", "message"}}` (errors.ts). `/healthz`, `/readyz` and
 * `/metrics` are on the same port. `/` stays free for the web page.
 */
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { hasZodFastifySchemaValidationErrors, jsonSchemaTransform, serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ConsoleError, isStoreOutage, STORE_OUTAGE } from '../console/errors.ts';
import type { TokenRecord } from '../console/management.ts';
import type { ConsoleService } from '../console/service.ts';
import { consoleWebPlugin, type TokenDirectory } from '../console-web/plugin.ts';
import { authenticate } from './auth.ts';
import type { ConsoleApiConfig } from './config.ts';
import { ApiError, fromConsoleError } from './errors.ts';
import { completeDocument, openApiPath } from './openapi.ts';
import { registerKeyUsageRoutes } from './key-usage-routes.ts';
import { registerLedgerRoutes } from './ledger-routes.ts';
import { registerRoutes } from './routes.ts';
import { registerMemberRoutes } from './member-routes.ts';
import { enforceRole } from './roles.ts';
import { peopleOf } from './people.ts';
import { isKeySelfRoute, registerEventRoutes } from './event-routes.ts';
import { registerPriceRoutes } from './price-routes.ts';
import { registerCredentialRoutes } from './credential-routes.ts';
import { registerUsageRoutes } from './usage-routes.ts';
import { Health } from './schemas.ts';

export interface ConsoleAppOptions {
  readonly config: Pick<ConsoleApiConfig, 'trustProxy' | 'rateLimitPerMinute' | 'bookingRateLimitPerMinute' | 'bodyLimitBytes' | 'keyPrefix' | 'redisNamespace' | 'sessionTtlSeconds' | 'publicOrigin'> &
    Partial<Pick<ConsoleApiConfig, 'oidcIssuer' | 'oidcClientId' | 'oidcClientSecret' | 'oidcRolesClaim' | 'oidcClockToleranceSeconds'>> & { readonly currency?: string };
  /** Tests only: seconds this server's clock is off, for the ID token's time checks. */
  readonly oidcClockSkewSeconds?: number;
  readonly version: string;
  /** Ready as `/readyz` reports it. */
  readonly ready: () => boolean;
}

/** A method and path the server answers (Fastify form, `:param`). */
export interface ServedRoute {
  readonly method: string;
  readonly url: string;
}

/** Names a zod issue path as the field a caller sent, e.g. `body.models[2]`. */
function fieldName(where: string, path: readonly PropertyKey[]): string {
  let s = where;
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : `.${String(p)}`;
  return s;
}

/** Trust the nearest `n` proxies (the hops closest to this server). */
function trustHops(n: number): (addr: string, hop: number) => boolean {
  return (_addr, hop) => hop < n;
}

/** The web page's view of management tokens: only active ones, by plaintext (sign-in) or id (every request). */
function webTokens(mc: ConsoleService): TokenDirectory {
  return {
    verify: (token) => mc.authenticate(token),
    byId: async (id) => {
      const t = await mc.getToken(id).catch((err: unknown) => {
        if (err instanceof ConsoleError && (err.code === 'NOT_FOUND' || err.code === 'INVALID_INPUT')) return null;
        throw err; // a store fault is a 503, not a signed-out page
      });
      return t?.status === 'active' ? t : null;
    },
  };
}

export async function buildConsoleApp(mc: ConsoleService, opts: ConsoleAppOptions, log: Logger): Promise<{ app: FastifyInstance; registry: Registry; routes: readonly ServedRoute[] }> {
  const app = Fastify({
    bodyLimit: opts.config.bodyLimitBytes,
    trustProxy: typeof opts.config.trustProxy === 'number' ? trustHops(opts.config.trustProxy) : opts.config.trustProxy,
    logger: false,
    return503OnClosing: true,
    requestTimeout: 30_000,
    connectionTimeout: 60_000,
    keepAliveTimeout: 5_000,
    routerOptions: { maxParamLength: 200 },
  });
  const routes: ServedRoute[] = [];
  const bodyLimits = new Map<string, number>();
  app.addHook('onRoute', (r) => {
    // The web page's static files are hidden from the API document, and are not API routes.
    if ((r.schema as { hide?: boolean } | undefined)?.hide) return;
    for (const method of [r.method].flat()) {
      if (method === 'HEAD') continue;
      routes.push({ method, url: r.url });
      bodyLimits.set(`${method} ${openApiPath(r.url)}`, r.bodyLimit ?? opts.config.bodyLimitBytes);
    }
  });
  app.setValidatorCompiler(validatorCompiler);
  // JSON only: a text/plain body is 415, not a string the schemas would reject with a vaguer message.
  app.removeContentTypeParser('text/plain');
  app.setSerializerCompiler(serializerCompiler);

  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'keygate_console_' });
  const requests = new Counter({ name: 'keygate_console_requests_total', help: 'Management API requests by route and status', labelNames: ['method', 'route', 'status'], registers: [registry] });
  const duration = new Histogram({
    name: 'keygate_console_request_duration_seconds',
    help: 'Management API request duration by route',
    labelNames: ['method', 'route'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  app.addHook('onResponse', async (req, reply) => {
    // The route pattern (never the raw URL: ids would blow up the label set); unknown paths share one label.
    const route = req.routeOptions.url ?? 'unmatched';
    requests.inc({ method: req.method, route, status: String(reply.statusCode) });
    duration.observe({ method: req.method, route }, reply.elapsedTime / 1000);
    log.debug({ method: req.method, route, status: reply.statusCode }, 'console request');
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'keygate management API', version: opts.version, description: 'Manage API keys, accounts, wallets, usage, prices, management tokens and the audit log.' },
      components: {
        securitySchemes: {
          managementToken: { type: 'http', scheme: 'bearer', description: 'a management token (kgmt_…) from `keygate tokens create`' },
          // GET /v1/key only: the API key itself, in any of the headers the sidecar reads.
          apiKey: { type: 'http', scheme: 'bearer', description: 'an API key (the key reads its own settings)' },
          apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'an API key' },
          apiKeyGoogHeader: { type: 'apiKey', in: 'header', name: 'x-goog-api-key', description: 'an API key' },
        },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: (o) => completeDocument('openapiObject' in o ? o.openapiObject : o.swaggerObject, bodyLimits),
  });
  // Rate limits: one bucket per management token once authenticated (tokens behind one address do not
  // share), one per client address before (sign-in, failed authentication, the page, operations).
  // Book-keeping writes (usage records, credits) have their own per-token bucket (routes.ts).
  const tooMany = (ttlMs: number) => Object.assign(new ApiError('RATE_LIMITED', `too many requests; retry in ${Math.ceil(ttlMs / 1000)} s`), { statusCode: 429 });
  await app.register(rateLimit, {
    max: opts.config.rateLimitPerMinute,
    timeWindow: 60_000,
    keyGenerator: (req) => (req.principal ? `token:${req.principal.token.id}` : `addr:${req.ip}`),
    errorResponseBuilder: (_req, ctx) => tooMany(ctx.ttl),
  });
  const addressLimit = app.createRateLimit({ max: opts.config.rateLimitPerMinute, timeWindow: 60_000, keyGenerator: (req) => `unauth:${req.ip}` });

  // The error handler before the web page's routes: a route keeps the handler of its registration.
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(new ApiError('NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]!.slice(0, 100)}`).body());
  });

  app.setErrorHandler((err: FastifyError | Error, req, reply) => {
    let e: ApiError;
    if (err instanceof ApiError) e = err;
    else if (err instanceof ConsoleError) e = fromConsoleError(err);
    else if (hasZodFastifySchemaValidationErrors(err)) {
      const issue = err.validation[0]!;
      const where = err.validationContext ?? 'request';
      const field = fieldName(where, (issue.instancePath ?? '').split('/').filter(Boolean));
      // Unknown fields by the issue's kind (zod's `unrecognized_keys`), named as zod quotes them.
      const keys = issue.keyword === 'unrecognized_keys' ? (issue.params as { keys?: unknown }).keys : undefined;
      const unknown = Array.isArray(keys) ? keys.map((k) => `"${String(k)}"`).join(', ') : null;
      e = new ApiError('INVALID_INPUT', unknown !== null ? `${field}: unknown field ${unknown.slice(0, 100)}` : `${field}: ${issue.message}`);
    } else {
      const fe = err as FastifyError;
      const status = fe.statusCode ?? 500;
      if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) e = new ApiError('PAYLOAD_TOO_LARGE', `request body is larger than ${req.routeOptions.bodyLimit ?? opts.config.bodyLimitBytes} bytes`); // the route's own limit (a sign-in's is smaller)
      else if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || status === 415) e = new ApiError('UNSUPPORTED_MEDIA_TYPE', 'request body must be application/json');
      else if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') e = new ApiError('INVALID_INPUT', 'body: empty JSON body; send {} or no Content-Type');
      else if (status === 429) e = new ApiError('RATE_LIMITED', fe.message);
      else if (status === 400) e = new ApiError('INVALID_INPUT', `body: ${fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError ? 'not valid JSON' : fe.message.slice(0, 200)}`);
      else if (status === 405) e = new ApiError('METHOD_NOT_ALLOWED', 'method not allowed');
      else if (status >= 400 && status < 500) e = new ApiError('INVALID_INPUT', fe.message.slice(0, 200));
      else {
        log.error({ err: { name: err.name, message: err.message.slice(0, 300) }, route: req.routeOptions.url }, 'console request failed');
        e = isStoreOutage(err) ? new ApiError(STORE_OUTAGE.api, STORE_OUTAGE.apiMessage) : new ApiError('INTERNAL', 'internal error');
      }
    }
    if (e.code === 'RATE_LIMITED') {
      const ra = (err as FastifyError & { headers?: Record<string, string> }).headers?.['retry-after'];
      if (ra) void reply.header('retry-after', ra);
    }
    void reply.code(e.status).send(e.body());
  });

  // The web page (`/`, `/session`): its session cookie stands for the account-scoped token it signed in with.
  await app.register(consoleWebPlugin, {
    redis: mc.redis,
    namespace: opts.config.redisNamespace,
    sessionTtlMs: opts.config.sessionTtlSeconds * 1000,
    publicOrigin: opts.config.publicOrigin,
    tokens: webTokens(mc),
    people: peopleOf(mc),
    log,
    ...(opts.config.oidcIssuer &&
      opts.config.oidcClientId &&
      opts.config.oidcClientSecret && {
        oidc: {
          issuer: opts.config.oidcIssuer,
          clientId: opts.config.oidcClientId,
          clientSecret: opts.config.oidcClientSecret,
          rolesClaim: opts.config.oidcRolesClaim,
          clockToleranceSeconds: opts.config.oidcClockToleranceSeconds,
          clockSkewSeconds: opts.oidcClockSkewSeconds,
        },
      }),
  });

  // Authentication before parsing: an unauthenticated request learns nothing, not even what is bad in its body.
  // A Bearer token wins; without one, a web session (with its CSRF token on changes) authenticates.
  app.addHook('onRequest', async (req, reply) => {
    if (!req.url.startsWith('/v1/') || isKeySelfRoute(req.url)) return; // GET /v1/key: authenticated by the API key itself
    try {
      if (!req.headers.authorization) {
        const web = await app.webSessionAuth(req);
        if (web.kind === 'refused') throw new ApiError(web.status === 401 ? 'UNAUTHENTICATED' : 'FORBIDDEN', web.message);
        if (web.kind === 'ok') {
          const u = web.principal.user;
          if (u) {
            // A person (SSO): audited by name, and held to their role on every route.
            const token: TokenRecord = { ...web.principal.token, status: 'active', createdAt: 0, revokedAt: null, hint: '' };
            req.principal = { token, actor: { type: 'user', id: u.sub, name: u.name }, user: { iss: u.iss, sub: u.sub, role: u.role } };
            await enforceRole(req, mc, req.principal.user!, web.principal.account);
            return;
          }
          const token = web.principal.token as TokenRecord;
          req.principal = { token, actor: { type: 'token', id: token.id, name: token.name } };
          return;
        }
      }
      req.principal = await authenticate(req, mc, opts.config.keyPrefix);
    } catch (err) {
      // Not authenticated: the request counts against its address's bucket.
      if (err instanceof ApiError && (err.code === 'UNAUTHENTICATED' || err.code === 'FORBIDDEN')) {
        const r = await addressLimit(req);
        if (!r.isAllowed && r.isExceeded) {
          void reply.header('retry-after', String(r.ttlInSeconds));
          throw tooMany(r.ttl);
        }
      }
      throw err;
    }
  });

  const t = app.withTypeProvider<ZodTypeProvider>();
  t.get('/healthz', { config: { rateLimit: false }, schema: { operationId: 'healthz', tags: ['operations'], summary: 'The process is up', response: { 200: Health } } }, async () => ({ status: 'ok' }));
  t.get(
    '/readyz',
    { config: { rateLimit: false }, schema: { operationId: 'readyz', tags: ['operations'], summary: 'The store answers and the server is not draining', response: { 200: Health, 503: Health } } },
    async (_req, reply) => (opts.ready() ? { status: 'ready' } : reply.code(503).send({ status: 'not ready' })),
  );
  t.get('/metrics', { config: { rateLimit: false }, schema: { operationId: 'metrics', tags: ['operations'], summary: 'Prometheus metrics', produces: ['text/plain'] } }, async (_req, reply) => {
    void reply.type(registry.contentType);
    return registry.metrics();
  });
  t.get('/openapi.json', { config: { rateLimit: false }, schema: { operationId: 'openapi', tags: ['operations'], summary: 'This document (OpenAPI 3.1)' } }, async () => app.swagger());

  registerRoutes(app, mc, opts.config.bookingRateLimitPerMinute, opts.config.currency);
  registerEventRoutes(app, mc);
  registerLedgerRoutes(app, mc, opts.config.currency ?? 'USD');
  registerPriceRoutes(app, mc);
  registerMemberRoutes(app, mc);
  registerCredentialRoutes(app, mc);
  registerUsageRoutes(app, mc);
  registerKeyUsageRoutes(app, mc, opts.config.currency ?? 'USD');
  await app.ready();
  return { app, registry, routes };
}
