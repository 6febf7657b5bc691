/**
 * `GET /v1/keys/{id}/usage?days=30`: a key's spend, requests and tokens per UTC day, oldest first
 * (the page's 30-day chart). The key's account owner or an operator may read it.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { KEY_DAYS_MAX, keyDays } from '../console/key-days.ts';
import type { ConsoleService } from '../console/service.ts';
import { requireAccount } from './auth.ts';
import { ApiError } from './errors.ts';
import * as S from './schemas.ts';

const KeyUsageQuery = z.strictObject({
  days: z.coerce.number().int().min(1).max(KEY_DAYS_MAX).default(30).describe(`how many UTC days, today included (1-${KEY_DAYS_MAX}, default 30)`),
});
const KeyDayJson = z.object({
  day: z.string().describe('the UTC day, YYYY-MM-DD'),
  amount_micros: z.number().int().describe('spend booked that day, micro-units'),
  requests: z.number().int().describe('usage records booked that day'),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
});
const KeyUsage = z.object({
  key_id: z.string(),
  currency: z.string(),
  days: z.array(KeyDayJson).describe('oldest first; a day without usage is all zeros'),
});

export function registerKeyUsageRoutes(app: FastifyInstance, mc: ConsoleService, currency: string): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/keys/:id/usage',
    {
      schema: {
        tags: ['keys'],
        operationId: 'getKeyUsage',
        summary: "A key's spend, requests and tokens per UTC day over the last days",
        security: [{ managementToken: [] }],
        params: S.KeyParams,
        querystring: KeyUsageQuery,
        response: { 200: KeyUsage, 400: S.ErrorBody, 401: S.ErrorBody, 404: S.ErrorBody, 429: S.ErrorBody },
      },
    },
    async (req) => {
      const { id } = req.params;
      const account = await mc.accountOfKeyId(id);
      if (account === null) throw new ApiError('NOT_FOUND', `no key with id ${id}`);
      requireAccount(req, account, `no key with id ${id}`);
      const days = await keyDays(mc, account, id, req.query.days);
      return {
        key_id: id,
        currency,
        days: days.map((d) => ({ day: d.day, amount_micros: d.amountMicros, requests: d.requests, input_tokens: d.inputTokens, output_tokens: d.outputTokens })),
      };
    },
  );
}
