/**
 * An account's usage summed per day, key or model: `GET /v1/accounts/{account}/usage`. The
 * account's owner (a token scoped to it, or its web session) or an operator; another account is
 * indistinguishable from an unknown one (404).
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ConsoleService } from '../console/service.ts';
import { TOKEN_KINDS, USAGE_GROUPINGS, USAGE_SUMMARY_MAX_DAYS, usageSummaryJson } from '../console/usage-summary.ts';
import { requireAccount } from './auth.ts';
import { AccountParams, ErrorBody } from './schemas.ts';
import { SECURITY } from './route-common.ts';

const instant = z.iso.datetime({ offset: true });
const Sums = { requests: z.number(), amount_micros: z.number(), tokens: z.object(Object.fromEntries(TOKEN_KINDS.map((k) => [k, z.number()])) as Record<(typeof TOKEN_KINDS)[number], z.ZodNumber>) };
const Summary = z.object({
  account: z.string(),
  since: z.string(),
  until: z.string(),
  group_by: z.enum(USAGE_GROUPINGS),
  groups: z.array(z.object({ group: z.string().describe('a UTC date, a key id or a model (lower case; (none): no model)'), ...Sums })),
  total: z.object(Sums),
  truncated: z.boolean().describe('the span held more entries than one answer sums; ask for a shorter span'),
});

export function registerUsageRoutes(app: FastifyInstance, mc: ConsoleService): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/accounts/:account/usage',
    {
      schema: {
        tags: ['usage'], operationId: 'summarizeUsage', security: SECURITY,
        summary: "The account's requests, amount and tokens per day (UTC), key or model",
        description: `From the account's usage log; a token count an entry lacks counts 0. The span is at most ${USAGE_SUMMARY_MAX_DAYS} days.`,
        params: AccountParams,
        querystring: z.strictObject({
          since: instant.describe('first instant (inclusive)'),
          until: instant.optional().describe('last instant (exclusive; default now)'),
          group_by: z.enum(USAGE_GROUPINGS).default('day'),
        }),
        response: { 200: Summary, 404: ErrorBody },
      },
    },
    async (req) => {
      const { account } = req.params;
      requireAccount(req, account, `no account with id ${account}`);
      const q = req.query;
      // `until` is exclusive; its default, now, takes in the current millisecond too (a booking written
      // in the millisecond the request arrives is in the summary).
      const until = q.until === undefined ? Date.now() + 1 : Date.parse(q.until);
      const s = await mc.usageSummary(account, { since: Date.parse(q.since), until, groupBy: q.group_by });
      return usageSummaryJson(s);
    },
  );
}
