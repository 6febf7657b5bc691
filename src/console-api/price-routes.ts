/**
 * The price table in the management API (docs/metering.md, "Prices"): `GET /v1/prices`
 * (`?source=table|catalog|all`), `GET /v1/prices/{model}` (how the name resolves and its price),
 * `PUT /v1/prices/{model}`, `DELETE /v1/prices/{model}`, `GET /v1/price-catalog` (the catalog in
 * use). Operator operations (all-accounts tokens; an account-scoped token gets 403). A model with a
 * `/` travels URL-encoded (`openai%2Fgpt-4o`).
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ConsoleService } from '../console/service.ts';
import { PRICE_MODEL_MAX_CHARS, priceJson } from '../console/prices.ts';
import { EXTRA_CLASSES, MAX_PRICE_MICROS, MAX_PRICE_TIERS, MAX_SERVICE_TIERS } from '../schema/prices.ts';
import { requireAllAccounts } from './auth.ts';
import { ErrorBody } from './schemas.ts';
import { SECURITY } from './route-common.ts';

const perMillion = (what: string) => z.number().int().min(0).max(MAX_PRICE_MICROS).describe(`micro-units per million ${what} tokens`);

const Price = z.object({
  model: z.string().describe('lower case'),
  input_micros: z.number(),
  output_micros: z.number().describe('also the price of reasoning tokens'),
  cached_input_micros: z.number().nullable().describe('null: the input price'),
  cache_write_micros: z.number().nullable().describe('null: the input price'),
  updated_at: z.string().nullable(),
  ...Object.fromEntries(EXTRA_CLASSES.map((c) => [`${c}_micros`, z.number().optional()])),
  tiers: z.array(z.record(z.string(), z.number())).optional(),
  service_tiers: z.record(z.string(), z.string()).optional(),
  source: z.enum(['table', 'catalog']).optional(),
});
const ClassPrices = z.record(z.string(), z.number()).describe('class → micro-units per million tokens (web_search: per thousand calls), each class at what it is charged');
const SpecJson = z.object({
  prices: ClassPrices,
  tiers: z.array(z.object({ above: z.number().int(), prices: ClassPrices })).describe('whole-request tiers: above this many input tokens (cached and cache-write counted), every class at these prices'),
  service_tiers: z.record(z.string(), z.string()).describe('service tier → multiplier (decimal)'),
});
const CatalogEntry = SpecJson.extend({ model: z.string().describe('provider/id'), name: z.string().nullable(), source: z.literal('catalog'), ignored: z.array(z.string()).describe("catalog price keys keygate's meter does not read") });
const CatalogInfo = z.object({ enabled: z.boolean(), version: z.string().nullable().describe('@pydantic/genai-prices@VERSION'), providers: z.array(z.string()), models: z.number().int() });
const Explanation = z.object({
  model: z.string(),
  provider: z.string(),
  rule: z.string().nullable().describe('table, table-catalog-model, catalog, provider-wildcard, wildcard; null: unpriced'),
  priced_by: z.string().nullable(),
  source: z.enum(['table', 'catalog']).nullable(),
  catalog_model: z.string().nullable(),
  catalog_version: z.string().nullable(),
  price: SpecJson.nullable(),
});
const tierBody = z.strictObject({
  above: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).describe('the tier applies above this many input tokens'),
  ...Object.fromEntries(['input', 'output', 'cached_input', 'cache_write', ...EXTRA_CLASSES].map((c) => [`${c}_micros`, z.number().int().min(0).max(MAX_PRICE_MICROS).optional()])),
});
const Params = z.strictObject({
  model: z.string().min(1).max(PRICE_MODEL_MAX_CHARS).describe('gpt-4o-mini, openai/gpt-4o, openai/* or * (case-insensitive; URL-encode the /)'),
});
const errs = (...codes: number[]) => Object.fromEntries([403, ...codes].map((c) => [c, ErrorBody]));

export function registerPriceRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const what = 'the price table';

  r.get('/v1/prices', { schema: { tags: ['prices'], operationId: 'listPrices', summary: 'The price table, the catalog or both (per million tokens)', security: SECURITY, querystring: z.strictObject({ source: z.enum(['table', 'catalog', 'all']).optional().describe('table (default), catalog or all') }), response: { 200: z.object({ prices: z.array(z.union([Price, CatalogEntry])) }), ...errs(400) } } }, async (req) => {
    requireAllAccounts(req, what);
    const source = (req.query as { source?: string }).source ?? 'table';
    const table = source === 'catalog' ? [] : (await mc.listPrices()).map((e) => ({ ...priceJson(e), source: 'table' as const }));
    const catalog = source === 'table' ? [] : mc.listCatalogPrices();
    return { prices: [...table, ...catalog] };
  });

  r.get(
    '/v1/prices/:model',
    {
      schema: {
        tags: ['prices'], operationId: 'showPrice', summary: 'How a model name resolves (the table, then the catalog) and its price now', security: SECURITY,
        params: z.strictObject({ model: z.string().min(1).max(256).describe('a name as clients send it or providers answer it (gpt-4o-2024-08-06); URL-encode the /') }),
        querystring: z.strictObject({ provider: z.enum(['openai', 'anthropic', 'google']).optional().describe('the provider whose entry serves it (default: from the name)') }),
        response: { 200: Explanation, ...errs(400) },
      },
    },
    async (req) => {
      requireAllAccounts(req, what);
      return mc.explainPrice(req.params.model, req.query.provider);
    },
  );

  r.get('/v1/price-catalog', { schema: { tags: ['prices'], operationId: 'priceCatalog', summary: 'The price catalog in use (KEYGATE_PRICE_CATALOG)', security: SECURITY, response: { 200: CatalogInfo, ...errs() } } }, async (req) => {
    requireAllAccounts(req, what);
    return mc.priceCatalog();
  });

  r.put(
    '/v1/prices/:model',
    {
      schema: {
        tags: ['prices'], operationId: 'setPrice', summary: "Set a model's price (replaces it)", security: SECURITY,
        params: Params,
        body: z.strictObject({
          input_micros: perMillion('input'),
          output_micros: perMillion('output and reasoning'),
          cached_input_micros: perMillion('cached input').nullable().optional(),
          cache_write_micros: perMillion('cache-write').nullable().optional(),
          cache_write_1h_micros: perMillion('one-hour cache-write (default: cache_write)').nullable().optional(),
          input_audio_micros: perMillion('audio input (default: input)').nullable().optional(),
          output_audio_micros: perMillion('audio output (default: output)').nullable().optional(),
          input_image_micros: perMillion('image input (default: input)').nullable().optional(),
          output_image_micros: perMillion('image output (default: output)').nullable().optional(),
          web_search_micros: z.number().int().min(0).max(MAX_PRICE_MICROS).nullable().optional().describe('micro-units per thousand web-search calls (default: 0)'),
          tiers: z.array(tierBody).max(MAX_PRICE_TIERS).nullable().optional().describe('whole-request tiers, ascending by above; a class a tier leaves out keeps its base price'),
          service_tiers: z.record(z.string(), z.string()).nullable().optional().describe(`service tier → multiplier, decimal text with at most 6 decimals, 0 to 1000 (e.g. {"flex": "0.5"}); at most ${MAX_SERVICE_TIERS}`),
        }),
        response: { 200: Price, ...errs(400, 422) },
      },
    },
    async (req) => {
      const p = requireAllAccounts(req, what);
      const b = req.body;
      const extra = Object.fromEntries(EXTRA_CLASSES.map((c) => [c, (b as Record<string, number | null | undefined>)[`${c}_micros`] ?? null]));
      const tiers = (b.tiers ?? []).map((t) => Object.fromEntries(Object.entries(t).map(([k, v]) => [k === 'above' ? k : k.replace(/_micros$/, ''), v as number])));
      return priceJson(await mc.setPrice(req.params.model, { input: b.input_micros, output: b.output_micros, cachedInput: b.cached_input_micros, cacheWrite: b.cache_write_micros, extra, tiers, serviceTiers: b.service_tiers ?? null }, p.actor));
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
