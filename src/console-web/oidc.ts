/**
 * Sign-in with SSO (OpenID Connect, authorization code flow with PKCE, `state` and `nonce`) for the
 * web page, with `openid-client` (a certified relying party):
 *
 *   GET /auth/login     discovery → a flow record in Redis (state, nonce, PKCE verifier; 10 minutes,
 *                       read once) bound to this browser by a flow cookie → 302 to the provider
 *   GET /auth/callback  the flow record taken (GETDEL: a replayed answer finds none) → state compared →
 *                       code exchanged with the verifier → the ID token checked (signature against the
 *                       provider's JWKS, iss, aud, exp/iat with the clock tolerance, nonce) → the
 *                       person's memberships → the page's session cookie → 303 to `/`
 *
 * Discovery and the JWKS are read afresh for each sign-in (sign-ins are rare; a key rotation or a
 * metadata change at the provider is picked up at the next one, without a restart). Every failure
 * answers a plain page saying what happened and what to do, and creates no session: a person is
 * either fully signed in (a session with an account and a role) or not at all. Nothing here logs a
 * code, a token or a state.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as client from 'openid-client';
import type { RedisClient } from '../store/redis.ts';
import { managementSchema } from '../schema/management.ts';
import { ACCOUNT_ID_PATTERN } from '../schema/redis-schema.ts';
import type { SessionUser } from './sessions.ts';

export interface OidcOptions {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** A claim holding `account:role` entries that add memberships at sign-in. */
  readonly rolesClaim?: string;
  /** Seconds of clock difference tolerated on iat/exp (openid-client's default is 30). */
  readonly clockToleranceSeconds?: number;
  /** Seconds this server's clock is off from the truth (tests play a wrong clock with it). */
  readonly clockSkewSeconds?: number;
}

export type Role = 'owner' | 'developer' | 'viewer';
const ROLES: readonly string[] = ['owner', 'developer', 'viewer'];

/** How sign-in finds a person's accounts (the console's members, src/console/members.ts). */
export interface PeopleDirectory {
  roleOf(account: string, person: SessionUser): Promise<Role | null>;
  accountsOf(person: SessionUser): Promise<{ account: string; role: Role }[]>;
  /** Memberships the roles claim names (`account:role` entries, already validated). */
  applyClaim(person: SessionUser, entries: { account: string; role: Role }[]): Promise<void>;
}

export interface OidcDeps {
  readonly redis: RedisClient;
  readonly namespace: string;
  readonly publicOrigin: string;
  readonly people: PeopleDirectory;
  readonly isSecure: (req: FastifyRequest) => boolean;
  /** Where sign-ins and their failures are logged (the console's logger; never a code, token or state). */
  readonly log?: Pick<FastifyBaseLogger, 'info' | 'warn'>;
  /** Ends the browser's previous session, makes the person's, sets its cookie. */
  readonly signIn: (req: FastifyRequest, reply: FastifyReply, user: SessionUser, account: string) => Promise<void>;
}

const FLOW_COOKIE = 'keygate_oidc_flow';
const FLOW_TTL_SECONDS = 600;
const digest = (s: string) => createHash('sha256').update(s).digest('hex');

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A failure page: what happened, what to do, a way back. Plain HTML under the console's strict CSP. */
export function failurePage(reply: FastifyReply, status: number, title: string, message: string): FastifyReply {
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)} · keygate</title></head>
<body><main><h1>${escapeHtml(title)}</h1><p id="why">${escapeHtml(message)}</p><p><a href="/">Back to sign-in</a></p></main></body></html>
`;
  return reply.code(status).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(html);
}

/** Whether http (not https) may reach the issuer: only on this machine (tests, `keygate dev --sso`). */
const loopback = (u: URL) => u.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname);

export function registerOidc(app: FastifyInstance, opts: OidcOptions, deps: OidcDeps): void {
  const m = managementSchema(deps.namespace);
  const redirectUri = `${deps.publicOrigin}/auth/callback`;
  const logOf = (req: FastifyRequest) => deps.log ?? req.log;
  const issuer = new URL(opts.issuer);

  async function discover(): Promise<client.Configuration> {
    const metadata: Partial<client.ClientMetadata> = {
      client_secret: opts.clientSecret,
      [client.clockTolerance]: opts.clockToleranceSeconds ?? 30,
      ...(opts.clockSkewSeconds !== undefined && { [client.clockSkew]: opts.clockSkewSeconds }),
    };
    const config = await client.discovery(issuer, opts.clientId, metadata, client.ClientSecretBasic(opts.clientSecret), {
      timeout: 10,
      ...(loopback(issuer) && { execute: [client.allowInsecureRequests] }),
    });
    config.timeout = 10;
    // The ID token from the token endpoint is checked against the provider's keys too, not only trusted by TLS.
    client.enableNonRepudiationChecks(config);
    return config;
  }

  const flowCookie = (req: FastifyRequest) => ({ path: '/auth/', httpOnly: true, sameSite: 'lax' as const, secure: deps.isSecure(req) });

  // Browser navigations answering redirects and HTML pages: not part of the API document.
  app.get('/auth/login', { schema: { hide: true } }, async (req, reply) => {
    let config: client.Configuration;
    try {
      config = await discover();
    } catch (err) {
      logOf(req).warn({ err: { name: (err as Error).name, code: (err as { code?: string }).code } }, 'web console: the identity provider cannot be reached');
      return failurePage(reply, 502, 'Sign-in is unavailable', 'The identity provider cannot be reached right now, so nobody can sign in with SSO. Try again in a moment, or sign in with a token.');
    }
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const flowId = randomBytes(32).toString('base64url');
    await deps.redis.set(m.oidcFlow(digest(flowId)), JSON.stringify({ state, nonce, verifier }), 'EX', FLOW_TTL_SECONDS);
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: 'openid email profile',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    reply.setCookie(FLOW_COOKIE, flowId, { ...flowCookie(req), maxAge: FLOW_TTL_SECONDS });
    return reply.redirect(url.href, 302);
  });

  app.get('/auth/callback', { schema: { hide: true } }, async (req, reply) => {
    const flowId = req.cookies[FLOW_COOKIE];
    reply.clearCookie(FLOW_COOKIE, flowCookie(req));
    const query = req.query as Record<string, unknown>;
    const refused = (reason: string) => logOf(req).warn({ reason }, 'web console: sign-in with SSO refused');
    if (!flowId || !/^[A-Za-z0-9_-]{43}$/.test(flowId)) {
      refused('no flow cookie');
      return failurePage(reply, 400, 'Sign-in failed', 'This sign-in was not started in this browser, or it took longer than 10 minutes. Start again with "Sign in with SSO".');
    }
    const raw = await deps.redis.getdel(m.oidcFlow(digest(flowId)));
    if (raw === null) {
      refused('flow used or expired');
      return failurePage(reply, 400, 'Sign-in failed', 'This sign-in answer was already used or has expired; it cannot sign in twice. Start again with "Sign in with SSO".');
    }
    const flow = JSON.parse(raw) as { state: string; nonce: string; verifier: string };
    if (typeof query.error === 'string') {
      refused('the provider answered an error');
      return failurePage(reply, 403, 'Sign-in failed', `The identity provider did not sign you in (${query.error.slice(0, 100)}). Start again, or ask your administrator.`);
    }
    if (query.state !== flow.state) {
      refused('state differs');
      return failurePage(reply, 400, 'Sign-in failed', 'The answer does not belong to the sign-in this browser started (its state differs), so it was refused. Start again with "Sign in with SSO".');
    }

    let config: client.Configuration;
    try {
      config = await discover();
    } catch {
      return failurePage(reply, 502, 'Sign-in is unavailable', 'The identity provider cannot be reached right now. Try again in a moment, or sign in with a token.');
    }
    let claims: client.IDToken;
    try {
      const search = new URLSearchParams(req.url.split('?')[1] ?? '');
      const tokens = await client.authorizationCodeGrant(config, new URL(`${redirectUri}?${search}`), {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      });
      const c = tokens.claims();
      if (!c) throw new Error('no ID token');
      claims = c;
    } catch (err) {
      const why = failureReason(err);
      logOf(req).warn({ reason: why.log }, 'web console: sign-in with SSO refused');
      return failurePage(reply, why.status, 'Sign-in failed', why.message);
    }

    const email = typeof claims.email === 'string' ? claims.email.toLowerCase() : null;
    const emailVerified = claims.email_verified === true;
    const shown = (email !== null && emailVerified ? email : null) ?? (typeof claims.name === 'string' ? claims.name : null) ?? email ?? claims.sub;
    const user: SessionUser = { iss: claims.iss, sub: claims.sub, email, emailVerified, name: shown.slice(0, 200) };
    if (opts.rolesClaim) {
      const entries = rolesFromClaim(claims[opts.rolesClaim]);
      if (entries.length > 0) await deps.people.applyClaim(user, entries);
    }
    const accounts = await deps.people.accountsOf(user);
    if (accounts.length === 0) {
      logOf(req).info({ sub: claims.sub.slice(0, 64) }, 'web console: signed in at the provider but a member of no account');
      const unverified = email !== null && !emailVerified ? ` Your email ${email} is not verified at the identity provider, so it cannot match a membership by email.` : '';
      return failurePage(
        reply,
        403,
        'No account for you here',
        `You signed in at the identity provider as ${shown}, but you are not a member of any account on this console, so there is nothing to show.${unverified} Ask an account owner to add you (by email or by subject ${claims.sub}).`,
      );
    }
    await deps.signIn(req, reply, user, accounts[0]!.account);
    logOf(req).info({ account: accounts[0]!.account, sub: claims.sub.slice(0, 64) }, 'web console: signed in with SSO');
    return reply.redirect('/', 303);
  });
}

/** `account:role` entries of the roles claim (a list, or one string); anything else is ignored. */
export function rolesFromClaim(v: unknown): { account: string; role: Role }[] {
  const list = Array.isArray(v) ? v : typeof v === 'string' ? v.split(/[\s,]+/) : [];
  const out: { account: string; role: Role }[] = [];
  for (const e of list.slice(0, 100)) {
    if (typeof e !== 'string') continue;
    const i = e.lastIndexOf(':');
    const [account, role] = [e.slice(0, i), e.slice(i + 1)];
    if (i > 0 && ACCOUNT_ID_PATTERN.test(account) && ROLES.includes(role)) out.push({ account, role: role as Role });
  }
  return out;
}

/** What to tell a person whose sign-in the checks refused. */
function failureReason(err: unknown): { status: number; message: string; log: string } {
  const code = (err as { code?: string }).code ?? '';
  const text = err instanceof Error ? `${err.message} ${(err.cause as Error | undefined)?.message ?? ''}` : '';
  if (err instanceof client.ResponseBodyError)
    return { status: 400, message: 'The identity provider refused the sign-in code: it was already used or has expired. Start again with "Sign in with SSO".', log: `token endpoint: ${err.error}` };
  if (code === 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED')
    return { status: 400, message: 'The identity token has expired or is not valid yet (the clocks of this server and the identity provider may differ). Start again; if it keeps failing, tell your administrator.', log: 'ID token time check' };
  if (/nonce/.test(text)) return { status: 400, message: 'The identity token was not issued for this sign-in (nonce). Start again with "Sign in with SSO".', log: 'nonce' };
  if (code === 'OAUTH_KEY_SELECTION_FAILED' || /signature/i.test(text))
    return { status: 400, message: "The identity token's signature does not verify against the identity provider's keys, so it was refused.", log: 'signature' };
  if (code === 'OAUTH_JWT_CLAIM_COMPARISON_FAILED') return { status: 400, message: 'The identity token is for another issuer or another application, so it was refused.', log: 'claim comparison' };
  if (err instanceof TypeError || /fetch failed|ECONNREFUSED|timeout|aborted/i.test(text))
    return { status: 502, message: 'The identity provider cannot be reached right now. Try again in a moment, or sign in with a token.', log: 'provider unreachable' };
  return { status: 400, message: 'The identity provider\'s answer could not be checked, so it was refused. Start again with "Sign in with SSO".', log: code || 'other' };
}
