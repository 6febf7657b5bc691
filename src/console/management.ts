/**
 * The management layer over the key console: management tokens, the audit log, key rolling and
 * idempotent creation. The CLI (`keygate keys|accounts|tokens|audit`) and the management HTTP API
 * (`keygate console`) both run every operation through this one class, so there is one
 * implementation of each.
 *
 * Its Redis keys and fields (tokens, audit lists, idempotency slots) are in src/schema/management.ts
 * (docs/redis-schema.md, "Management records"); it adds two fields to key records: `rolled_to` and
 * `rolled_from` (key ids).
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
import type { RatesPatch } from './rates.ts';
import type { Rates } from '../schema/rates.ts';
import { AUDIT_WRITE, NOW } from './scripts.ts';
import { validateAccountId, validateName } from './validate.ts';
import { EventPublisher } from '../events/publish.ts';
import { ALL_ACCOUNTS, IdempotencyField as IF, managementSchema, TokenField as TF, type ManagementSchema } from '../schema/management.ts';
import { PriceBook, type PriceEntry, type PriceInput } from './prices.ts';
import { summarizeUsage, summarySpan, type UsageGrouping, type UsageSummary } from './usage-summary.ts';

/** Prefix of management tokens: distinct from every API-key prefix, so scanners and sidecars tell them apart. */
export const TOKEN_PREFIX = 'kgmt_';
export const TOKEN_ID_PATTERN = /^tok_[0-9A-Za-z]{16,32}$/;
export { AUDIT_RETENTION } from './scripts.ts';
export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;
export const AUDIT_ACTIONS = ['create', 'update', 'reveal', 'roll', 'revoke', 'disable', 'enable', 'credit', 'token_create', 'token_revoke', 'webhook_create', 'webhook_remove', 'webhook_replay', 'alert', 'price_set', 'price_remove'] as const;
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
  if (typeof id !== 'string' || !TOKEN_ID_PATTERN.test(id)) throw new ConsoleError('INVALID_INPUT', 'token id is invalid: token ids look like tok_ followed by 16-32 letters and digits');
  return id;
}

/** What an idempotent create found: a fresh slot, or the earlier result to replay. */
export type IdempotencyClaim = { readonly kind: 'claimed'; readonly slot: string } | { readonly kind: 'replay'; readonly keyId: string };

export class ManagementConsole {
  readonly keys: KeyConsole;

  /** Events of key and account changes (docs/events.md), published right after each change. */
  readonly events: EventPublisher;

  constructor(keys: KeyConsole) {
    this.keys = keys;
    this.events = new EventPublisher(keys.redis, keys.schema.ns);
  }

  /** Management records share the hash tag `{mgmt}`: one slot on Redis Cluster, so their scripts run there too. */
  get #m(): ManagementSchema {
    return managementSchema(this.keys.schema.ns);
  }

  // ---- audit -------------------------------------------------------------------------------

  /** Appends an event (the server stamps the time). Never give key material in `changes`. */
  async audit(actor: Actor, action: AuditAction, account: string | null, keyId: string | null, changes: Record<string, unknown> = {}): Promise<void> {
    await appendAudit(this.keys.redis, this.keys.isCluster, this.#lists(account), eventJson(actor, action, account, keyId, changes));
  }

  /** The global audit list and the account's (operator events without an account go to `auditacct:*`). */
  #lists(account: string | null): readonly [string, string] {
    return [this.#m.audit(), this.#m.auditOfAccount(account)];
  }

  /** The audit event of one operation, for the key console to write with the change. */
  #write(actor: Actor, action: AuditAction): AuditWrite {
    return { lists: (account) => this.#lists(account), event: (account, keyId, changes) => eventJson(actor, action, account, keyId, changes) };
  }

  /** Newest first; `account` narrows to one account's events. */
  async listAudit(opts: { account?: string; limit?: number } = {}): Promise<AuditEvent[]> {
    const limit = opts.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new ConsoleError('INVALID_INPUT', 'limit must be an integer from 1 to 1000');
    const list = opts.account === undefined ? this.#m.audit() : this.#m.auditOfAccount(validateAccountId(opts.account));
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

  // ---- prices --------------------------------------------------------------------------------

  /** The price table (docs/metering.md, "Prices"). */
  get prices(): PriceBook {
    return new PriceBook(this.keys.redis, this.keys.schema.ns, this.keys.isCluster);
  }

  listPrices(): Promise<PriceEntry[]> {
    return this.prices.list();
  }

  /** Sets a model's price (micro-units per million tokens); audited as `price_set` in the same script. */
  setPrice(actor: Actor, model: string, price: PriceInput): Promise<PriceEntry> {
    const rec = { input: price.input, output: price.output, ...(price.cachedInput != null ? { cachedInput: price.cachedInput } : {}), ...(price.cacheWrite != null ? { cacheWrite: price.cacheWrite } : {}) };
    return this.prices.set(model, rec, (m, p) => ({
      lists: this.#lists(null),
      event: eventJson(actor, 'price_set', null, null, { model: m, input_micros: p.input, output_micros: p.output, cached_input_micros: p.cachedInput ?? null, cache_write_micros: p.cacheWrite ?? null }),
    }));
  }

  /** Removes a model's price; audited as `price_remove` in the same script. */
  removePrice(actor: Actor, model: string): Promise<void> {
    return this.prices.remove(model, (m) => ({ lists: this.#lists(null), event: eventJson(actor, 'price_remove', null, null, { model: m }) }));
  }

  // ---- keys ----------------------------------------------------------------------------------

  async createKey(actor: Actor, input: CreateKeyInput): Promise<CreatedKey> {
    const created = await this.keys.createKey(input, this.#write(actor, 'create'));
    await this.events.keyEvent('key.created', created.record);
    return created;
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
    await this.events.trackExpiry(r);
    return { ...r, ...(await this.#rollFields(keyId)) };
  }

  async revokeKey(actor: Actor, keyId: string): Promise<RevokeResult> {
    const r = await this.keys.revokeKey(keyId, this.#write(actor, 'revoke'));
    if (!r.alreadyRevoked) await this.events.keyEvent('key.revoked', await this.keys.getKey(keyId));
    return r;
  }

  /**
   * A new key with the old one's name, account, models, expiry and spend (limit and spend so far); the
   * old key expires after `graceSeconds` (0 = revoked at once). Both records name each other
   * (`rolled_to`/`rolled_from`). Exactly one roll of a key succeeds; another is REVOKED.
   */
  async rollKey(actor: Actor, keyId: string, graceSeconds = 0): Promise<CreatedKey & { old: ManagedKey }> {
    if (!Number.isSafeInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > 30 * 86400) {
      throw new ConsoleError('INVALID_INPUT', 'grace_seconds must be an integer from 0 to 2592000 (30 days)');
    }
    const created = await this.keys.rollKey(keyId, graceSeconds * 1000, this.#write(actor, 'roll'));
    const [fresh, oldNow] = await Promise.all([this.getKey(created.id), this.getKey(keyId)]);
    await this.events.keyRolled(oldNow, fresh, graceSeconds);
    return { ...created, record: fresh, old: oldNow };
  }

  // ---- accounts ------------------------------------------------------------------------------

  /** `{id, status, wallet: {enforced, balance_micros}}`. */
  accountInfo(account: string): Promise<AccountInfo> {
    return this.keys.accountInfo(account);
  }

  /** Sets or (null) removes the account's request and token rates (operators); audited as `update`. */
  setAccountRates(actor: Actor, account: string, patch: RatesPatch): Promise<Rates> {
    return this.keys.setAccountRates(account, patch, this.#write(actor, 'update'));
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

  /** The account's usage log from `since` to `until` summed per day, key or model (usage-summary.ts). */
  usageSummary(account: string, o: { since: number; until: number; groupBy: UsageGrouping }): Promise<UsageSummary> {
    const span = summarySpan(o.since, o.until);
    return summarizeUsage(account, this.keys.exportUsage({ ...span, account }), span, o.groupBy);
  }

  async setAccountStatus(actor: Actor, account: string, status: AccountStatus): Promise<{ account: string; status: AccountStatus; changed: boolean }> {
    const audit = this.#write(actor, status === 'disabled' ? 'disable' : 'enable');
    const r = status === 'disabled' ? await this.keys.disableAccount(account, audit) : await this.keys.enableAccount(account, audit);
    if (r.changed) await this.events.publish(account, status === 'disabled' ? 'account.disabled' : 'account.enabled', { account_id: account, status });
    return r;
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
      const fields = [TF.version, SCHEMA_VERSION, TF.id, id, TF.name, name, TF.scope, account ?? ALL_ACCOUNTS, TF.status, 'active', TF.hint, hint];
      const r = String(
        await this.keys.redis.eval(TOKEN_CREATE, 5, this.#m.token(digest), this.#m.tokenIdIndex(id), this.#m.tokens(), ...this.#lists(account), id, digest, event, account ?? '', ...fields),
      );
      if (r === 'EXISTS') continue;
      return { token, record: await this.getToken(id) };
    }
    throw new ConsoleError('CONFLICT', 'could not allocate a unique token after 3 attempts');
  }

  async getToken(tokenId: string): Promise<TokenRecord> {
    validateTokenId(tokenId);
    const digest = await this.keys.redis.get(this.#m.tokenIdIndex(tokenId));
    const r = digest === null ? null : parseToken(await this.keys.redis.hgetall(this.#m.token(digest)));
    if (r === null || r.id !== tokenId) throw new ConsoleError('NOT_FOUND', `no token with id ${tokenId}`);
    return r;
  }

  async listTokens(): Promise<TokenRecord[]> {
    const ids = await this.keys.redis.smembers(this.#m.tokens());
    const list = await Promise.all(ids.map((id) => this.getToken(id).catch(() => null)));
    return list.filter((t): t is TokenRecord => t !== null).sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  async revokeToken(actor: Actor, tokenId: string): Promise<{ id: string; alreadyRevoked: boolean }> {
    const t = await this.getToken(tokenId);
    const digest = (await this.keys.redis.get(this.#m.tokenIdIndex(tokenId)))!;
    const event = eventJson(actor, 'token_revoke', t.account, null, { token_id: tokenId, status: 'revoked' });
    const r = String(await this.keys.redis.eval(TOKEN_REVOKE, 3, this.#m.token(digest), ...this.#lists(t.account), tokenId, event, t.account ?? ''));
    if (r === 'NOTFOUND') throw new ConsoleError('NOT_FOUND', `no token with id ${tokenId}`);
    return { id: tokenId, alreadyRevoked: r === 'ALREADY' };
  }

  /** The active token this plaintext is, or null (malformed, unknown or revoked: indistinguishable). */
  async authenticate(token: string): Promise<TokenRecord | null> {
    if (!isWellFormedKey(token, TOKEN_PREFIX)) return null;
    const r = parseToken(await this.keys.redis.hgetall(this.#m.token(keyDigest(token))));
    return r !== null && r.status === 'active' ? r : null;
  }

  // ---- idempotency ---------------------------------------------------------------------------

  /**
   * Claims an idempotency key for one creation. `fingerprint` identifies the request (method, path,
   * body); the same key with another fingerprint, or while the first is still running → CONFLICT.
   */
  async claimIdempotency(scope: string, idempotencyKey: string, fingerprint: string): Promise<IdempotencyClaim> {
    const slot = this.#m.idempotency(scope, sha256(idempotencyKey));
    const mine = idempotencySlot(fingerprint, null);
    const set = await this.keys.redis.set(slot, mine, 'EX', IDEMPOTENCY_TTL_SECONDS, 'NX');
    if (set === 'OK') return { kind: 'claimed', slot };
    const cur = await this.keys.redis.get(slot);
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

  async completeIdempotency(slot: string, fingerprint: string, keyId: string): Promise<void> {
    await this.keys.redis.set(slot, idempotencySlot(fingerprint, keyId), 'KEEPTTL');
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

