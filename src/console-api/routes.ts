/**
 * The `/v1` resources of the management API. Every handler runs one operation of the management
 * console library (the CLI's too) after the scope checks of `auth.ts`, and answers in the JSON forms
 * the CLI's `--json` prints (`src/console/views.ts`). Crediting a wallet and recording usage are
 * operator operations (`requireAllAccounts`): an account's owner must not fund its own wallet.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { TokenRecord } from '../console/management.ts';
import type { ManagedKeyView } from '../console/keys.ts';
import type { ConsoleService } from '../console/service.ts';
import { UsageConflict } from '../console/wallet.ts';
import type { KeyLimit } from '../schema/money.ts';
import type { RateUnit } from '../schema/rates.ts';
import type { RatesPatch } from '../console/rates.ts';
import { accountJson, creditJson, keyJson as keyViewJson, usageEntryJson, usageJson } from '../console/views.ts';
import { requireAccount, requireAllAccounts, principal } from './auth.ts';
import { decodeCursor } from '../core/key-page.ts';
import { listKeyPage } from '../console/key-list.ts';
import { ApiError } from './errors.ts';
import { recordCreator } from './roles.ts';
import * as S from './schemas.ts';
import { bestEffort, UNFINISHED_HEADER } from '../console/best-effort.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A key as the API shows it: the console's key view with its roll relations. */
export function keyJson(v: ManagedKeyView): z.infer<typeof S.Key> {
  return { ...keyViewJson(v), rolled_to: v.rolledTo, rolled_from: v.rolledFrom };
}

/** A limit as the API takes it, in the library's form (`null` = none; absent = unchanged). */
function limitOf(l: { amount_micros: number; period: KeyLimit['period'] } | null | undefined): KeyLimit | null | undefined {
  return l === undefined || l === null ? l : { amountMicros: l.amount_micros, period: l.period };
}

/** Rates as the API takes them, in the library's form (`null` removes; absent = unchanged). */
function ratesOf(b: { rate?: { requests: number; per: RateUnit } | null; token_rate?: { tokens: number; per: RateUnit } | null }): RatesPatch {
  return {
    ...(b.rate !== undefined && { requests: b.rate === null ? null : { count: b.rate.requests, per: b.rate.per } }),
    ...(b.token_rate !== undefined && { tokens: b.token_rate === null ? null : { count: b.token_rate.tokens, per: b.token_rate.per } }),
  };
}

/** An owner (account-scoped token) sets its keys' rates within its account's; operators set any. Refused before anything is written. */
async function ownerRule(mc: ConsoleService, scoped: boolean, account: string, p: RatesPatch): Promise<void> {
  if (!scoped || (p.requests == null && p.tokens == null)) return;
  await mc.rates.checkWithinAccount(account, { requests: p.requests ?? null, tokens: p.tokens ?? null });
}

export function tokenJson(t: TokenRecord): z.infer<typeof S.Token> {
  return { id: t.id, name: t.name, scope: t.account ?? 'all', status: t.status, hint: t.hint, created_at: iso(t.createdAt)!, revoked_at: iso(t.revokedAt) };
}

/**
 * Error answers a route may give, for the OpenAPI document. Every route: 401 (no or a bad token),
 * 429 (rate limit), 500 (a stored record off the schema), 503 (the store is unavailable).
 */
function errors(...codes: (400 | 403 | 404 | 409 | 413 | 415 | 422)[]) {
  const out: Record<number, typeof S.ErrorBody> = { 401: S.ErrorBody, 429: S.ErrorBody, 500: S.ErrorBody, 503: S.ErrorBody };
  for (const c of codes) out[c] = S.ErrorBody;
  return out;
}

/** A change (any method but GET) may also answer 403 (a web session without its CSRF token), 413 and 415 (its body). */
const changeErrors = (...codes: (400 | 403 | 404 | 409 | 413 | 415 | 422)[]) => errors(403, 413, 415, ...codes);

const SECURITY = [{ managementToken: [] }];

/** JSON with sorted keys: the body part of an idempotency fingerprint. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/** `currency`: the deployment's currency code, shown with every balance. */
export function registerRoutes(app: FastifyInstance, mc: ConsoleService, bookingPerMinute: number, currency = 'USD'): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  /** Book-keeping writes: a bucket per token of their own, apart from the token's other requests. */
  const booking = { rateLimit: { max: bookingPerMinute, timeWindow: 60_000, keyGenerator: (req: FastifyRequest) => `booking:${req.principal?.token.id ?? req.ip}` } };

  /**
   * An account with whether it has a wallet at all (never credited: none), the deployment's currency
   * and how its live sidecars read a model name without a provider.
   */
  async function accountView(account: string): Promise<z.infer<typeof S.Account>> {
    const a = accountJson(await mc.accountInfo(account));
    // A wallet exists once credited: crediting is the one write that makes the wallet's balance.
    const m = await mc.accountPriceMultiplier(account); // section 16: shown when set
    return { ...a, wallet: { ...a.wallet, exists: a.wallet.rule === 'credited' }, currency, ...(m !== '1' ? { price_multiplier: m } : {}) };
  }

  /**
   * Refuses a key the token may not see: another account's key is indistinguishable from an unknown
   * one, in its answer and in its cost (the same reads of the store on both paths).
   */
  async function visibleKey(req: FastifyRequest, id: string): Promise<void> {
    const p = principal(req);
    const account = await mc.accountOfKeyId(id);
    if (account === null || (p.token.account !== null && p.token.account !== account)) throw new ApiError('NOT_FOUND', `no key with id ${id}`);
  }

  /**
   * Runs a creation (a create or a roll) once per Idempotency-Key: a repeat with the same request
   * answers the first result again (its plaintext shown again: audited as a reveal); another request
   * with the same key, or one while the first is running, is a 409.
   */
  async function idempotent<T>(req: FastifyRequest, fingerprint: string, run: () => Promise<{ keyId: string; answer: T }>, replay: (keyId: string) => Promise<T>): Promise<T> {
    const p = principal(req);
    const idem = req.headers['idempotency-key'];
    const claim = typeof idem === 'string' ? await mc.claimIdempotency(p.token.id, idem, fingerprint) : null;
    if (claim?.kind === 'replay') {
      const answer = await replay(claim.keyId);
      const key = await mc.getKey(claim.keyId);
      await mc.audit(p.actor, 'reveal', key.account, key.id, { via: 'idempotent replay' });
      return answer;
    }
    try {
      const { keyId, answer } = await run();
      if (claim) await mc.completeIdempotency(claim.slot, fingerprint, keyId);
      return answer;
    } catch (err) {
      if (claim) await mc.releaseIdempotency(claim.slot);
      throw err;
    }
  }

  /** The plaintext of a key an Idempotency-Key created, unless it was revoked since. */
  async function replayedKey(keyId: string): Promise<{ view: ManagedKeyView; key: string }> {
    const view = await mc.getKeyView(keyId);
    if (view.status === 'revoked') throw new ApiError('CONFLICT', `the key this Idempotency-Key created (${view.id}) has since been revoked`);
    const { key } = await mc.revealKey(view.id);
    return { view, key };
  }

  r.post(
    '/v1/accounts/:account/keys',
    {
      schema: {
        tags: ['keys'],
        operationId: 'createKey', summary: 'Create a key (shown once; honours Idempotency-Key)',
        security: SECURITY,
        params: S.AccountParams,
        headers: S.IdempotencyHeaders,
        body: S.CreateKeyBody,
        response: { 201: S.CreatedKey, ...changeErrors(400, 403, 404, 409, 413, 422) },
      },
    },
    async (req, reply) => {
      const { account } = req.params;
      const p = requireAccount(req, account, `no account with id ${account}`);
      const rates = ratesOf(req.body);
      await ownerRule(mc, p.token.account !== null, account, rates);
      const input = { account, name: req.body.name, models: req.body.models ?? null, expiresAt: req.body.expires_at ?? null, limit: limitOf(req.body.limit) ?? null, rates };
      const fingerprint = `POST /v1/accounts/${account}/keys ${canonical(req.body)}`;
      const answer = await idempotent(
        req,
        fingerprint,
        async () => {
          const created = await mc.createKey(input, p.actor);
          // A developer manages the keys they created (roles.ts); the record follows the create, best-effort.
          const unfinished = [...(created.unfinished ?? [])];
          await bestEffort(unfinished, 'key creator', () => recordCreator(mc, req, account, created.id));
          if (unfinished.length > 0) reply.header(UNFINISHED_HEADER, unfinished.join(', '));
          return { keyId: created.id, answer: { ...keyJson(await mc.getKeyView(created.id)), key: created.key } };
        },
        async (keyId) => {
          const r = await replayedKey(keyId);
          return { ...keyJson(r.view), key: r.key };
        },
      );
      return reply.code(201).send(answer);
    },
  );

  r.get(
    '/v1/accounts/:account/keys',
    {
      schema: {
        tags: ['keys'],
        operationId: 'listKeys',
        summary: "List an account's keys, a page at a time (search, status filter, sort, cursor)",
        security: SECURITY,
        params: S.AccountParams,
        querystring: S.KeyListQuery,
        response: { 200: S.KeyList, ...errors(400, 404) },
      },
    },
    async (req) => {
      requireAccount(req, req.params.account, `no account with id ${req.params.account}`);
      const q = req.query;
      const cursor = q.cursor === undefined ? null : decodeCursor(q.cursor, q.sort);
      if (q.cursor !== undefined && cursor === null) throw new ApiError('INVALID_INPUT', 'querystring.cursor: not a cursor of this list and sort (start again without it)');
      const page = await listKeyPage(mc, req.params.account, { limit: q.limit, cursor, status: q.status, q: q.q ?? '', sort: q.sort });
      return {
        keys: page.keys.map((k) => ({ ...keyJson(k), state: k.state, limit_reached_until: k.limitUntil === null || k.limitUntil === Infinity ? null : iso(k.limitUntil) })),
        next_cursor: page.next,
        total: page.total,
        active_keys: page.activeKeys,
        max_active_keys: page.maxActiveKeys,
      };
    },
  );

  r.get('/v1/keys/:id', { schema: { tags: ['keys'], operationId: 'getKey', summary: 'Show a key', security: SECURITY, params: S.KeyParams, response: { 200: S.Key, ...errors(400, 404) } } }, async (req) => {
    await visibleKey(req, req.params.id);
    return keyJson(await mc.getKeyView(req.params.id));
  });

  r.patch(
    '/v1/keys/:id',
    { schema: { tags: ['keys'], operationId: 'updateKey', summary: "Change a key's name, models, expiry or spend limit", security: SECURITY, params: S.KeyParams, body: S.UpdateKeyBody, response: { 200: S.Key, ...changeErrors(400, 404, 409, 413) } } },
    async (req) => {
      await visibleKey(req, req.params.id);
      const b = req.body;
      const patch = {
        ...(b.name !== undefined && { name: b.name }),
        ...(b.models !== undefined && { models: b.models }),
        ...(b.expires_at !== undefined && { expiresAt: b.expires_at }),
        ...(b.limit !== undefined && { limit: limitOf(b.limit) }),
        ...((b.rate !== undefined || b.token_rate !== undefined) && { rates: ratesOf(b) }),
      };
      if (patch.rates) await ownerRule(mc, principal(req).token.account !== null, (await mc.accountOfKeyId(req.params.id))!, patch.rates);
      if (Object.keys(patch).length > 0) await mc.updateKey(req.params.id, patch, principal(req).actor);
      if (b.alert_thresholds !== undefined) await mc.setKeyAlertThresholds(req.params.id, b.alert_thresholds, principal(req).actor); // events
      return keyJson(await mc.getKeyView(req.params.id));
    },
  );

  r.post(
    '/v1/keys/:id/reveal',
    { schema: { tags: ['keys'], operationId: 'revealKey', summary: "Show a key's plaintext again", security: SECURITY, params: S.KeyParams, response: { 200: S.Revealed, ...changeErrors(400, 404, 409) } } },
    async (req) => {
      await visibleKey(req, req.params.id);
      return mc.revealKey(req.params.id, principal(req).actor);
    },
  );

  r.post(
    '/v1/keys/:id/revoke',
    { schema: { tags: ['keys'], operationId: 'revokeKey', summary: 'Revoke a key (cannot be undone)', security: SECURITY, params: S.KeyParams, response: { 200: S.Key, ...changeErrors(400, 404) } } },
    async (req, reply) => {
      await visibleKey(req, req.params.id);
      const revoked = await mc.revokeKey(req.params.id, principal(req).actor);
      if (revoked.unfinished) reply.header(UNFINISHED_HEADER, revoked.unfinished.join(', '));
      return keyJson(await mc.getKeyView(req.params.id));
    },
  );

  r.post(
    '/v1/keys/:id/roll',
    {
      schema: {
        tags: ['keys'],
        operationId: 'rollKey', summary: 'Replace a key with a new one of the same settings; the old one expires after the grace',
        security: SECURITY,
        params: S.KeyParams,
        headers: S.IdempotencyHeaders,
        body: S.RollKeyBody,
        response: { 201: S.RolledKey, ...changeErrors(400, 404, 409, 413, 422) },
      },
      // No body at all means the defaults.
      preValidation: async (req) => {
        req.body ??= {};
      },
    },
    async (req, reply) => {
      await visibleKey(req, req.params.id);
      const oldId = req.params.id;
      const answer = await idempotent(
        req,
        `POST /v1/keys/${oldId}/roll ${canonical(req.body)}`,
        async () => {
          const rolled = await mc.rollKey(oldId, { graceSeconds: req.body.grace_seconds ?? 0, name: req.body.name ?? null }, principal(req).actor);
          const unfinished = [...(rolled.unfinished ?? [])];
          await bestEffort(unfinished, 'key creator', () => recordCreator(mc, req, rolled.old.account, rolled.id, oldId));
          if (unfinished.length > 0) reply.header(UNFINISHED_HEADER, unfinished.join(', '));
          const [fresh, old] = await Promise.all([mc.getKeyView(rolled.id), mc.getKeyView(oldId)]);
          return { keyId: rolled.id, answer: { ...keyJson(fresh), key: rolled.key, old: keyJson(old) } };
        },
        async (keyId) => {
          const r = await replayedKey(keyId);
          return { ...keyJson(r.view), key: r.key, old: keyJson(await mc.getKeyView(oldId)) };
        },
      );
      return reply.code(201).send(answer);
    },
  );

  r.get(
    '/v1/accounts/:account',
    { schema: { tags: ['accounts'], operationId: 'getAccount', summary: "Show an account: status and wallet", security: SECURITY, params: S.AccountParams, response: { 200: S.Account, ...errors(400, 404) } } },
    async (req) => {
      requireAccount(req, req.params.account, `no account with id ${req.params.account}`);
      return accountView(req.params.account);
    },
  );

  r.patch(
    '/v1/accounts/:account',
    {
      schema: {
        tags: ['accounts'],
        operationId: 'updateAccount',
        summary: "Set or remove the account's request and token rates, set its price multiplier or its billing (operator)",
        security: SECURITY,
        params: S.AccountParams,
        body: S.UpdateAccountBody,
        response: { 200: S.Account, ...changeErrors(400, 403) },
      },
    },
    async (req) => {
      const p = requireAllAccounts(req, "change an account's rates, price multiplier or billing");
      // The multiplier first: it is the one change checked only when written (the others by the schema), so a bad one changes nothing.
      if (req.body.price_multiplier !== undefined) await mc.setAccountPriceMultiplier(req.params.account, String(req.body.price_multiplier), p.actor);
      if (req.body.rate !== undefined || req.body.token_rate !== undefined) await mc.setAccountRates(req.params.account, ratesOf(req.body), p.actor);
      if (req.body.billing !== undefined) await mc.setAccountBilling(req.params.account, req.body.billing, p.actor);
      return accountView(req.params.account);
    },
  );

  for (const verb of ['disable', 'enable'] as const) {
    r.post(
      `/v1/accounts/:account/${verb}`,
      {
        schema: {
          tags: ['accounts'],
          operationId: `${verb}Account`,
          summary: verb === 'disable' ? "Refuse every key of the account (operator)" : "Accept the account's keys again (operator)",
          security: SECURITY,
          params: S.AccountParams,
          response: { 200: S.Account, ...changeErrors(400, 403) },
        },
      },
      async (req, reply) => {
        const p = requireAllAccounts(req, `${verb} an account`);
        const set = await mc.setAccountStatus(req.params.account, verb === 'disable' ? 'disabled' : 'active', p.actor);
        if (set.unfinished) reply.header(UNFINISHED_HEADER, set.unfinished.join(', '));
        return accountView(req.params.account);
      },
    );
  }

  r.post(
    '/v1/accounts/:account/credits',
    {
      schema: {
        tags: ['accounts'],
        operationId: 'creditAccount',
        summary: "Add to the account's prepaid wallet (operator; idempotent on reference: a repeat answers credited: false)",
        security: SECURITY,
        params: S.AccountParams,
        body: S.CreditBody,
        response: { 200: S.Credited, ...changeErrors(400, 403, 413, 422) },
      },
      config: booking,
      // Scope before the body: an account-scoped token learns nothing about what it sent.
      preValidation: async (req) => void requireAllAccounts(req, 'crediting a wallet'),
    },
    async (req) => {
      const p = requireAllAccounts(req, 'crediting a wallet');
      return creditJson(await mc.creditAccount(req.params.account, req.body.amount_micros, req.body.reference, p.actor));
    },
  );

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
