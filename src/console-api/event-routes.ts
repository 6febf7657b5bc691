/**
 * The events routes of the management API: webhook endpoints (`/v1/webhooks…`), the wallet-low
 * setting (`/v1/accounts/{account}/alerts`; key thresholds are `alert_thresholds` of PATCH /v1/keys/{id}), and `GET /v1/key`, the one
 * route authenticated by an API key (the key reads its own limits; `isKeySelfRoute` exempts it
 * from the management-token hook). Each calls the console service (src/console/webhooks.ts,
 * alerts.ts, key-self.ts); the events library (src/events/) gives the event types and JSON forms.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ConsoleService } from '../console/service.ts';
import { requireAccount, principal } from './auth.ts';
import { ApiError } from './errors.ts';
import { AccountId, ErrorBody } from './schemas.ts';
import { findCredential, KEY_HEADERS, type KeyHeader } from '../core/credentials.ts';
import { ENDPOINT_ID_PATTERN, ENDPOINT_ID_RULE } from '../schema/events.ts';
import { MAX_AMOUNT_MICROS } from '../schema/money.ts';
import type { Rate } from '../core/rate-text.ts';
import { windowOf } from '../core/rate.ts';
import type { RateUse } from '../console/rates.ts';
import { loadWebhookConfig } from '../events/config.ts';
import { EVENT_TYPES } from '../events/types.ts';
import type { Endpoint } from '../events/webhooks.ts';
import { deadJson, webhookJson } from '../events/views.ts';
import { SECURITY, iso } from './route-common.ts';

export function isKeySelfRoute(url: string): boolean {
  return url === '/v1/key' || url.startsWith('/v1/key?');
}

const WebhookId = z.string().regex(ENDPOINT_ID_PATTERN, `must be ${ENDPOINT_ID_RULE}`);
const EventType = z.enum(EVENT_TYPES);
const Webhook = z.object({
  id: z.string(),
  url: z.string(),
  account: z.string().nullable().describe('null: every account'),
  events: z.array(z.string()).nullable().describe('null: every event type'),
  status: z.enum(['active', 'disabled']),
  created_at: z.string(),
  failing_since: z.string().nullable(),
  disabled_at: z.string().nullable(),
});
const CreatedWebhook = Webhook.extend({ secret: z.string().describe('the signing secret, shown once') });
const Event = z.object({ id: z.string(), type: z.string(), created_at: z.string(), account: z.string().nullable(), data: z.record(z.string(), z.unknown()) });
const Dead = z.object({ event: Event, attempts: z.number(), last_error: z.string(), dead_at: z.string() });
const errs = (...codes: number[]) => Object.fromEntries([401, 429, ...codes].map((c) => [c, ErrorBody]));

/** `{id, name, hint, expires_at, models, limit, rate, token_rate}` of the key in the request's key headers. */
const KeySelf = z.object({
  id: z.string(),
  name: z.string(),
  hint: z.string(),
  expires_at: z.string().nullable(),
  models: z.array(z.string()).nullable(),
  limit: z.object({ amount_micros: z.number(), period: z.string(), remaining_micros: z.number() }).nullable(),
  rate: z
    .object({ requests: z.number(), per: z.string(), used: z.number(), held: z.number(), remaining: z.number(), resets_at: z.string() })
    .nullable()
    .describe(
      "the key's request rate and its current window: requests counted so far (allowed, plus units sidecars reserved ahead), how many of those sidecars still hold in leases (the requests really allowed are between used - held and used), left, and when the window ends (null: no request rate)",
    ),
  token_rate: z
    .object({ tokens: z.number(), per: z.string(), used: z.number(), remaining: z.number(), resets_at: z.string() })
    .nullable()
    .describe("the key's token rate and its current window: booked tokens so far, left, and when the window ends (null: no token rate)"),
});

/** A rate's current window: used, remaining (never below 0: a booking may pass a token rate) and its end. */
function rateWindow(r: Rate, use: RateUse | null): { used: number; remaining: number; resets_at: string } {
  const used = use?.used ?? 0;
  return { used, remaining: Math.max(0, r.count - used), resets_at: use?.resetsAt ?? new Date(windowOf(r.per, Date.now()).end).toISOString() };
}

export function registerEventRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const allowPrivate = loadWebhookConfig().allowPrivate;

  async function visible(req: Parameters<typeof principal>[0], id: string): Promise<Endpoint> {
    const p = principal(req);
    const e = await mc.getWebhook(id);
    if (p.token.account !== null && p.token.account !== e.account) throw new ApiError('NOT_FOUND', `no webhook with id ${id}`);
    return e;
  }

  r.post(
    '/v1/webhooks',
    {
      schema: {
        tags: ['webhooks'], operationId: 'createWebhook', summary: 'Add a webhook endpoint (the secret is shown once)', security: SECURITY,
        body: z.strictObject({ url: z.string().max(2048), account: AccountId.nullable().describe('null: every account (all-accounts tokens only)'), events: z.array(EventType).min(1).optional() }),
        response: { 201: CreatedWebhook, ...errs(400, 403, 404, 422) },
      },
    },
    async (req, reply) => {
      const p = principal(req);
      const { account } = req.body;
      if (account === null && p.token.account !== null) throw new ApiError('FORBIDDEN', 'an all-accounts webhook needs an all-accounts token');
      if (account !== null) requireAccount(req, account, `no account with id ${account}`);
      const { endpoint, secret } = await mc.createWebhook({ url: req.body.url, account, events: req.body.events }, p.actor, { allowPrivate });
      return reply.code(201).send({ ...webhookJson(endpoint), secret });
    },
  );

  r.get('/v1/webhooks', { schema: { tags: ['webhooks'], operationId: 'listWebhooks', summary: 'List webhook endpoints (no secrets)', security: SECURITY, response: { 200: z.object({ webhooks: z.array(Webhook) }), ...errs() } } }, async (req) => {
    const p = principal(req);
    return { webhooks: (await mc.listWebhooks(p.token.account === null ? undefined : p.token.account)).map(webhookJson) };
  });

  const Params = z.strictObject({ id: WebhookId });
  r.delete('/v1/webhooks/:id', { schema: { tags: ['webhooks'], operationId: 'removeWebhook', summary: 'Remove a webhook endpoint', security: SECURITY, params: Params, response: { 204: z.null(), ...errs(400, 404) } } }, async (req, reply) => {
    const e = await visible(req, req.params.id);
    await mc.removeWebhook(e.id, principal(req).actor);
    return reply.code(204).send(null);
  });

  r.get(
    '/v1/webhooks/:id/dead',
    { schema: { tags: ['webhooks'], operationId: 'listDeadLetters', summary: "An endpoint's dead letters (newest first)", security: SECURITY, params: Params, response: { 200: z.object({ dead: z.array(Dead) }), ...errs(400, 404) } } },
    async (req) => {
      const e = await visible(req, req.params.id);
      return { dead: (await mc.listDeadLetters(e.id)).map(deadJson) };
    },
  );

  r.post(
    '/v1/webhooks/:id/dead/:event_id/replay',
    {
      schema: {
        tags: ['webhooks'], operationId: 'replayDeadLetter', summary: 'Deliver a dead letter once more', security: SECURITY,
        params: z.strictObject({ id: WebhookId, event_id: z.string().max(64) }),
        response: { 202: z.object({ webhook_id: z.string(), event_id: z.string(), queued: z.boolean() }), ...errs(400, 404) },
      },
    },
    async (req, reply) => {
      const e = await visible(req, req.params.id);
      await mc.replayDeadLetter(e.id, req.params.event_id, principal(req).actor);
      return reply.code(202).send({ webhook_id: e.id, event_id: req.params.event_id, queued: true });
    },
  );

  r.put(
    '/v1/accounts/:account/alerts',
    {
      schema: {
        tags: ['webhooks'], operationId: 'setAccountAlerts', summary: "The account's wallet-low threshold (null: none)", security: SECURITY,
        params: z.strictObject({ account: AccountId }),
        body: z.strictObject({ wallet_low_micros: z.number().int().positive().max(MAX_AMOUNT_MICROS).nullable() }),
        response: { 200: z.object({ account: z.string(), wallet_low_micros: z.number().nullable() }), ...errs(400, 404) },
      },
    },
    async (req) => {
      const { account } = req.params;
      const p = requireAccount(req, account, `no account with id ${account}`);
      await mc.setWalletLow(account, req.body.wallet_low_micros, p.actor);
      return { account, wallet_low_micros: req.body.wallet_low_micros };
    },
  );

  r.get(
    '/v1/key',
    {
      config: { rateLimit: { max: 60, timeWindow: 60_000 } },
      schema: {
        tags: ['keys'], operationId: 'getOwnKey', security: [{ apiKey: [] }, { apiKeyHeader: [] }, { apiKeyGoogHeader: [] }], summary: 'The calling API key: its own name, expiry, models and spend limit (authenticated by the key)',
        description: 'The one route that takes an API key (in Authorization: Bearer, x-api-key or x-goog-api-key) instead of a management token; rate-limited to 60 a minute per client address. Never another key, never a plaintext, never the account balance.',
        response: { 200: KeySelf, ...errs() },
      },
    },
    async (req) => {
      const cred = findCredential((h: KeyHeader) => req.headers[h]);
      const refused = new ApiError('UNAUTHENTICATED', `send the API key in ${KEY_HEADERS.join(', ')}`);
      if (cred.kind !== 'key') throw refused;
      const id = await mc.activeKeyIdOf(cred.key);
      if (id === null) throw new ApiError('UNAUTHENTICATED', 'the API key is invalid, revoked or expired');
      const v = await mc.getKeyView(id);
      const lim = v.usage.limit;
      const [rq, tk] = [v.rates.requests, v.rates.tokens];
      return {
        id: v.id,
        name: v.name,
        hint: v.hint,
        expires_at: iso(v.expiresAt),
        models: v.models === null ? null : [...v.models],
        limit: lim === null ? null : { amount_micros: lim.amountMicros, period: lim.period, remaining_micros: Math.max(0, lim.amountMicros - v.usage.spend.periodMicros) },
        rate: rq === null ? null : { requests: rq.count, per: rq.per, ...rateWindow(rq, v.rateUse.requests), held: v.rateUse.requests?.held ?? 0 },
        token_rate: tk === null ? null : { tokens: tk.count, per: tk.per, ...rateWindow(tk, v.rateUse.tokens) },
      };
    },
  );
}
