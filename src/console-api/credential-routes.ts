/**
 * Accounts' own upstream credentials in the management API (SPEC 18, docs/credentials.md):
 * `GET /v1/accounts/{account}/credentials`, `PUT /v1/accounts/{account}/credentials/{provider}`
 * `{secret}`, `DELETE /v1/accounts/{account}/credentials/{provider}`. Operator tokens and the
 * account's own (its owner's) token; another account's id answers 404 as an unknown one. The secret
 * is taken, never returned: answers carry the provider, the hint (last four) and the set time.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ConsoleService } from '../console/service.ts';
import { credentialJson } from '../console/views.ts';
import { FAMILIES } from '../core/families/index.ts';
import { CREDENTIAL_MAX_CHARS, CREDENTIAL_MIN_CHARS, CREDENTIAL_PATTERN } from '../core/upstream-credential.ts';
import { requireAccount } from './auth.ts';
import { AccountId, ErrorBody } from './schemas.ts';
import { SECURITY } from './route-common.ts';

const Credential = z.object({
  provider: z.enum(FAMILIES),
  hint: z.string().describe('the last four characters'),
  set_at: z.string(),
});
const ListParams = z.strictObject({ account: AccountId });
const Params = z.strictObject({ account: AccountId, provider: z.enum(FAMILIES) });
const Body = z.strictObject({
  secret: z
    .string()
    .min(CREDENTIAL_MIN_CHARS)
    .max(CREDENTIAL_MAX_CHARS)
    .regex(CREDENTIAL_PATTERN, 'must be visible ASCII without spaces, commas or line breaks')
    .describe("the provider's API key for this account; stored encrypted, never returned"),
});
const errs = (...codes: number[]) => Object.fromEntries([401, 429, 500, 503, ...codes].map((c) => [c, ErrorBody]));

export function registerCredentialRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const notFound = (account: string) => `no account with id ${account}`;

  r.get(
    '/v1/accounts/:account/credentials',
    { schema: { tags: ['accounts'], operationId: 'listCredentials', summary: "The account's own upstream credentials (never the secret)", security: SECURITY, params: ListParams, response: { 200: z.object({ credentials: z.array(Credential) }), ...errs(400, 404) } } },
    async (req) => {
      requireAccount(req, req.params.account, notFound(req.params.account));
      return { credentials: (await mc.listCredentials(req.params.account)).map(credentialJson) };
    },
  );

  r.put(
    '/v1/accounts/:account/credentials/:provider',
    {
      schema: {
        tags: ['accounts'], operationId: 'setCredential', summary: "Set the account's own credential for a provider (replaces it)", security: SECURITY,
        params: Params, body: Body, response: { 200: Credential, ...errs(400, 403, 404, 413, 415) },
      },
    },
    async (req) => {
      const p = requireAccount(req, req.params.account, notFound(req.params.account));
      return credentialJson(await mc.setCredential(req.params.account, req.params.provider, req.body.secret, p.actor));
    },
  );

  r.delete(
    '/v1/accounts/:account/credentials/:provider',
    { schema: { tags: ['accounts'], operationId: 'removeCredential', summary: "Remove the account's own credential for a provider", security: SECURITY, params: Params, response: { 204: z.null(), ...errs(400, 403, 404) } } },
    async (req, reply) => {
      const p = requireAccount(req, req.params.account, notFound(req.params.account));
      await mc.removeCredential(req.params.account, req.params.provider, p.actor);
      return reply.code(204).send(null);
    },
  );
}
