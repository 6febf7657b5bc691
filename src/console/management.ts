/**
 * The management layer over the key console: management tokens, the audit log, key rolling and
 * idempotent creation. The CLI (`keygate keys|accounts|tokens|audit`) and the management HTTP API
 * (`keygate console`) both run every operation through this one class, so there is one
 * implementation of each.
 *
 * Redis keys it adds to the schema (docs/redis-schema.md, "Management records"):
 *   {ns}:v1:{mgmt}:mtoken:{sha256hex}    HASH    a management token, found by the digest of the token
 *   {ns}:v1:{mgmt}:mtokenid:{tokenId}    STRING  → sha256hex
 *   {ns}:v1:{mgmt}:mtokens               SET     every token id
 *   {ns}:v1:{mgmt}:audit                 LIST    audit events (JSON), newest first, at most AUDIT_RETENTION.all
 *   {ns}:v1:{mgmt}:auditacct:{account}   LIST    the account's audit events, at most AUDIT_RETENTION.perAccount
 *   {ns}:v1:{mgmt}:idem:{actor}:{sha256} STRING  an idempotent creation's fingerprint and result (24 h TTL)
 * and two fields to key records: `rolled_to` and `rolled_from` (key ids).
 */
import { createHash, randomInt } from 'node:crypto';
import { BASE62, generateKey, isWellFormedKey, keyDigest, maskKey } from '../keys/format.ts';
import { SCHEMA_VERSION, type AccountStatus, type KeyRecord } from '../schema/redis-schema.ts';
import { ConsoleError } from './errors.ts';
import type { UsageEntry } from '../schema/money.ts';
import {
  appendAudit,
  KeyConsole,
  type AccountInfo,
  type AuditWrite,
  type CreatedKey,
  type CreateKeyInput,
  type KeyUpdate,
  type KeyView,
  type RevokeResult,
} from './key-console.ts';
import type { CreditResult, UsageInput, UsageResult } from './wallet.ts';
import { AUDIT_WRITE, NOW, REVOKE_WRITE } from './scripts.ts';
import { validateAccountId, validateName } from './validate.ts';

/** Prefix of management tokens: distinct from every API-key prefix, so scanners and sidecars tell them apart. */
export const TOKEN_PREFIX = 'kgmt_';
export const TOKEN_ID_PATTERN = /^tok_[0-9A-Za-z]{16,32}$/;
export { AUDIT_RETENTION } from './scripts.ts';
export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;
export const AUDIT_ACTIONS = ['create', 'update', 'reveal', 'roll', 'revoke', 'disable', 'enable', 'credit', 'token_create', 'token_revoke'] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who acts: a management token, or the CLI (which has direct Redis access). */
export type Actor = { readonly type: 'cli'; readonly id: null; readonly name: null } | { readonly type: 'token'; readonly id: string; readonly name: string };
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

/** A key record with its roll relations. */
export interface ManagedKey extends KeyRecord {
  readonly rolledTo: string | null;
  readonly rolledFrom: string | null;
}

/** A key with its usage and its roll relations. */
export interface ManagedKeyView extends KeyView, ManagedKey {}

/** KEYS: token record, token id index, token set, audit, audit of account. ARGV: id, digest, event, account or '', field, value… */
const TOKEN_CREATE = `${NOW}
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 'EXISTS' end
redis.call('HSET', KEYS[1], 'created_at', now_s, unpack(ARGV, 5))
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
local audit_ev = ARGV[3]
${AUDIT_WRITE(4)}
return 'OK'`;

/** KEYS: token record, audit, audit of account. ARGV: token id, event, account or ''. */
const TOKEN_REVOKE = `${NOW}
local cur = redis.call('HMGET', KEYS[1], 'id', 'status')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
if cur[2] == 'revoked' then return 'ALREADY' end
redis.call('HSET', KEYS[1], 'status', 'revoked', 'revoked_at', now_s)
local audit_ev = ARGV[2]
${AUDIT_WRITE(2)}
return 'OK'`;

/**
 * The old key's side of a roll, in one script. Standalone/Sentinel (`full`): KEYS: old record, new
 * record, old account's active set, audit, audit of account; ARGV: old id, new id, grace ms, event.
 * Cluster: KEYS: old record only (the rest are other slots: the caller does them right after).
 * Grace 0 revokes the old key at once; otherwise its expiry becomes now + grace (or stays, if sooner).
 */
const ROLL = (full: boolean) => `${NOW}
local cur = redis.call('HMGET', KEYS[1], 'id', 'status', 'expires_at')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
${full ? `if redis.call('HGET', KEYS[2], 'id') ~= ARGV[2] then return 'NOTFOUND' end
redis.call('HSET', KEYS[2], 'rolled_from', ARGV[1])` : ''}
redis.call('HSET', KEYS[1], 'rolled_to', ARGV[2], 'updated_at', now_s)
if cur[2] == 'active' then
  local grace = tonumber(ARGV[3])
  if grace == 0 then
    ${REVOKE_WRITE(1)}
    ${full ? "redis.call('SREM', KEYS[3], ARGV[1])" : ''}
  else
    local at = now + grace
    if cur[3] == false or tonumber(cur[3]) > at then
      redis.call('HSET', KEYS[1], 'expires_at', string.format('%d', at))
    end
  end
end
redis.call('HINCRBY', KEYS[1], 'rev', 1)
${full ? `local audit_ev = ARGV[4]
${AUDIT_WRITE(4)}` : ''}
return 'OK'`;
const ROLL_FULL = ROLL(true);
const ROLL_CLUSTER = ROLL(false);

const ID_CHARS = 24;
function randomId(prefix: string): string {
  let s = prefix;
  for (let i = 0; i < ID_CHARS; i++) s += BASE62[randomInt(62)];
  return s;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

export function validateTokenId(id: unknown): string {
  if (typeof id !== 'string' || !TOKEN_ID_PATTERN.test(id)) throw new ConsoleError('INVALID_INPUT', 'token id is invalid: token ids look like tok_ followed by 16-32 letters and digits');
  return id;
}

/** What an idempotent create found: a fresh slot, or the earlier result to replay. */
export type IdempotencyClaim = { readonly kind: 'claimed'; readonly slot: string } | { readonly kind: 'replay'; readonly keyId: string };

export class ManagementConsole {
  readonly keys: KeyConsole;

  constructor(keys: KeyConsole) {
    this.keys = keys;
  }

  /** Management records share the hash tag `{mgmt}`: one slot on Redis Cluster, so their scripts run there too. */
  #k(suffix: string): string {
    return `${this.keys.schema.ns}:v${SCHEMA_VERSION}:{mgmt}:${suffix}`;
  }

  // ---- audit -------------------------------------------------------------------------------

  /** Appends an event (the server stamps the time). Never give key material in `changes`. */
  async audit(actor: Actor, action: AuditAction, account: string | null, keyId: string | null, changes: Record<string, unknown> = {}): Promise<void> {
    await appendAudit(this.keys.redis, this.keys.isCluster, this.#lists(account), eventJson(actor, action, account, keyId, changes));
  }

  /** The global audit list and the account's (operator events without an account go to `auditacct:*`). */
  #lists(account: string | null): readonly [string, string] {
    return [this.#k('audit'), this.#k(`auditacct:${account ?? '*'}`)];
  }

  /** The audit event of one operation, for the key console to write with the change. */
  #write(actor: Actor, action: AuditAction): AuditWrite {
    return { lists: (account) => this.#lists(account), event: (account, keyId, changes) => eventJson(actor, action, account, keyId, changes) };
  }

  /** Newest first; `account` narrows to one account's events. */
  async listAudit(opts: { account?: string; limit?: number } = {}): Promise<AuditEvent[]> {
    const limit = opts.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new ConsoleError('INVALID_INPUT', 'limit must be an integer from 1 to 1000');
    const list = opts.account === undefined ? this.#k('audit') : this.#k(`auditacct:${validateAccountId(opts.account)}`);
    const raw = await this.keys.redis.lrange(list, 0, limit - 1);
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

  // ---- keys ----------------------------------------------------------------------------------

  async createKey(actor: Actor, input: CreateKeyInput): Promise<CreatedKey> {
    return this.keys.createKey(input, this.#write(actor, 'create'));
  }

  async getKey(keyId: string): Promise<ManagedKey> {
    return this.#withRoll(await this.keys.getKey(keyId));
  }

  async listKeys(account: string): Promise<ManagedKey[]> {
    return Promise.all((await this.keys.listKeys(account)).map((r) => this.#withRoll(r)));
  }

  async #withRoll<T extends { readonly id: string }>(r: T): Promise<T & { rolledTo: string | null; rolledFrom: string | null }> {
    return { ...r, ...(await this.#rollFields(r.id)) };
  }

  async #rollFields(keyId: string): Promise<{ rolledTo: string | null; rolledFrom: string | null }> {
    const digest = await this.keys.redis.get(this.keys.schema.keyIdIndex(keyId));
    if (digest === null) return { rolledTo: null, rolledFrom: null };
    const [to, from] = await this.keys.redis.hmget(this.keys.schema.keyRecord(digest), 'rolled_to', 'rolled_from');
    return { rolledTo: to ?? null, rolledFrom: from ?? null };
  }

  async revealKey(actor: Actor, keyId: string): Promise<{ id: string; key: string }> {
    const r = await this.keys.getKey(keyId);
    const out = await this.keys.revealKey(keyId);
    await this.audit(actor, 'reveal', r.account, keyId);
    return out;
  }

  async updateKey(actor: Actor, keyId: string, patch: KeyUpdate): Promise<ManagedKey> {
    const r = await this.keys.updateKey(keyId, patch, this.#write(actor, 'update'));
    return { ...r, ...(await this.#rollFields(keyId)) };
  }

  async revokeKey(actor: Actor, keyId: string): Promise<RevokeResult> {
    return this.keys.revokeKey(keyId, this.#write(actor, 'revoke'));
  }

  /**
   * A new key with the old one's name, account, models, expiry and spend limit; the old key expires after
   * `graceSeconds` (0 = revoked at once). Both records name each other (`rolled_to`/`rolled_from`).
   */
  async rollKey(actor: Actor, keyId: string, graceSeconds = 0): Promise<CreatedKey & { old: ManagedKey }> {
    if (!Number.isSafeInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > 30 * 86400) {
      throw new ConsoleError('INVALID_INPUT', 'grace_seconds must be an integer from 0 to 2592000 (30 days)');
    }
    const old = await this.keys.getKey(keyId);
    if (old.status === 'revoked') throw new ConsoleError('REVOKED', `key ${keyId} is revoked; revoked keys cannot be rolled`);
    if ((await this.#rollFields(keyId)).rolledTo !== null) throw new ConsoleError('REVOKED', `key ${keyId} was already rolled`);
    const { limit } = (await this.keys.getKeyView(keyId)).usage;
    const created = await this.keys.createKey({ account: old.account, name: old.name, models: old.models, expiresAt: old.expiresAt, limit });
    const s = this.keys.schema;
    const [oldDigest, newDigest] = await Promise.all([this.keys.redis.get(s.keyIdIndex(keyId)), this.keys.redis.get(s.keyIdIndex(created.id))]);
    const event = eventJson(actor, 'roll', old.account, keyId, { rolled_to: created.id, grace_seconds: graceSeconds });
    const redis = this.keys.redis;
    const [oldRec, newRec] = [s.keyRecord(oldDigest ?? ''), s.keyRecord(newDigest ?? '')];
    let result: string;
    if (this.keys.isCluster) {
      // Per-slot steps: the old record (the change that matters) first, then the links and the event.
      result = String(await redis.eval(ROLL_CLUSTER, 1, oldRec, keyId, created.id, String(graceSeconds * 1000)));
      if (result === 'OK') {
        await redis.hset(newRec, 'rolled_from', keyId);
        if (graceSeconds === 0) await redis.srem(s.accountActiveKeys(old.account), keyId);
        await appendAudit(redis, true, this.#lists(old.account), event);
      }
    } else {
      result = String(await redis.eval(ROLL_FULL, 5, oldRec, newRec, s.accountActiveKeys(old.account), ...this.#lists(old.account), keyId, created.id, String(graceSeconds * 1000), event));
    }
    if (result !== 'OK') throw new ConsoleError('NOT_FOUND', `no key with id ${keyId}`);
    const [fresh, oldNow] = await Promise.all([this.getKey(created.id), this.getKey(keyId)]);
    return { ...created, record: fresh, old: oldNow };
  }

  // ---- accounts ------------------------------------------------------------------------------

  /** `{id, status, wallet: {enforced, balance_micros}}`. */
  accountInfo(account: string): Promise<AccountInfo> {
    return this.keys.accountInfo(account);
  }

  /** Credits the account's wallet (idempotent on `reference`); audited as `credit` when it changed the balance. */
  async creditAccount(actor: Actor, account: string, amountMicros: number | string, reference: string): Promise<CreditResult> {
    const r = await this.keys.creditAccount(account, amountMicros, reference, actor);
    if (r.credited) await this.audit(actor, 'credit', account, null, { amount_micros: r.amountMicros, reference: r.reference, balance_micros: r.balanceMicros });
    return r;
  }

  // ---- usage ---------------------------------------------------------------------------------

  /** Books one request's cost (not audited: it is the router's bookkeeping, at request rate). */
  recordUsage(input: UsageInput): Promise<UsageResult> {
    return this.keys.recordUsage(input);
  }

  /** A key with its usage (last use, requests, spend, limit) and roll relations. */
  async getKeyView(keyId: string): Promise<ManagedKeyView> {
    return this.#withRoll(await this.keys.getKeyView(keyId));
  }

  async listKeyViews(account: string): Promise<ManagedKeyView[]> {
    return Promise.all((await this.keys.listKeyViews(account)).map((v) => this.#withRoll(v)));
  }

  exportUsage(o: { since: Date | number; until?: Date | number; account?: string }): AsyncGenerator<UsageEntry> {
    return this.keys.exportUsage(o);
  }

  async setAccountStatus(actor: Actor, account: string, status: AccountStatus): Promise<{ account: string; status: AccountStatus; changed: boolean }> {
    const audit = this.#write(actor, status === 'disabled' ? 'disable' : 'enable');
    return status === 'disabled' ? this.keys.disableAccount(account, audit) : this.keys.enableAccount(account, audit);
  }

  // ---- tokens --------------------------------------------------------------------------------

  /** Creates a management token. Returns the token (shown once; only its digest is stored). */
  async createToken(actor: Actor, input: { name: string; account: string | null }): Promise<{ token: string; record: TokenRecord }> {
    const name = validateName(input.name);
    const account = input.account === null ? null : validateAccountId(input.account);
    for (let attempt = 0; attempt < 3; attempt++) {
      const token = generateKey(TOKEN_PREFIX);
      const id = randomId('tok_');
      const digest = keyDigest(token);
      const hint = maskKey(token, TOKEN_PREFIX);
      const event = eventJson(actor, 'token_create', account, null, { token_id: id, name, scope: account ?? 'all' });
      const fields = ['v', SCHEMA_VERSION, 'id', id, 'name', name, 'scope', account ?? '*', 'status', 'active', 'hint', hint];
      const r = String(
        await this.keys.redis.eval(TOKEN_CREATE, 5, this.#k(`mtoken:${digest}`), this.#k(`mtokenid:${id}`), this.#k('mtokens'), ...this.#lists(account), id, digest, event, account ?? '', ...fields),
      );
      if (r === 'EXISTS') continue;
      return { token, record: await this.getToken(id) };
    }
    throw new ConsoleError('CONFLICT', 'could not allocate a unique token after 3 attempts');
  }

  async getToken(tokenId: string): Promise<TokenRecord> {
    validateTokenId(tokenId);
    const digest = await this.keys.redis.get(this.#k(`mtokenid:${tokenId}`));
    const r = digest === null ? null : parseToken(await this.keys.redis.hgetall(this.#k(`mtoken:${digest}`)));
    if (r === null || r.id !== tokenId) throw new ConsoleError('NOT_FOUND', `no token with id ${tokenId}`);
    return r;
  }

  async listTokens(): Promise<TokenRecord[]> {
    const ids = await this.keys.redis.smembers(this.#k('mtokens'));
    const list = await Promise.all(ids.map((id) => this.getToken(id).catch(() => null)));
    return list.filter((t): t is TokenRecord => t !== null).sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  async revokeToken(actor: Actor, tokenId: string): Promise<{ id: string; alreadyRevoked: boolean }> {
    const t = await this.getToken(tokenId);
    const digest = (await this.keys.redis.get(this.#k(`mtokenid:${tokenId}`)))!;
    const event = eventJson(actor, 'token_revoke', t.account, null, { token_id: tokenId, status: 'revoked' });
    const r = String(await this.keys.redis.eval(TOKEN_REVOKE, 3, this.#k(`mtoken:${digest}`), ...this.#lists(t.account), tokenId, event, t.account ?? ''));
    if (r === 'NOTFOUND') throw new ConsoleError('NOT_FOUND', `no token with id ${tokenId}`);
    return { id: tokenId, alreadyRevoked: r === 'ALREADY' };
  }

  /** The active token this plaintext is, or null (malformed, unknown or revoked: indistinguishable). */
  async authenticate(token: string): Promise<TokenRecord | null> {
    if (!isWellFormedKey(token, TOKEN_PREFIX)) return null;
    const r = parseToken(await this.keys.redis.hgetall(this.#k(`mtoken:${keyDigest(token)}`)));
    return r !== null && r.status === 'active' ? r : null;
  }

  // ---- idempotency ---------------------------------------------------------------------------

  /**
   * Claims an idempotency key for one creation. `fingerprint` identifies the request (method, path,
   * body); the same key with another fingerprint, or while the first is still running → CONFLICT.
   */
  async claimIdempotency(scope: string, idempotencyKey: string, fingerprint: string): Promise<IdempotencyClaim> {
    const slot = this.#k(`idem:${scope}:${sha256(idempotencyKey)}`);
    const mine = JSON.stringify({ f: sha256(fingerprint), key_id: null });
    const set = await this.keys.redis.set(slot, mine, 'EX', IDEMPOTENCY_TTL_SECONDS, 'NX');
    if (set === 'OK') return { kind: 'claimed', slot };
    const cur = await this.keys.redis.get(slot);
    let parsed: { f?: string; key_id?: string | null } = {};
    try {
      parsed = JSON.parse(cur ?? '{}') as typeof parsed;
    } catch {
      /* treated as a mismatch below */
    }
    if (parsed.f !== sha256(fingerprint)) throw new ConsoleError('CONFLICT', 'Idempotency-Key was already used with another request');
    if (typeof parsed.key_id !== 'string') throw new ConsoleError('CONFLICT', 'a request with this Idempotency-Key is still in progress');
    return { kind: 'replay', keyId: parsed.key_id };
  }

  async completeIdempotency(slot: string, fingerprint: string, keyId: string): Promise<void> {
    await this.keys.redis.set(slot, JSON.stringify({ f: sha256(fingerprint), key_id: keyId }), 'KEEPTTL');
  }

  async releaseIdempotency(slot: string): Promise<void> {
    await this.keys.redis.del(slot);
  }

  close(): Promise<void> {
    return this.keys.close();
  }
}


/** The event JSON without `time` (the script prepends it): `{"action":…}`. */
function eventJson(actor: Actor, action: AuditAction, account: string | null, keyId: string | null, changes: Record<string, unknown>): string {
  return JSON.stringify({ action, actor, account, key_id: keyId, changes });
}

function parseToken(h: Record<string, string>): TokenRecord | null {
  if (h.id === undefined || !TOKEN_ID_PATTERN.test(h.id) || (h.status !== 'active' && h.status !== 'revoked') || h.scope === undefined) return null;
  return {
    id: h.id,
    name: h.name ?? '',
    account: h.scope === '*' ? null : h.scope,
    status: h.status,
    createdAt: Number(h.created_at ?? 0),
    revokedAt: h.revoked_at === undefined ? null : Number(h.revoked_at),
    hint: h.hint ?? '',
  };
}

