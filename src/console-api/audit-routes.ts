/** The audit log of the management API: `GET /v1/audit`, newest first (an owner sees its account's). */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { ConsoleService } from '../console/service.ts';
import { requireAccount, principal } from './auth.ts';
import * as S from './schemas.ts';
import { errors, SECURITY } from './route-common.ts';

export function registerAuditRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.get(
    '/v1/audit',
    { schema: { tags: ['audit'], operationId: 'listAudit', summary: 'Audit events, newest first', security: SECURITY, querystring: S.AuditQuery, response: { 200: S.AuditList, ...errors(400, 404) } } },
    async (req) => {
      const p = principal(req);
      const account = req.query.account ?? p.token.account ?? undefined;
      if (account !== undefined) requireAccount(req, account, `no account with id ${account}`);
      return { events: await mc.listAudit({ account, limit: req.query.limit }) };
    },
  );
}
