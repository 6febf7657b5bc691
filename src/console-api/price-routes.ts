/**
 * The price table in the management API (docs/metering.md, "Prices"): `GET /v1/prices`,
 * `PUT /v1/prices/{model}`, `DELETE /v1/prices/{model}`. Operator operations (all-accounts tokens;
 * an account-scoped token gets 403). A model with a `/` travels URL-encoded (`openai%2Fgpt-4o`).
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ConsoleService } from '../console/service.ts';
import { PRICE_MODEL_MAX_CHARS, priceJson } from '../console/prices.ts';
import { MAX_PRICE_MICROS } from '../schema/prices.ts';
import { requireAllAccounts } from './auth.ts';
import { ErrorBody } from './schemas.ts';

const SECURITY = [{ managementToken: [] }];
const perMillion = (what: string) => z.number().int().min(0).max(MAX_PRICE_MICROS).describe(`micro-units per million ${what} tokens`);

const Price = z.object({
  model: z.string().describe('lower case'),
  input_micros: z.number(),
  output_micros: z.number().describe('also the price of reasoning tokens'),
  cached_input_micros: z.number().nullable().describe('null: the input price'),
  cache_write_micros: z.number().nullable().describe('null: the input price'),
  updated_at: z.string().nullable(),
});
const Params = z.strictObject({
  model: z.string().min(1).max(PRICE_MODEL_MAX_CHARS).describe('gpt-4o-mini, openai/gpt-4o, openai/* or * (case-insensitive; URL-encode the /)'),
});
const errs = (...codes: number[]) => Object.fromEntries([403, ...codes].map((c) => [c, ErrorBody]));

export function registerPriceRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const what = 'the price table';

  r.get('/v1/prices', { schema: { tags: ['prices'], operationId: 'listPrices', summary: 'The price table (per million tokens)', security: SECURITY, response: { 200: z.object({ prices: z.array(Price) }), ...errs() } } }, async (req) => {
    requireAllAccounts(req, what);
    return { prices: (await mc.listPrices()).map(priceJson) };
  });

  r.put(
    '/v1/prices/:model',
    {
      schema: {
        tags: ['prices'], operationId: 'setPrice', summary: "Set a model's price (replaces it)", security: SECURITY,
        params: Params,
        body: z.strictObject({ input_micros: perMillion('input'), output_micros: perMillion('output and reasoning'), cached_input_micros: perMillion('cached input').nullable().optional(), cache_write_micros: perMillion('cache-write').nullable().optional() }),
        response: { 200: Price, ...errs(400, 422) },
      },
    },
    async (req) => {
      const p = requireAllAccounts(req, what);
      const b = req.body;
      return priceJson(await mc.setPrice(req.params.model, { input: b.input_micros, output: b.output_micros, cachedInput: b.cached_input_micros, cacheWrite: b.cache_write_micros }, p.actor));
    },
  );

  r.delete(
    '/v1/prices/:model',
    { schema: { tags: ['prices'], operationId: 'removePrice', summary: "Remove a model's price", security: SECURITY, params: Params, response: { 204: z.null(), ...errs(400, 404) } } },
    async (req, reply) => {
      const p = requireAllAccounts(req, what);
      await mc.removePrice(req.params.model, p.actor);
      return reply.code(204).send(null);
    },
  );
}
