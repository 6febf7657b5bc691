/**
 * The management records, one resource of the console service (src/console/service.ts): the audit
 * log, management tokens and idempotency slots. Their Redis keys and fields are in
 * src/schema/management.ts (docs/redis-schema.md, "Management records"; hash tag `{mgmt}`, one slot on
 * Cluster). Each operation takes the service's shared context first.
 */
import { createHash, randomInt } from 'node:crypto';
import { BASE62, generateKey, isWellFormedKey, keyDigest, maskKey } from '../core/key-format.ts';
import { SCHEMA_VERSION } from '../schema/redis-schema.ts';
import type { RedisClient } from '../store/redis.ts';
import { ConsoleError } from './errors.ts';
import type { ConsoleContext } from './context.ts';
import * as lua from './scripts.ts';
import { AUDIT_WRITE, NOW } from './scripts.ts';
import { validateAccountId, validateName } from './validate.ts';
import { ALL_ACCOUNTS, IdempotencyField as IF, TokenField as TF } from '../schema/management.ts';

/** Prefix of management tokens: distinct from every API-key prefix, so scanners and sidecars tell them apart. */
export const TOKEN_PREFIX = 'kgmt_';
export const TOKEN_ID_PATTERN = /^tok_[0-9A-Za-z]{16,32}$/;
/** TOKEN_ID_PATTERN in words, for error messages. */
export const TOKEN_ID_RULE = 'tok_ followed by 16-32 letters and digits';
export { AUDIT_RETENTION } from './scripts.ts';
export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;
export const AUDIT_ACTIONS = ['create', 'update', 'reveal', 'roll', 'revoke', 'disable', 'enable', 'credit', 'token_create', 'token_revoke', 'webhook_create', 'webhook_remove', 'webhook_replay', 'alert', 'price_set', 'price_remove', 'member_add', 'member_update', 'member_remove', 'credential_set', 'credential_remove'] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who acts: a management token, the CLI (which has direct Redis access), or a person signed in on the page (id: the ID token's `sub`, name: its email or name). */
export type Actor =
  | { readonly type: 'cli'; readonly id: null; readonly name: null }
  | { readonly type: 'token'; readonly id: string; readonly name: string }
  | { readonly type: 'user'; readonly id: string; readonly name: string };
export const CLI_ACTOR: Actor = { type: 'cli', id: null, name: null };

export interface AuditEvent {
  readonly time: string;
  readonly action: AuditAction;
  readonly actor: Actor;
  readonly account: string | null;
  readonly key_id: string | null;
  readonly changes: Record<string, unknown>;
}

export interface TokenRecord {
  readonly id: string;
  readonly name: string;
  /** `null` = every account. */
  readonly account: string | null;
  readonly status: 'active' | 'revoked';
  readonly createdAt: number;
  readonly revokedAt: number | null;
  readonly hint: string;
}

/** KEYS: token record, token id index, token set, audit, audit of account. ARGV: id, digest, event, account or '', field, value… */
const TOKEN_CREATE = `${NOW}
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 'EXISTS' end
redis.call('HSET', KEYS[1], '${TF.createdAt}', now_s, unpack(ARGV, 5))
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
local audit_ev = ARGV[3]
${AUDIT_WRITE(4)}
return 'OK'`;

/** KEYS: token record, audit, audit of account. ARGV: token id, event, account or ''. */
const TOKEN_REVOKE = `${NOW}
local cur = redis.call('HMGET', KEYS[1], '${TF.id}', '${TF.status}')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
if cur[2] == 'revoked' then return 'ALREADY' end
redis.call('HSET', KEYS[1], '${TF.status}', 'revoked', '${TF.revokedAt}', now_s)
local audit_ev = ARGV[2]
${AUDIT_WRITE(2)}
return 'OK'`;

const ID_CHARS = 24;
function randomId(prefix: string): string {
  let s = prefix;
  for (let i = 0; i < ID_CHARS; i++) s += BASE62[randomInt(62)];
  return s;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

export function validateTokenId(id: unknown): string {
  if (typeof id !== 'string' || !TOKEN_ID_PATTERN.test(id)) throw new ConsoleError('INVALID_INPUT', `token id is invalid: token ids look like ${TOKEN_ID_RULE}`);
  return id;
}

/** What an idempotent create found: a fresh slot, or the earlier result to replay. */
export type IdempotencyClaim = { readonly kind: 'claimed'; readonly slot: string } | { readonly kind: 'replay'; readonly keyId: string };

// ---- audit ---------------------------------------------------------------------------------

/**
 * The audit event of one operation, for a change's own script to write with it (standalone and
 * Sentinel), or right after it (Cluster, where the lists are in another slot).
 */
export interface AuditWrite {
  /** The global and the account's audit lists. */
  readonly lists: (account: string) => readonly [string, string];
  /** The event JSON without its `time` (the script stamps the Redis clock). */
  readonly event: (account: string, keyId: string | null, changes: Record<string, unknown>) => string;
}

/** The audit write of `action` by `actor`; none without an actor (the library's plain call). */
export function auditWrite(ctx: ConsoleContext, actor: Actor | undefined, action: AuditAction): AuditWrite | undefined {
  if (actor === undefined) return undefined;
  return { lists: (account) => ctx.auditLists(account), event: (account, keyId, changes) => eventJson(actor, action, account, keyId, changes) };
}

/** Appends an audit event to both lists: one script, or (Cluster) one per list. */
export async function appendAudit(redis: RedisClient, cluster: boolean, lists: readonly [string, string], event: string): Promise<void> {
  if (!cluster) {
    await redis.eval(lua.AUDIT_APPEND, 2, lists[0], lists[1], event);
    return;
  }
  await redis.eval(lua.AUDIT_APPEND_ONE, 1, lists[0], event, String(lua.AUDIT_RETENTION.all));
  await redis.eval(lua.AUDIT_APPEND_ONE, 1, lists[1], event, String(lua.AUDIT_RETENTION.perAccount));
}

/** Appends an event (the server stamps the time). Never give key material in `changes`. */
export async function audit(ctx: ConsoleContext, actor: Actor, action: AuditAction, account: string | null, keyId: string | null, changes: Record<string, unknown> = {}): Promise<void> {
  await appendAudit(ctx.redis, ctx.isCluster, ctx.auditLists(account), eventJson(actor, action, account, keyId, changes));
}

/** Newest first; `account` narrows to one account's events. */
export async function listAudit(ctx: ConsoleContext, opts: { account?: string; limit?: number } = {}): Promise<AuditEvent[]> {
  const limit = opts.limit ?? 100;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new ConsoleError('INVALID_INPUT', 'limit must be an integer from 1 to 1000');
  const list = opts.account === undefined ? ctx.m.audit() : ctx.m.auditOfAccount(validateAccountId(opts.account));
  const raw = await ctx.redis.lrange(list, 0, limit - 1);
  return raw.map((s) => {
    try {
      const e = JSON.parse(s) as Omit<AuditEvent, 'time'> & { time: string };
      // Stored with the Redis server's clock in epoch ms; shown as ISO-8601.
      return { ...e, time: /^\d{1,16}$/.test(e.time) ? new Date(Number(e.time)).toISOString() : e.time };
    } catch {
      throw new ConsoleError('CORRUPT', 'an audit event is not JSON');
    }
  });
}

// ---- tokens ----------------------------------------------------------------------------------

/** Creates a management token. Returns the token (shown once; only its digest is stored). Always audited (`actor` defaults to the CLI). */
export async function createToken(ctx: ConsoleContext, input: { name: string; account: string | null }, actor: Actor = CLI_ACTOR): Promise<{ token: string; record: TokenRecord }> {
  const name = validateName(input.name);
  const account = input.account === null ? null : validateAccountId(input.account);
  for (let attempt = 0; attempt < 3; attempt++) {
    const token = generateKey(TOKEN_PREFIX);
    const id = randomId('tok_');
    const digest = keyDigest(token);
    const hint = maskKey(token, TOKEN_PREFIX);
    const event = eventJson(actor, 'token_create', account, null, { token_id: id, name, scope: account ?? 'all' });
    const fields = [TF.version, SCHEMA_VERSION, TF.id, id, TF.name, name, TF.scope, account ?? ALL_ACCOUNTS, TF.status, 'active', TF.hint, hint];
    const r = String(await ctx.redis.eval(TOKEN_CREATE, 5, ctx.m.token(digest), ctx.m.tokenIdIndex(id), ctx.m.tokens(), ...ctx.auditLists(account), id, digest, event, account ?? '', ...fields));
    if (r === 'EXISTS') continue;
    return { token, record: await getToken(ctx, id) };
  }
  throw new ConsoleError('CONFLICT', 'could not allocate a unique token after 3 attempts');
}

export async function getToken(ctx: ConsoleContext, tokenId: string): Promise<TokenRecord> {
  validateTokenId(tokenId);
  const digest = await ctx.redis.get(ctx.m.tokenIdIndex(tokenId));
  const r = digest === null ? null : parseToken(await ctx.redis.hgetall(ctx.m.token(digest)));
  if (r === null || r.id !== tokenId) throw new ConsoleError('NOT_FOUND', `no token with id ${tokenId}`);
  return r;
}

export async function listTokens(ctx: ConsoleContext): Promise<TokenRecord[]> {
  const ids = await ctx.redis.smembers(ctx.m.tokens());
  const list = await Promise.all(ids.map((id) => getToken(ctx, id).catch(() => null)));
  return list.filter((t): t is TokenRecord => t !== null).sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
}

/** Revokes a management token (idempotent); always audited (`actor` defaults to the CLI). */
export async function revokeToken(ctx: ConsoleContext, tokenId: string, actor: Actor = CLI_ACTOR): Promise<{ id: string; alreadyRevoked: boolean }> {
  const t = await getToken(ctx, tokenId);
  const digest = (await ctx.redis.get(ctx.m.tokenIdIndex(tokenId)))!;
  const event = eventJson(actor, 'token_revoke', t.account, null, { token_id: tokenId, status: 'revoked' });
  const r = String(await ctx.redis.eval(TOKEN_REVOKE, 3, ctx.m.token(digest), ...ctx.auditLists(t.account), tokenId, event, t.account ?? ''));
  if (r === 'NOTFOUND') throw new ConsoleError('NOT_FOUND', `no token with id ${tokenId}`);
  return { id: tokenId, alreadyRevoked: r === 'ALREADY' };
}

/** The active token this plaintext is, or null (malformed, unknown or revoked: indistinguishable). */
export async function authenticate(ctx: ConsoleContext, token: string): Promise<TokenRecord | null> {
  if (!isWellFormedKey(token, TOKEN_PREFIX)) return null;
  const r = parseToken(await ctx.redis.hgetall(ctx.m.token(keyDigest(token))));
  return r !== null && r.status === 'active' ? r : null;
}

// ---- idempotency -----------------------------------------------------------------------------

/**
 * Claims an idempotency key for one creation. `fingerprint` identifies the request (method, path,
 * body); the same key with another fingerprint, or while the first is still running → CONFLICT.
 */
export async function claimIdempotency(ctx: ConsoleContext, scope: string, idempotencyKey: string, fingerprint: string): Promise<IdempotencyClaim> {
  const slot = ctx.m.idempotency(scope, sha256(idempotencyKey));
  const mine = idempotencySlot(fingerprint, null);
  const set = await ctx.redis.set(slot, mine, 'EX', IDEMPOTENCY_TTL_SECONDS, 'NX');
  if (set === 'OK') return { kind: 'claimed', slot };
  const cur = await ctx.redis.get(slot);
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(cur ?? '{}') as typeof parsed;
  } catch {
    /* treated as a mismatch below */
  }
  const keyId = parsed?.[IF.keyId];
  if (parsed?.[IF.fingerprint] !== sha256(fingerprint)) throw new ConsoleError('CONFLICT', 'Idempotency-Key was already used with another request');
  if (typeof keyId !== 'string') throw new ConsoleError('CONFLICT', 'a request with this Idempotency-Key is still in progress');
  return { kind: 'replay', keyId };
}

export async function completeIdempotency(ctx: ConsoleContext, slot: string, fingerprint: string, keyId: string): Promise<void> {
  await ctx.redis.set(slot, idempotencySlot(fingerprint, keyId), 'KEEPTTL');
}

export async function releaseIdempotency(ctx: ConsoleContext, slot: string): Promise<void> {
  await ctx.redis.del(slot);
}

/** The event JSON without `time` (the script prepends it): `{"action":…}`. */
export function eventJson(actor: Actor, action: AuditAction, account: string | null, keyId: string | null, changes: Record<string, unknown>): string {
  return JSON.stringify({ action, actor, account, key_id: keyId, changes });
}

/** An idempotency slot's JSON: the fingerprint's digest and the key created (null: in progress). */
function idempotencySlot(fingerprint: string, keyId: string | null): string {
  return JSON.stringify({ [IF.fingerprint]: sha256(fingerprint), [IF.keyId]: keyId });
}

function parseToken(h: Record<string, string>): TokenRecord | null {
  const id = h[TF.id];
  const status = h[TF.status];
  const scope = h[TF.scope];
  if (id === undefined || !TOKEN_ID_PATTERN.test(id) || (status !== 'active' && status !== 'revoked') || scope === undefined) return null;
  const revokedAt = h[TF.revokedAt];
  return {
    id,
    name: h[TF.name] ?? '',
    account: scope === ALL_ACCOUNTS ? null : scope,
    status,
    createdAt: Number(h[TF.createdAt] ?? 0),
    revokedAt: revokedAt === undefined ? null : Number(revokedAt),
    hint: h[TF.hint] ?? '',
  };
}

