/** Management tokens (operators only): create one (shown once), list them, revoke one. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { TokenRecord } from '../console/management.ts';
import type { ConsoleService } from '../console/service.ts';
import { requireAllAccounts } from './auth.ts';
import * as S from './schemas.ts';
import { changeErrors, errors, iso, SECURITY } from './route-common.ts';

export function tokenJson(t: TokenRecord): z.infer<typeof S.Token> {
  return { id: t.id, name: t.name, scope: t.account ?? 'all', status: t.status, hint: t.hint, created_at: iso(t.createdAt)!, revoked_at: iso(t.revokedAt) };
}

export function registerTokenRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.post(
    '/v1/tokens',
    { schema: { tags: ['tokens'], operationId: 'createToken', summary: 'Create a management token (operator; shown once)', security: SECURITY, body: S.CreateTokenBody, response: { 201: S.CreatedToken, ...changeErrors(400, 403, 413) } } },
    async (req, reply) => {
      const p = requireAllAccounts(req, 'managing tokens');
      const t = await mc.createToken({ name: req.body.name, account: req.body.account }, p.actor);
      return reply.code(201).send({ ...tokenJson(t.record), token: t.token });
    },
  );

  r.get('/v1/tokens', { schema: { tags: ['tokens'], operationId: 'listTokens', summary: 'List management tokens (operator)', security: SECURITY, response: { 200: S.TokenList, ...errors(403) } } }, async (req) => {
    requireAllAccounts(req, 'managing tokens');
    return { tokens: (await mc.listTokens()).map(tokenJson) };
  });

  r.post(
    '/v1/tokens/:id/revoke',
    { schema: { tags: ['tokens'], operationId: 'revokeToken', summary: 'Revoke a management token (operator)', security: SECURITY, params: S.TokenParams, response: { 200: S.Token, ...changeErrors(400, 403, 404) } } },
    async (req) => {
      const p = requireAllAccounts(req, 'managing tokens');
      await mc.revokeToken(req.params.id, p.actor);
      return tokenJson(await mc.getToken(req.params.id));
    },
  );
}
