/**
 * Members of an account (src/console/members.ts): who signs in on the page with SSO, and with what
 * role. Operator tokens, the account's own token and the account's owners (roles.ts) manage them.
 *
 *   GET    /v1/accounts/{account}/members           → {members: [member…]}
 *   POST   /v1/accounts/{account}/members           {email | subject, role} → 201 member
 *   PATCH  /v1/accounts/{account}/members/{id}      {role} → member
 *   DELETE /v1/accounts/{account}/members/{id}      → the member removed
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { MEMBER_ID_PATTERN, memberJson, ROLES } from '../console/members.ts';
import type { ConsoleService } from '../console/service.ts';
import { requireAccount } from './auth.ts';
import * as S from './schemas.ts';
import { SECURITY } from './route-common.ts';

const Role = z.enum(ROLES).describe('owner: everything the account-scoped token may do, plus members and webhooks; developer: create keys, and reveal, edit, roll and revoke the keys they created; viewer: read only');
export const Member = z.object({
  id: z.string().describe('mem_…'),
  account: z.string(),
  email: z.string().nullable().describe('matched only when the ID token says email_verified: true'),
  subject: z.string().nullable().describe('the ID token `sub` at the configured issuer'),
  role: Role,
  source: z.enum(['manual', 'claim']).describe('claim: added at sign-in from KEYGATE_OIDC_ROLES_CLAIM'),
  created_at: z.string(),
  updated_at: z.string(),
});
const MemberParams = z.strictObject({ account: S.AccountParams.shape.account, id: z.string().regex(MEMBER_ID_PATTERN, 'a member id: mem_ followed by 16 letters and digits') });
const AddBody = z
  .strictObject({ email: z.string().max(254).optional(), subject: z.string().max(255).optional(), role: Role })
  .refine((b) => (b.email === undefined) !== (b.subject === undefined), { message: 'give email or subject (one of them)' });
/** Every route: 401, 429, 500, 503; a read also 400 and 404; a change also 403 (a role, a session without its CSRF token), 413 and 415. */
const errs = (...codes: number[]) => Object.fromEntries([400, 401, 404, 429, 500, 503, ...codes].map((c) => [c, S.ErrorBody]));
const changeErrs = (...codes: number[]) => errs(403, 413, 415, ...codes);

export function registerMemberRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const scoped = (account: string) => `no account with id ${account}`;

  r.get(
    '/v1/accounts/:account/me',
    {
      schema: {
        tags: ['members'], operationId: 'me', summary: 'Who is calling: a person signed in with SSO gets their role and the ids of the keys they created; a token gets its name', security: SECURITY, params: S.AccountParams,
        response: { 200: z.object({ type: z.enum(['token', 'user']), name: z.string(), role: z.enum(ROLES).nullable().describe('null for a token'), created_keys: z.array(z.string()).describe("the account's keys this person created (a developer may change only these)") }), ...errs() },
      },
    },
    async (req) => {
      const p = requireAccount(req, req.params.account, scoped(req.params.account));
      if (!p.user) return { type: 'token' as const, name: p.token.name, role: null, created_keys: [] };
      return { type: 'user' as const, name: p.actor.name ?? '', role: p.user.role, created_keys: await mc.members.keysCreatedBy(req.params.account, p.user) };
    },
  );

  r.get(
    '/v1/accounts/:account/members',
    { schema: { tags: ['members'], operationId: 'listMembers', summary: "The account's members (operators and owners)", security: SECURITY, params: S.AccountParams, response: { 200: z.object({ members: z.array(Member) }), ...errs() } } },
    async (req) => {
      requireAccount(req, req.params.account, scoped(req.params.account));
      return { members: (await mc.members.list(req.params.account)).map(memberJson) };
    },
  );

  r.post(
    '/v1/accounts/:account/members',
    { schema: { tags: ['members'], operationId: 'addMember', summary: 'Add a member by email or subject, with a role (operators and owners)', security: SECURITY, params: S.AccountParams, body: AddBody, response: { 201: Member, ...changeErrs(409, 422) } } },
    async (req, reply) => {
      const p = requireAccount(req, req.params.account, scoped(req.params.account));
      const m = await mc.members.add(req.params.account, { email: req.body.email ?? null, subject: req.body.subject ?? null }, req.body.role, p.actor);
      return reply.code(201).send(memberJson(m));
    },
  );

  r.patch(
    '/v1/accounts/:account/members/:id',
    { schema: { tags: ['members'], operationId: 'updateMember', summary: "Change a member's role (operators and owners)", security: SECURITY, params: MemberParams, body: z.strictObject({ role: Role }), response: { 200: Member, ...changeErrs() } } },
    async (req) => {
      const p = requireAccount(req, req.params.account, scoped(req.params.account));
      return memberJson(await mc.members.update(req.params.account, req.params.id, req.body.role, p.actor));
    },
  );

  r.delete(
    '/v1/accounts/:account/members/:id',
    { schema: { tags: ['members'], operationId: 'removeMember', summary: 'Remove a member (operators and owners)', security: SECURITY, params: MemberParams, response: { 200: Member, ...changeErrs() } } },
    async (req) => {
      const p = requireAccount(req, req.params.account, scoped(req.params.account));
      return memberJson(await mc.members.remove(req.params.account, req.params.id, p.actor));
    },
  );
}
