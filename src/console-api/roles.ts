/**
 * What a person signed in on the page (OpenID Connect, docs/web-console.md "Roles") may do, enforced
 * here for every route of the API, never by the page. A management token is not a person: its scope
 * checks (auth.ts) apply as before, and this table does not.
 *
 * Each `/v1` route has one need; a route missing from the table is refused to every person (fail
 * closed: a new route is added here on purpose, and `test/console-roles.test.ts` checks the table
 * covers every route served).
 *
 *   read     every role (owner, developer, viewer)
 *   create   owner, developer
 *   own-key  owner: any key of the account; developer: the keys they created; viewer: none
 *   owner    owner only (members, webhooks, alerts)
 *   operator no person (all-accounts token operations)
 */
import type { FastifyRequest } from 'fastify';
import type { ConsoleService } from '../console/service.ts';
import type { Role } from '../console/members.ts';
import { ApiError } from './errors.ts';

export type Need = 'read' | 'create' | 'own-key' | 'owner' | 'operator';

export const ROUTE_NEEDS: Readonly<Record<string, Need>> = {
  'GET /v1/accounts/:account/keys': 'read',
  'POST /v1/accounts/:account/keys': 'create',
  'GET /v1/keys/:id': 'read',
  'PATCH /v1/keys/:id': 'own-key',
  'POST /v1/keys/:id/reveal': 'own-key',
  'POST /v1/keys/:id/revoke': 'own-key',
  'POST /v1/keys/:id/roll': 'own-key',
  'GET /v1/keys/:id/usage': 'read',
  'GET /v1/accounts/:account': 'read',
  'PATCH /v1/accounts/:account': 'operator',
  'POST /v1/accounts/:account/disable': 'operator',
  'POST /v1/accounts/:account/enable': 'operator',
  'POST /v1/accounts/:account/credits': 'operator',
  'GET /v1/accounts/:account/ledger': 'read',
  'GET /v1/accounts/:account/usage': 'read',
  'POST /v1/usage': 'operator',
  'GET /v1/usage': 'read',
  'GET /v1/audit': 'read',
  'POST /v1/tokens': 'operator',
  'GET /v1/tokens': 'operator',
  'POST /v1/tokens/:id/revoke': 'operator',
  'GET /v1/prices': 'operator',
  'PUT /v1/prices/:model': 'operator',
  'GET /v1/prices/:model': 'operator',
  'GET /v1/price-catalog': 'operator',
  'GET /v1/accounts/:account/credentials': 'owner',
  'PUT /v1/accounts/:account/credentials/:provider': 'owner',
  'DELETE /v1/accounts/:account/credentials/:provider': 'owner',
  'DELETE /v1/prices/:model': 'operator',
  'POST /v1/webhooks': 'owner',
  'GET /v1/webhooks': 'read',
  'DELETE /v1/webhooks/:id': 'owner',
  'GET /v1/webhooks/:id/dead': 'read',
  'POST /v1/webhooks/:id/dead/:event_id/replay': 'owner',
  'PUT /v1/accounts/:account/alerts': 'owner',
  'GET /v1/accounts/:account/me': 'read',
  'GET /v1/accounts/:account/members': 'owner',
  'POST /v1/accounts/:account/members': 'owner',
  'PATCH /v1/accounts/:account/members/:id': 'owner',
  'DELETE /v1/accounts/:account/members/:id': 'owner',
};

/** The person behind a request, with their role in the session's account (checked on this request). */
export interface UserPrincipal {
  readonly iss: string;
  readonly sub: string;
  readonly role: Role;
}

const ROLE_WORD: Record<Role, string> = { owner: 'an owner', developer: 'a developer', viewer: 'a viewer' };

/**
 * Refuses (403, before the body is read) what the person's role may not do. For a key of the
 * person's account, a developer must have created it; a key of another account is left to the
 * route, which answers it as unknown (404), as for a token.
 */
export async function enforceRole(req: FastifyRequest, mc: ConsoleService, user: UserPrincipal, account: string): Promise<void> {
  if (req.routeOptions.url === undefined) return; // no such route: the not-found handler answers 404, as for a token
  const route = `${req.method} ${req.routeOptions.url}`;
  const need = ROUTE_NEEDS[route];
  const refuse = (what: string) => {
    throw new ApiError('FORBIDDEN', `${what}: you are ${ROLE_WORD[user.role]} of ${account}`);
  };
  if (need === undefined) refuse('this operation is not open to people signed in with SSO');
  if (need === 'read') return;
  if (need === 'operator') refuse('this is an operator operation (an all-accounts token)');
  if (need === 'owner' && user.role !== 'owner') refuse('only an owner of the account may do this');
  if (need === 'create' && user.role === 'viewer') refuse('a viewer reads only');
  if (need === 'own-key') {
    if (user.role === 'owner') return;
    if (user.role === 'viewer') refuse('a viewer reads only (no reveal, no change)');
    const id = (req.params as { id?: unknown }).id;
    if (typeof id !== 'string') refuse('no key named');
    const keyAccount = await mc.accountOfKeyId(id as string).catch(() => null);
    if (keyAccount !== account) return; // another account's or an unknown key: the route answers 404
    const creator = await mc.members.creatorOf(account, id as string);
    if (creator === null || creator.iss !== user.iss || creator.sub !== user.sub) refuse('a developer may reveal, edit, roll and revoke only the keys they created');
  }
}

/** After a person creates or rolls a key: they (or, for a roll, the old key's creator) created it. */
export async function recordCreator(mc: ConsoleService, req: FastifyRequest, account: string, keyId: string, fromKeyId?: string): Promise<void> {
  const user = req.principal?.user;
  const inherited = fromKeyId === undefined ? null : await mc.members.creatorOf(account, fromKeyId);
  const creator = inherited ?? (user ? { iss: user.iss, sub: user.sub } : null);
  if (creator) await mc.members.setCreator(account, keyId, creator);
}
