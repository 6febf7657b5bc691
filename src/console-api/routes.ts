/**
 * The `/v1` resources of the management API. Every handler runs one operation of the management
 * console library (the CLI's too) after the scope checks of `auth.ts`, and answers in the JSON forms
 * the CLI's `--json` prints (`src/console/views.ts`). Crediting a wallet and recording usage are
 * operator operations (`requireAllAccounts`): an account's owner must not fund its own wallet.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ManagedKeyView, ManagementConsole, TokenRecord } from '../console/management.ts';
import type { KeyLimit } from '../schema/money.ts';
import { accountJson, creditJson, keyJson as keyViewJson, usageEntryJson, usageJson } from '../console/views.ts';
import { requireAccount, requireAllAccounts, principal } from './auth.ts';
import { ApiError } from './errors.ts';
import * as S from './schemas.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A key as the API shows it: the console's key view with its roll relations. */
export function keyJson(v: ManagedKeyView): z.infer<typeof S.Key> {
  return { ...keyViewJson(v), rolled_to: v.rolledTo, rolled_from: v.rolledFrom };
}

/** A limit as the API takes it, in the library's form (`null` = none; absent = unchanged). */
function limitOf(l: { amount_micros: number; period: KeyLimit['period'] } | null | undefined): KeyLimit | null | undefined {
  return l === undefined || l === null ? l : { amountMicros: l.amount_micros, period: l.period };
}

export function tokenJson(t: TokenRecord): z.infer<typeof S.Token> {
  return { id: t.id, name: t.name, scope: t.account ?? 'all', status: t.status, hint: t.hint, created_at: iso(t.createdAt)!, revoked_at: iso(t.revokedAt) };
}

/** Error answers a route may give, for the OpenAPI document. */
function errors(...codes: (400 | 403 | 404 | 409 | 413 | 422)[]) {
  const out: Record<number, typeof S.ErrorBody> = { 401: S.ErrorBody, 429: S.ErrorBody };
  for (const c of codes) out[c] = S.ErrorBody;
  return out;
}

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

export function registerRoutes(app: FastifyInstance, mc: ManagementConsole): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  /** The key, if the token may see it; another account's key is indistinguishable from an unknown one. */
  async function visibleKey(req: FastifyRequest, id: string): Promise<ManagedKeyView> {
    const notFound = `no key with id ${id}`;
    const p = principal(req);
    const key = await mc.getKeyView(id);
    if (p.token.account !== null && p.token.account !== key.account) throw new ApiError('NOT_FOUND', notFound);
    return key;
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
        response: { 201: S.CreatedKey, ...errors(400, 403, 404, 409, 413, 422) },
      },
    },
    async (req, reply) => {
      const { account } = req.params;
      const p = requireAccount(req, account, `no account with id ${account}`);
      const input = { account, name: req.body.name, models: req.body.models ?? null, expiresAt: req.body.expires_at ?? null, limit: limitOf(req.body.limit) ?? null };
      const idem = req.headers['idempotency-key'];
      const fingerprint = `POST /v1/accounts/${account}/keys ${canonical(req.body)}`;
      const claim = idem === undefined ? null : await mc.claimIdempotency(p.token.id, idem, fingerprint);
      if (claim?.kind === 'replay') {
        const key = await mc.getKeyView(claim.keyId);
        if (key.status === 'revoked') throw new ApiError('CONFLICT', `the key this Idempotency-Key created (${key.id}) has since been revoked`);
        const { key: plaintext } = await mc.keys.revealKey(key.id);
        return reply.code(201).send({ ...keyJson(key), key: plaintext });
      }
      try {
        const created = await mc.createKey(p.actor, input);
        if (claim) await mc.completeIdempotency(claim.slot, fingerprint, created.id);
        return reply.code(201).send({ ...keyJson(await mc.getKeyView(created.id)), key: created.key });
      } catch (err) {
        if (claim) await mc.releaseIdempotency(claim.slot);
        throw err;
      }
    },
  );

  r.get(
    '/v1/accounts/:account/keys',
    { schema: { tags: ['keys'], operationId: 'listKeys', summary: "List an account's keys", security: SECURITY, params: S.AccountParams, response: { 200: S.KeyList, ...errors(400, 404) } } },
    async (req) => {
      requireAccount(req, req.params.account, `no account with id ${req.params.account}`);
      return { keys: (await mc.listKeyViews(req.params.account)).map(keyJson) };
    },
  );

  r.get('/v1/keys/:id', { schema: { tags: ['keys'], operationId: 'getKey', summary: 'Show a key', security: SECURITY, params: S.KeyParams, response: { 200: S.Key, ...errors(400, 404) } } }, async (req) =>
    keyJson(await visibleKey(req, req.params.id)),
  );

  r.patch(
    '/v1/keys/:id',
    { schema: { tags: ['keys'], operationId: 'updateKey', summary: "Change a key's name, models, expiry or spend limit", security: SECURITY, params: S.KeyParams, body: S.UpdateKeyBody, response: { 200: S.Key, ...errors(400, 404, 409, 413) } } },
    async (req) => {
      await visibleKey(req, req.params.id);
      const b = req.body;
      await mc.updateKey(principal(req).actor, req.params.id, {
        ...(b.name !== undefined && { name: b.name }),
        ...(b.models !== undefined && { models: b.models }),
        ...(b.expires_at !== undefined && { expiresAt: b.expires_at }),
        ...(b.limit !== undefined && { limit: limitOf(b.limit) }),
      });
      return keyJson(await mc.getKeyView(req.params.id));
    },
  );

  r.post(
    '/v1/keys/:id/reveal',
    { schema: { tags: ['keys'], operationId: 'revealKey', summary: "Show a key's plaintext again", security: SECURITY, params: S.KeyParams, response: { 200: S.Revealed, ...errors(400, 404, 409) } } },
    async (req) => {
      await visibleKey(req, req.params.id);
      return mc.revealKey(principal(req).actor, req.params.id);
    },
  );

  r.post(
    '/v1/keys/:id/revoke',
    { schema: { tags: ['keys'], operationId: 'revokeKey', summary: 'Revoke a key (cannot be undone)', security: SECURITY, params: S.KeyParams, response: { 200: S.Key, ...errors(400, 404) } } },
    async (req) => {
      await visibleKey(req, req.params.id);
      await mc.revokeKey(principal(req).actor, req.params.id);
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
        body: S.RollKeyBody,
        response: { 201: S.RolledKey, ...errors(400, 404, 409, 413, 422) },
      },
      // No body at all means the defaults.
      preValidation: async (req) => {
        req.body ??= {};
      },
    },
    async (req, reply) => {
      await visibleKey(req, req.params.id);
      const rolled = await mc.rollKey(principal(req).actor, req.params.id, req.body.grace_seconds ?? 0);
      const [fresh, old] = await Promise.all([mc.getKeyView(rolled.id), mc.getKeyView(req.params.id)]);
      return reply.code(201).send({ ...keyJson(fresh), key: rolled.key, old: keyJson(old) });
    },
  );

  r.get(
    '/v1/accounts/:account',
    { schema: { tags: ['accounts'], operationId: 'getAccount', summary: "Show an account: status and wallet", security: SECURITY, params: S.AccountParams, response: { 200: S.Account, ...errors(400, 404) } } },
    async (req) => {
      requireAccount(req, req.params.account, `no account with id ${req.params.account}`);
      return accountJson(await mc.accountInfo(req.params.account));
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
          response: { 200: S.Account, ...errors(400, 403) },
        },
      },
      async (req) => {
        const p = requireAllAccounts(req, `${verb} an account`);
        await mc.setAccountStatus(p.actor, req.params.account, verb === 'disable' ? 'disabled' : 'active');
        return accountJson(await mc.accountInfo(req.params.account));
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
        response: { 200: S.Credited, ...errors(400, 403, 413) },
      },
      // Scope before the body: an account-scoped token learns nothing about what it sent.
      preValidation: async (req) => void requireAllAccounts(req, 'crediting a wallet'),
    },
    async (req) => {
      const p = requireAllAccounts(req, 'crediting a wallet');
      return creditJson(await mc.creditAccount(p.actor, req.params.account, req.body.amount_micros, req.body.reference));
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
        response: { 200: S.UsageBooked, ...errors(400, 403, 404, 413) },
      },
      preValidation: async (req) => void requireAllAccounts(req, 'recording usage'),
    },
    async (req) => {
      requireAllAccounts(req, 'recording usage');
      const b = req.body;
      return usageJson(
        await mc.recordUsage({ keyId: b.key_id, amountMicros: b.amount_micros, requestId: b.request_id, model: b.model ?? null, inputTokens: b.input_tokens ?? null, outputTokens: b.output_tokens ?? null }),
      );
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
    { schema: { tags: ['tokens'], operationId: 'createToken', summary: 'Create a management token (operator; shown once)', security: SECURITY, body: S.CreateTokenBody, response: { 201: S.CreatedToken, ...errors(400, 403, 413) } } },
    async (req, reply) => {
      const p = requireAllAccounts(req, 'managing tokens');
      const t = await mc.createToken(p.actor, { name: req.body.name, account: req.body.account });
      return reply.code(201).send({ ...tokenJson(t.record), token: t.token });
    },
  );

  r.get('/v1/tokens', { schema: { tags: ['tokens'], operationId: 'listTokens', summary: 'List management tokens (operator)', security: SECURITY, response: { 200: S.TokenList, ...errors(403) } } }, async (req) => {
    requireAllAccounts(req, 'managing tokens');
    return { tokens: (await mc.listTokens()).map(tokenJson) };
  });

  r.post(
    '/v1/tokens/:id/revoke',
    { schema: { tags: ['tokens'], operationId: 'revokeToken', summary: 'Revoke a management token (operator)', security: SECURITY, params: S.TokenParams, response: { 200: S.Token, ...errors(400, 403, 404) } } },
    async (req) => {
      const p = requireAllAccounts(req, 'managing tokens');
      await mc.revokeToken(p.actor, req.params.id);
      return tokenJson(await mc.getToken(req.params.id));
    },
  );
}
