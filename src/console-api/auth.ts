/**
 * Management-token authentication and scope checks. `Authorization: Bearer <token>`; an API key is
 * refused with its own message; an account-scoped token sees nothing of other accounts (the same
 * 404 as an unknown id) and cannot run operator operations (403).
 */
import type { FastifyRequest } from 'fastify';
import type { Actor, TokenRecord } from '../console/management.ts';
import type { ConsoleService } from '../console/service.ts';
import { ApiError } from './errors.ts';
import type { UserPrincipal } from './roles.ts';

export interface Principal {
  readonly token: TokenRecord;
  readonly actor: Actor;
  /** A person signed in on the page with SSO (their role checked by roles.ts); absent for a token. */
  readonly user?: UserPrincipal;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

export async function authenticate(req: FastifyRequest, mc: ConsoleService, apiKeyPrefix: string): Promise<Principal> {
  const h = req.headers.authorization;
  if (h === undefined || h === '') throw new ApiError('UNAUTHENTICATED', 'missing Authorization: Bearer <management token>');
  const m = /^Bearer +(\S{1,200})\s*$/i.exec(h);
  if (!m) throw new ApiError('UNAUTHENTICATED', 'Authorization must be "Bearer <management token>"');
  const secret = m[1]!;
  if (secret.startsWith(apiKeyPrefix)) throw new ApiError('UNAUTHENTICATED', 'an API key cannot call the management API; use a management token');
  const token = await mc.authenticate(secret);
  if (token === null) throw new ApiError('UNAUTHENTICATED', 'the management token is invalid or revoked');
  return { token, actor: { type: 'token', id: token.id, name: token.name } };
}

export function principal(req: FastifyRequest): Principal {
  if (!req.principal) throw new ApiError('UNAUTHENTICATED', 'missing Authorization: Bearer <management token>');
  return req.principal;
}

/** Operator operations: all-accounts tokens only. */
export function requireAllAccounts(req: FastifyRequest, what: string): Principal {
  const p = principal(req);
  if (p.token.account !== null) throw new ApiError('FORBIDDEN', `${what} needs an all-accounts token`);
  return p;
}

/** An account the token may see; another account is indistinguishable from an unknown one. */
export function requireAccount(req: FastifyRequest, account: string, notFound: string): Principal {
  const p = principal(req);
  if (p.token.account !== null && p.token.account !== account) throw new ApiError('NOT_FOUND', notFound);
  return p;
}
