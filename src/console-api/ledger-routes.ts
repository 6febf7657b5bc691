/**
 * `GET /v1/accounts/{account}/ledger`: the account's credits and charges, newest first, a page at a
 * time. The account's owner may read it (like its wallet balance); the page exports it as CSV.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { decodeLedgerCursor, ledgerPage } from '../console/ledger.ts';
import type { ConsoleService } from '../console/service.ts';
import { requireAccount } from './auth.ts';
import { ApiError } from './errors.ts';
import * as S from './schemas.ts';

export function registerLedgerRoutes(app: FastifyInstance, mc: ConsoleService, currency: string): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/accounts/:account/ledger',
    {
      schema: {
        tags: ['accounts'],
        operationId: 'listLedger',
        summary: "The account's credits and charges, newest first, a page at a time",
        security: [{ managementToken: [] }],
        params: S.AccountParams,
        querystring: S.LedgerQuery,
        response: { 200: S.Ledger, 400: S.ErrorBody, 401: S.ErrorBody, 404: S.ErrorBody, 429: S.ErrorBody },
      },
    },
    async (req) => {
      const { account } = req.params;
      requireAccount(req, account, `no account with id ${account}`);
      const cursor = req.query.cursor === undefined ? null : decodeLedgerCursor(req.query.cursor);
      if (req.query.cursor !== undefined && cursor === null) throw new ApiError('INVALID_INPUT', 'querystring.cursor: not a ledger cursor (start again without it)');
      const page = await ledgerPage(mc, account, { limit: req.query.limit, cursor });
      return {
        currency,
        entries: page.entries.map((e) => ({
          id: e.id,
          time: new Date(e.time).toISOString(),
          type: e.type,
          amount_micros: e.amountMicros,
          reference: e.reference,
          request_id: e.requestId,
          key_id: e.keyId,
          model: e.model,
          ...(e.price ? { price_rule: e.price.rule, priced_by: e.price.model } : {}),
        })),
        next_cursor: page.next,
      };
    },
  );
}
