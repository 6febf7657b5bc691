/**
 * The key resource of the management API: create and list an account's keys, show, change, reveal,
 * revoke and roll one. A key another account owns is indistinguishable from an unknown one.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ManagedKeyView } from '../console/keys.ts';
import type { ConsoleService } from '../console/service.ts';
import type { KeyLimit } from '../schema/money.ts';
import type { RatesPatch } from '../console/rates.ts';
import { keyJson as keyViewJson } from '../console/views.ts';
import { requireAccount, principal } from './auth.ts';
import { decodeCursor } from '../core/key-page.ts';
import { listKeyPage } from '../console/key-list.ts';
import { ApiError } from './errors.ts';
import { recordCreator } from './roles.ts';
import * as S from './schemas.ts';
import { bestEffort, UNFINISHED_HEADER } from '../console/best-effort.ts';
import { changeErrors, errors, iso, ratesOf, SECURITY } from './route-common.ts';

/** A key as the API shows it: the console's key view with its roll relations. */
export function keyJson(v: ManagedKeyView): z.infer<typeof S.Key> {
  return { ...keyViewJson(v), rolled_to: v.rolledTo, rolled_from: v.rolledFrom };
}

/** A limit as the API takes it, in the library's form (`null` = none; absent = unchanged). */
function limitOf(l: { amount_micros: number; period: KeyLimit['period'] } | null | undefined): KeyLimit | null | undefined {
  return l === undefined || l === null ? l : { amountMicros: l.amount_micros, period: l.period };
}

/** An owner (account-scoped token) sets its keys' rates within its account's; operators set any. Refused before anything is written. */
async function ownerRule(mc: ConsoleService, scoped: boolean, account: string, p: RatesPatch): Promise<void> {
  if (!scoped || (p.requests == null && p.tokens == null)) return;
  await mc.rates.checkWithinAccount(account, { requests: p.requests ?? null, tokens: p.tokens ?? null });
}

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

/**
 * Refuses a key the token may not see: another account's key is indistinguishable from an unknown
 * one, in its answer and in its cost (the same reads of the store on both paths).
 */
async function visibleKey(mc: ConsoleService, req: FastifyRequest, id: string): Promise<void> {
  const p = principal(req);
  const account = await mc.accountOfKeyId(id);
  if (account === null || (p.token.account !== null && p.token.account !== account)) throw new ApiError('NOT_FOUND', `no key with id ${id}`);
}

/**
 * Runs a creation (a create or a roll) once per Idempotency-Key: a repeat with the same request
 * answers the first result again (its plaintext shown again: audited as a reveal); another request
 * with the same key, or one while the first is running, is a 409.
 */
async function idempotent<T>(mc: ConsoleService, req: FastifyRequest, fingerprint: string, run: () => Promise<{ keyId: string; answer: T }>, replay: (keyId: string) => Promise<T>): Promise<T> {
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
async function replayedKey(mc: ConsoleService, keyId: string): Promise<{ view: ManagedKeyView; key: string }> {
  const view = await mc.getKeyView(keyId);
  if (view.status === 'revoked') throw new ApiError('CONFLICT', `the key this Idempotency-Key created (${view.id}) has since been revoked`);
  const { key } = await mc.revealKey(view.id);
  return { view, key };
}

export function registerKeyRoutes(app: FastifyInstance, mc: ConsoleService): void {
  registerAccountKeyRoutes(app, mc);
  registerKeyItemRoutes(app, mc);
}

/** `/v1/accounts/{account}/keys`: create a key, list the account's keys. */
function registerAccountKeyRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
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
        mc,
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
          const r = await replayedKey(mc, keyId);
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
}

/** `/v1/keys/{id}…`: show, change, reveal, revoke and roll one key. */
function registerKeyItemRoutes(app: FastifyInstance, mc: ConsoleService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.get('/v1/keys/:id', { schema: { tags: ['keys'], operationId: 'getKey', summary: 'Show a key', security: SECURITY, params: S.KeyParams, response: { 200: S.Key, ...errors(400, 404) } } }, async (req) => {
    await visibleKey(mc, req, req.params.id);
    return keyJson(await mc.getKeyView(req.params.id));
  });

  r.patch(
    '/v1/keys/:id',
    { schema: { tags: ['keys'], operationId: 'updateKey', summary: "Change a key's name, models, expiry or spend limit", security: SECURITY, params: S.KeyParams, body: S.UpdateKeyBody, response: { 200: S.Key, ...changeErrors(400, 404, 409, 413) } } },
    async (req) => {
      await visibleKey(mc, req, req.params.id);
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
      await visibleKey(mc, req, req.params.id);
      return mc.revealKey(req.params.id, principal(req).actor);
    },
  );

  r.post(
    '/v1/keys/:id/revoke',
    { schema: { tags: ['keys'], operationId: 'revokeKey', summary: 'Revoke a key (cannot be undone)', security: SECURITY, params: S.KeyParams, response: { 200: S.Key, ...changeErrors(400, 404) } } },
    async (req, reply) => {
      await visibleKey(mc, req, req.params.id);
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
      await visibleKey(mc, req, req.params.id);
      const oldId = req.params.id;
      const answer = await idempotent(
        mc,
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
          const r = await replayedKey(mc, keyId);
          return { ...keyJson(r.view), key: r.key, old: keyJson(await mc.getKeyView(oldId)) };
        },
      );
      return reply.code(201).send(answer);
    },
  );
}
