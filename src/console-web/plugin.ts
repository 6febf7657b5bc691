/**
 * The web console's server side, as a Fastify plugin for the `keygate console` server:
 *
 *   GET  /, /assets/*      the built "API keys" page (dist/web, from `npm run build:web`)
 *   GET  /session          {signed_in: true, account, token_name, csrf_token, expires_at}, or {signed_in: false}
 *   POST /session {token}  sign in with an account-scoped management token → session cookie
 *   DELETE /session        sign out (ends the session in Redis, clears the cookie)
 *   POST /session/account  {account}: a person in several accounts picks one (the "Account" select)
 *   GET  /auth/login, /auth/callback   sign-in with SSO (oidc.ts), when OpenID Connect is configured
 *
 * The page then calls the management API with the cookie instead of a Bearer token:
 * `sessionAuth(request)` maps a live session to its token's principal, and for every change
 * (any method but GET/HEAD) also requires the session's CSRF token in `x-csrf-token` and a
 * same-origin `Origin`. Every answer carries a strict Content-Security-Policy and the usual
 * security headers; nothing here logs or echoes a token, a session id or a key.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyCookie from '@fastify/cookie';
import fastifyHelmet from '@fastify/helmet';
import fastifyStatic from '@fastify/static';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { RedisClient } from '../store/redis.ts';
import { z } from 'zod';
import { sameSecret, SessionStore, type SessionRecord, type SessionUser } from './sessions.ts';
import { registerOidc, type OidcOptions, type PeopleDirectory, type Role } from './oidc.ts';

/** A management token as the console knows it: its id, name and scope (null = all accounts). */
export interface TokenInfo {
  id: string;
  name: string;
  account: string | null;
}

/** How the plugin checks management tokens (the console's token store). */
export interface TokenDirectory {
  /** The active token with this plaintext, or null (unknown, malformed or revoked). */
  verify(token: string): Promise<TokenInfo | null>;
  /** The active token with this id, or null (revoked or unknown): checked on every request. */
  byId(id: string): Promise<TokenInfo | null>;
}

export interface ConsoleWebOptions {
  redis: RedisClient;
  namespace: string;
  tokens: TokenDirectory;
  /** Folder of the built page; default dist/web of this package. */
  staticRoot?: string;
  /** Session lifetime (absolute), default 8 hours. */
  sessionTtlMs?: number;
  /** Force the cookie's Secure flag (behind a TLS proxy without trustProxy); default: when the request is https. */
  secureCookie?: boolean;
  /**
   * The origin browsers reach the console at (`https://console.example.com`), when a proxy in front
   * changes scheme or host; default: this request's own scheme and Host.
   */
  publicOrigin?: string;
  /** Sign-in with SSO (needs `publicOrigin` and `people`). */
  oidc?: OidcOptions;
  /** The members of accounts: a person's session lasts while they are a member of its account. */
  people?: PeopleDirectory;
  /** Where sign-ins with SSO and their failures are logged (default: the request's logger). */
  log?: Pick<FastifyBaseLogger, 'info' | 'warn'>;
}

export const DEFAULT_STATIC_ROOT = fileURLToPath(new URL('../../dist/web/', import.meta.url));
export const DEFAULT_SESSION_TTL_MS = 8 * 3600_000;
export const CSRF_HEADER = 'x-csrf-token';
const COOKIE = 'keygate_session';
/** With Secure, the `__Host-` prefix also pins the cookie to this host and path `/`. */
const SECURE_COOKIE = `__Host-${COOKIE}`;

/** The principal of a signed-in page: the same as the account-scoped token it signed in with. */
export interface SessionPrincipal {
  /** The token as `TokenDirectory.byId` answered it, checked on this request; for a person, a stand-in named after them. */
  token: TokenInfo;
  account: string;
  /** A person (SSO) and their role in `account`, read on this request. */
  user?: SessionUser & { role: Role };
}

export type SessionAuth =
  | { kind: 'none' } // no session cookie: let the Bearer token auth answer
  | { kind: 'ok'; principal: SessionPrincipal }
  | { kind: 'refused'; status: 401 | 403; code: string; message: string };

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The security headers of every console answer (page and API). */
export const CONTENT_SECURITY_POLICY = {
  defaultSrc: ["'self'"],
  scriptSrc: ["'self'"],
  styleSrc: ["'self'"],
  imgSrc: ["'self'"],
  fontSrc: ["'self'"],
  connectSrc: ["'self'"],
  objectSrc: ["'none'"],
  baseUri: ["'none'"],
  formAction: ["'self'"],
  frameAncestors: ["'none'"],
};

declare module 'fastify' {
  interface FastifyInstance {
    /** Resolves the web session of a request (see `sessionAuth`). */
    webSessionAuth(request: FastifyRequest): Promise<SessionAuth>;
  }
}

const SignIn = z.object({ token: z.string().min(1).max(512) }).strict();
const PickAccount = z.object({ account: z.string().min(1).max(64) }).strict();

/** The stand-in token id of a person's session (rate-limit bucket, idempotency scope): a digest of issuer and subject. */
export const personTokenId = (u: { iss: string; sub: string }) => `usr_${createHash('sha256').update(`${u.iss}\n${u.sub}`).digest('hex').slice(0, 24)}`;

async function consoleWeb(app: FastifyInstance, opts: ConsoleWebOptions): Promise<void> {
  const sessions = new SessionStore(opts.redis, opts.namespace, opts.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS);
  const root = opts.staticRoot ?? DEFAULT_STATIC_ROOT;
  const isSecure = (req: FastifyRequest) => opts.secureCookie ?? (opts.publicOrigin?.startsWith('https:') || req.protocol === 'https');
  const cookieName = (req: FastifyRequest) => (isSecure(req) ? SECURE_COOKIE : COOKIE);
  const sessionId = (req: FastifyRequest) => req.cookies[cookieName(req)];

  if (!app.hasRequestDecorator('cookies')) await app.register(fastifyCookie);
  await app.register(fastifyHelmet, {
    global: true,
    contentSecurityPolicy: { useDefaults: false, directives: CONTENT_SECURITY_POLICY },
    referrerPolicy: { policy: 'no-referrer' },
    frameguard: { action: 'deny' },
    crossOriginEmbedderPolicy: true,
    strictTransportSecurity: { maxAge: 31_536_000, includeSubDomains: true },
  });
  app.addHook('onSend', async (_req, reply, payload) => {
    reply.header('permissions-policy', 'camera=(), microphone=(), geolocation=(), payment=(), usb=()');
    // Answers carry account data or keys: never cached, except the page's fingerprinted assets.
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  if (existsSync(`${root}/index.html`)) {
    await app.register(fastifyStatic, {
      root,
      prefix: '/',
      wildcard: false,
      index: ['index.html'],
      cacheControl: false,
      etag: true,
      dotfiles: 'deny',
      setHeaders: (reply, path) => {
        reply.header('cache-control', path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
      },
    });
  } else {
    app.log.warn({ root }, 'web console not built: run `npm run build:web`; `/` answers 503 until then');
    app.get('/', async (_req, reply) =>
      reply.code(503).type('text/plain; charset=utf-8').send('The web console is not built: run `npm run build:web`.\n'),
    );
  }

  /** Same-origin check for a change: Origin must name this server, and Sec-Fetch-Site (when sent) must agree. */
  function crossSite(req: FastifyRequest): string | null {
    const origin = req.headers.origin;
    const expected = opts.publicOrigin ?? `${req.protocol}://${req.host}`;
    if (!origin) return 'a change must come from the console page (no Origin header)';
    if (origin !== expected) return 'a change must come from the console page (another Origin)';
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin') return `a change must come from the console page (Sec-Fetch-Site: ${site === 'same-site' || site === 'cross-site' || site === 'none' ? site : 'other'})`;
    return null;
  }

  type Live = { id: string; record: SessionRecord; token: TokenInfo; role?: Role };
  /** The live session, or why there is none (`revoked`: its token was revoked, `removed`: its person is no member of its account any more; either ends it here). */
  async function liveOrWhy(req: FastifyRequest): Promise<Live | 'ended' | 'revoked' | 'removed'> {
    const id = sessionId(req);
    if (!id) return 'ended';
    const record = await sessions.get(id);
    if (!record) return 'ended';
    if (record.user) {
      // A person's session lasts while they are a member of its account; the role is read on every request.
      // SSO switched off since: the person's sessions end with it.
      const role = opts.people && opts.oidc ? await opts.people.roleOf(record.account, record.user) : null;
      if (role === null) {
        await sessions.end(id);
        return opts.oidc ? 'removed' : 'ended';
      }
      return { id, record, role, token: { id: personTokenId(record.user), name: record.user.name, account: record.account } };
    }
    // The session lasts only as long as its token: a revoked token ends it on the next request.
    const token = await opts.tokens.byId(record.tokenId);
    if (!token || token.account !== record.account) {
      await sessions.end(id);
      return 'revoked';
    }
    return { id, record, token };
  }

  async function live(req: FastifyRequest): Promise<Live | null> {
    const s = await liveOrWhy(req);
    return typeof s === 'string' ? null : s;
  }

  async function sessionAuth(req: FastifyRequest): Promise<SessionAuth> {
    if (!sessionId(req)) return { kind: 'none' };
    const s = await liveOrWhy(req);
    if (s === 'revoked') return { kind: 'refused', status: 401, code: 'UNAUTHENTICATED', message: 'the session has ended: its token was revoked. Sign in with another token.' };
    if (s === 'ended') return { kind: 'refused', status: 401, code: 'UNAUTHENTICATED', message: 'the session has ended: it expired or was signed out. Sign in again.' };
    if (s === 'removed') return { kind: 'refused', status: 401, code: 'UNAUTHENTICATED', message: 'the session has ended: you are no longer a member of its account. Sign in again.' };
    if (!SAFE_METHODS.has(req.method)) {
      const why = crossSite(req);
      if (why) return { kind: 'refused', status: 403, code: 'FORBIDDEN', message: `cross-site request refused: ${why}` };
      const sent = req.headers[CSRF_HEADER];
      if (typeof sent !== 'string' || !sameSecret(sent, s.record.csrf))
        return { kind: 'refused', status: 403, code: 'FORBIDDEN', message: `cross-site request refused: the ${CSRF_HEADER} header is missing or wrong` };
    }
    return { kind: 'ok', principal: { token: s.token, account: s.record.account, ...(s.record.user && { user: { ...s.record.user, role: s.role! } }) } };
  }
  app.decorate('webSessionAuth', sessionAuth);

  const sessionJson = (r: SessionRecord) => ({
    signed_in: true,
    account: r.account,
    token_name: r.tokenName,
    csrf_token: r.csrf,
    expires_at: new Date(r.expiresAt).toISOString(),
  });
  /** A person's session also says who, their role, and the accounts they may pick. */
  const personJson = async (s: Live) => {
    const u = s.record.user!;
    return { ...sessionJson(s.record), user: { name: u.name, email: u.email, sub: u.sub }, role: s.role!, accounts: await opts.people!.accountsOf(u) };
  };
  const fail = (reply: FastifyReply, status: number, code: string, message: string) =>
    reply.code(status).send({ error: { code, message } });

  const doc = (summary: string) => ({ schema: { tags: ['web console'], summary } });
  app.get('/session', doc('The web page\'s session: {signed_in, account, token_name, csrf_token, expires_at}'), async (req, reply) => {
    const s = await live(req);
    if (!s) return { signed_in: false, ...(opts.oidc && { sso: true }) };
    return { ...(s.record.user ? await personJson(s) : sessionJson(s.record)), ...(opts.oidc && { sso: true }) };
  });

  // The page's own route (docs/web-console.md), not part of the API document.
  app.post('/session/account', { bodyLimit: 4096, schema: { hide: true } }, async (req, reply) => {
    const auth = await sessionAuth(req);
    if (auth.kind === 'none') return fail(reply, 401, 'UNAUTHENTICATED', 'not signed in');
    if (auth.kind === 'refused') return fail(reply, auth.status, auth.code, auth.message);
    const user = auth.principal.user;
    if (!user) return fail(reply, 403, 'FORBIDDEN', 'a token\'s session is for its one account');
    const body = PickAccount.safeParse(req.body);
    if (!body.success) return fail(reply, 400, 'INVALID_INPUT', 'body: send {"account": "<account id>"}');
    // The same answer for an account that does not exist and one the person is not a member of.
    const role = await opts.people!.roleOf(body.data.account, user);
    if (role === null) return fail(reply, 404, 'NOT_FOUND', `you are not a member of an account ${body.data.account}`);
    await sessions.setAccount(sessionId(req)!, body.data.account);
    return personJson((await live(req))!);
  });

  app.post('/session', { bodyLimit: 4096, ...doc('Sign the web page in with an account-scoped token {token}: sets the session cookie') }, async (req, reply) => {
    const why = crossSite(req);
    if (why) return fail(reply, 403, 'FORBIDDEN', `cross-site request refused: ${why}`);
    const body = SignIn.safeParse(req.body);
    if (!body.success) return fail(reply, 400, 'INVALID_INPUT', 'body: send {"token": "<management token>"}');
    const token = await opts.tokens.verify(body.data.token.trim());
    if (!token) return fail(reply, 401, 'UNAUTHENTICATED', 'This token is not valid: it is unknown, mistyped or revoked.');
    if (token.account === null)
      return fail(reply, 403, 'FORBIDDEN', 'This page is for one account: sign in with a token scoped to your account, not an all-accounts token.');
    // A fresh session id at every sign-in (no fixation); a session the browser still had ends.
    const previous = sessionId(req);
    if (previous) await sessions.end(previous);
    const { id, record } = await sessions.create(token.id, token.account, token.name);
    reply.setCookie(cookieName(req), id, {
      path: '/',
      httpOnly: true,
      sameSite: 'strict',
      secure: isSecure(req),
      expires: new Date(record.expiresAt),
    });
    req.log.info({ account: record.account, tokenId: record.tokenId }, 'web console: signed in');
    return sessionJson(record);
  });

  if (opts.oidc) {
    if (!opts.publicOrigin || !opts.people) throw new Error('sign-in with SSO needs publicOrigin and people');
    registerOidc(app, opts.oidc, {
      redis: opts.redis,
      namespace: opts.namespace,
      publicOrigin: opts.publicOrigin,
      people: opts.people,
      log: opts.log,
      isSecure,
      signIn: async (req, reply, user, account) => {
        const previous = sessionId(req);
        if (previous) await sessions.end(previous);
        const { id, record } = await sessions.create('', account, user.name, user);
        reply.setCookie(cookieName(req), id, { path: '/', httpOnly: true, sameSite: 'strict', secure: isSecure(req), expires: new Date(record.expiresAt) });
      },
    });
  }

  app.delete('/session', doc('Sign the web page out (needs x-csrf-token)'), async (req, reply) => {
    const auth = await sessionAuth(req);
    if (auth.kind === 'refused' && auth.status === 403) return fail(reply, 403, auth.code, auth.message);
    const id = sessionId(req);
    if (id) await sessions.end(id);
    reply.clearCookie(cookieName(req), { path: '/', httpOnly: true, sameSite: 'strict', secure: isSecure(req) });
    return { signed_out: true };
  });
}

export const consoleWebPlugin = fp(consoleWeb, { name: 'keygate-console-web', fastify: '5.x' });
