/**
 * The usage log of the management API: `POST /v1/usage` books one request's cost (an operator's:
 * the router's), `GET /v1/usage` exports the log from an instant.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { ConsoleService } from '../console/service.ts';
import { UsageConflict } from '../console/wallet.ts';
import { usageEntryJson, usageJson } from '../console/views.ts';
import { requireAccount, requireAllAccounts, principal } from './auth.ts';
import { ApiError } from './errors.ts';
import * as S from './schemas.ts';
import { changeErrors, errors, SECURITY, type BookingLimit } from './route-common.ts';

/** `booking`: the booking's rate limit. */
export function registerUsageLogRoutes(app: FastifyInstance, mc: ConsoleService, booking: BookingLimit): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.post(
    '/v1/usage',
    {
      schema: {
        tags: ['usage'],
        operationId: 'recordUsage',
        summary: "Book one request's cost: debits the wallet, adds to the key's spend, logs it (operator; idempotent on request_id: a repeat answers booked: false)",
        security: SECURITY,
        body: S.UsageBody,
        response: { 200: S.UsageBooked, ...changeErrors(400, 403, 404, 413, 422), 409: S.UsageConflictBody },
      },
      config: booking,
      preValidation: async (req) => void requireAllAccounts(req, 'recording usage'),
    },
    async (req, reply) => {
      requireAllAccounts(req, 'recording usage');
      const b = req.body;
      try {
        return usageJson(
          await mc.recordUsage({ keyId: b.key_id, amountMicros: b.amount_micros, requestId: b.request_id, model: b.model ?? null, inputTokens: b.input_tokens ?? null, outputTokens: b.output_tokens ?? null }),
        );
      } catch (err) {
        if (!(err instanceof UsageConflict)) throw err;
        // The request id is booked with another body: the booked record, so the router can reconcile.
        const k = err.booked;
        const booked = { key_id: k.keyId, account: k.account, request_id: k.requestId, amount_micros: k.amountMicros, model: k.model, input_tokens: k.inputTokens, output_tokens: k.outputTokens };
        return reply.code(409).send({ ...new ApiError('CONFLICT', err.message).body(), booked });
      }
    },
  );

  r.get(
    '/v1/usage',
    { schema: { tags: ['usage'], operationId: 'exportUsage', summary: 'The usage log from an instant, oldest first', security: SECURITY, querystring: S.UsageQuery, response: { 200: S.UsageList, ...errors(400, 404) } } },
    async (req) => {
      const p = principal(req);
      const q = req.query;
      const account = q.account ?? p.token.account ?? undefined;
      if (account !== undefined) requireAccount(req, account, `no account with id ${account}`);
      const entries: ReturnType<typeof usageEntryJson>[] = [];
      let more = false;
      for await (const e of mc.exportUsage({ since: Date.parse(q.since), until: q.until === undefined ? undefined : Date.parse(q.until), account })) {
        if (entries.length === q.limit) {
          more = true;
          break;
        }
        entries.push(usageEntryJson(e));
      }
      return { entries, more };
    },
  );
}
