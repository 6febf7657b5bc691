/**
 * The console library: every operation the gateway's console performs on keys and
 * accounts, each atomic in Redis, on the schema of `src/schema/redis-schema.ts`
 * (prose: docs/redis-schema.md). Every input is validated before the first write.
 */
import { randomInt } from 'node:crypto';
import { Cluster } from 'ioredis';
import { openSecret, parseKeyring, REVEAL_KEY_ENV, RevealKeyError, sealSecret, type Keyring } from '../keys/crypto.ts';
import { BASE62, DEFAULT_KEY_PREFIX, generateKey, isValidKeyPrefix, KEY_PREFIX_RULE, keyDigest, maskKey } from '../keys/format.ts';
import {
  DEFAULT_NAMESPACE,
  encodeKeyRecord,
  encodeModels,
  KeyField,
  LIMITS,
  parseKeyRecord,
  schema,
  SCHEMA_VERSION,
  type AccountStatus,
  type KeyRecord,
  type Schema,
} from '../schema/redis-schema.ts';
import { connectRedis, type RedisClient } from '../store/redis.ts';
import { ConsoleError } from './errors.ts';
import { rateChanges, rateOps, RateSettings, validateRatesPatch, type RatesPatch, type RatesUse } from './rates.ts';
import { encodeRateFields, type Rates } from '../schema/rates.ts';
import * as lua from './scripts.ts';
import { validateAccountId, validateExpiry, validateKeyId, validateModels, validateName } from './validate.ts';
import {
  MONEY_DEFAULTS,
  validateLimit,
  WalletOps,
  type AccountWallet,
  type CreditResult,
  type KeyUsage,
  type UsageInput,
  type UsageResult,
} from './wallet.ts';
import type { KeyLimit, TokenTotals, UsageEntry } from '../schema/money.ts';

export type ExpiryInput = Date | string | number;

export interface KeyConsoleOptions {
  /** A connected ioredis client (standalone, Sentinel or Cluster), or a Redis URL (see README "Configuration"). */
  readonly redis: RedisClient | string;
  /** Redis key namespace (`KEYGATE_REDIS_NAMESPACE`); must match the sidecars'. Default `kg`. */
  readonly namespace?: string;
  /** Key prefix (`KEYGATE_KEY_PREFIX`); must match the sidecars'. Default `kg_`. */
  readonly keyPrefix?: string;
  /**
   * The key-encryption key(s) in `KEYGATE_REVEAL_KEY` format. Only createKey and revealKey need it;
   * read from the environment when not given, and only when one of them is called.
   */
  readonly revealKey?: string;
  /** Maximum active keys per account (default LIMITS.activeKeysPerAccount = 100). */
  readonly maxActiveKeysPerAccount?: number;
  /** Command timeout when `redis` is a URL (default 5000 ms). */
  readonly commandTimeoutMs?: number;
  /** The deployment refuses accounts without a wallet (`KEYGATE_REQUIRE_WALLET`); shown as `wallet.enforced`. */
  readonly requireWallet?: boolean;
  /** How long a usage record's request id is remembered (default 7 days). */
  readonly usageIdempotencySeconds?: number;
  /** Usage-log entries kept per account (default 100,000; trimmed approximately). */
  readonly usageLogMaxEntries?: number;
}

/** An account as the console shows it. */
export interface AccountInfo {
  readonly id: string;
  readonly status: AccountStatus;
  readonly wallet: AccountWallet;
  /** Booked tokens today and this month (UTC), over the account's keys. */
  readonly tokens: TokenTotals;
  readonly rates: Rates;
}

/** A key record with its usage (last used, requests, spend, limit) and its rates' current windows. */
export interface KeyView extends KeyRecord {
  readonly usage: KeyUsage;
  readonly rateUse: RatesUse;
}

export interface CreateKeyInput {
  readonly account: string;
  readonly name: string;
  /** Allowed model patterns; absent or null = every model. */
  readonly models?: readonly string[] | null;
  /** Expiry instant; absent or null = never. ISO-8601 strings need a zone (or are a plain date, UTC). */
  readonly expiresAt?: ExpiryInput | null;
  /** Spend limit per period; absent or null = none. */
  readonly limit?: KeyLimit | null;
  /** Request and token rates; absent or null = none. */
  readonly rates?: RatesPatch;
}

export interface CreatedKey {
  readonly id: string;
  /** The plaintext key. Shown once; revealKey can show it again. */
  readonly key: string;
  readonly record: KeyRecord;
}

/** Fields to change; a field left out is untouched. `null` models = every model; `null` expiry = never. */
export interface KeyUpdate {
  readonly name?: string;
  readonly models?: readonly string[] | null;
  readonly expiresAt?: ExpiryInput | null;
  /** `null` = no limit. */
  readonly limit?: KeyLimit | null;
  /** `null` removes a rate; a rate left out is untouched. */
  readonly rates?: RatesPatch;
}

/**
 * An audit event to write with a change (the management layer builds it): appended in the
 * change's own script on standalone and Sentinel, right after it on Cluster.
 */
export interface AuditWrite {
  /** The global and the account's audit lists. */
  readonly lists: (account: string) => readonly [string, string];
  /** The event JSON without its `time` (the script stamps the Redis clock). */
  readonly event: (account: string, keyId: string | null, changes: Record<string, unknown>) => string;
}

export interface RevokeResult {
  readonly id: string;
  readonly account: string;
  /** True when the key was already revoked (revoking is idempotent). */
  readonly alreadyRevoked: boolean;
}

export interface AccountResult {
  readonly account: string;
  readonly status: AccountStatus;
  /** False when the account already had this status. */
  readonly changed: boolean;
}

const KEY_ID_RANDOM_CHARS = 24; // 142.9 bits

export function generateKeyId(): string {
  let s = 'key_';
  for (let i = 0; i < KEY_ID_RANDOM_CHARS; i++) s += BASE62[randomInt(62)];
  return s;
}

export class KeyConsole {
  readonly redis: RedisClient;
  readonly schema: Schema;
  readonly keyPrefix: string;
  readonly #ownsClient: boolean;
  readonly #revealKey: string | undefined;
  readonly #maxActive: number;
  readonly #money: WalletOps;
  /** Rate settings and window reads (docs/rate-limits.md). */
  readonly rates: RateSettings;
  #ring: Keyring | undefined;
  #lastRedisError: Error | undefined;

  constructor(opts: KeyConsoleOptions) {
    this.schema = schema(opts.namespace ?? DEFAULT_NAMESPACE);
    const prefix = opts.keyPrefix ?? DEFAULT_KEY_PREFIX;
    if (!isValidKeyPrefix(prefix)) throw new ConsoleError('INVALID_INPUT', `key prefix ${KEY_PREFIX_RULE}`);
    this.keyPrefix = prefix;
    this.#revealKey = opts.revealKey;
    const max = opts.maxActiveKeysPerAccount ?? LIMITS.activeKeysPerAccount;
    if (!Number.isSafeInteger(max) || max < 1) throw new ConsoleError('INVALID_INPUT', 'maxActiveKeysPerAccount must be a positive integer');
    this.#maxActive = max;
    if (typeof opts.redis === 'string') {
      this.redis = connectRedis(opts.redis, {
        commandTimeoutMs: opts.commandTimeoutMs ?? 5000,
        connectionName: 'keygate-console',
        queueWhileOffline: true,
      });
      this.#ownsClient = true;
      this.redis.on('error', (err: Error) => {
        this.#lastRedisError = err;
      });
    } else {
      this.redis = opts.redis;
      this.#ownsClient = false;
    }
    const positive = (v: number | undefined, d: number, what: string) => {
      const n = v ?? d;
      if (!Number.isSafeInteger(n) || n < 1) throw new ConsoleError('INVALID_INPUT', `${what} must be a positive integer`);
      return n;
    };
    this.rates = new RateSettings(this.redis, this.schema);
    this.#money = new WalletOps(this.redis, this.schema, {
      requireWallet: opts.requireWallet === true,
      usageIdempotencySeconds: positive(opts.usageIdempotencySeconds, MONEY_DEFAULTS.usageIdempotencySeconds, 'usageIdempotencySeconds'),
      usageLogMaxEntries: positive(opts.usageLogMaxEntries, MONEY_DEFAULTS.usageLogMaxEntries, 'usageLogMaxEntries'),
    });
  }

  get isCluster(): boolean {
    return this.redis instanceof Cluster;
  }

  /** The last connection error of a client this console opened itself (for a clearer message). */
  get lastRedisError(): Error | undefined {
    return this.#lastRedisError;
  }

  /** Creates an active key. Returns its id and plaintext (the only time it is returned unasked). */
  async createKey(input: CreateKeyInput, audit?: AuditWrite): Promise<CreatedKey> {
    const account = validateAccountId(input.account);
    const name = validateName(input.name);
    const models = input.models === undefined ? null : validateModels(input.models);
    const expiresAt = input.expiresAt === undefined || input.expiresAt === null ? null : validateExpiry(input.expiresAt, Date.now());
    const limit = input.limit === undefined || input.limit === null ? null : validateLimit(input.limit);
    const rates = validateRatesPatch(input.rates);
    const ring = this.#keyring();

    for (let attempt = 0; attempt < 3; attempt++) {
      const key = generateKey(this.keyPrefix);
      const id = generateKeyId();
      const digest = keyDigest(key);
      const fields = encodeKeyRecord({
        id,
        account,
        name,
        models,
        expiresAt,
        hint: maskKey(key, this.keyPrefix),
        secret: sealSecret(ring, id, key),
      });
      fields.push(...encodeRateFields(rates).set);
      const expiryArg = expiresAt === null ? '' : String(expiresAt);
      const ev = audit && {
        audit,
        account,
        keyId: id,
        changes: { name, models, expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(), ...(limit !== null ? { limit: limitJson(limit) } : {}), ...rateChanges(rates) },
      };
      // The limit first: the key is usable only once its record exists, and never without its limit.
      if (limit !== null) await this.#money.setLimit(account, id, limit);
      // Likewise its token-rate mirror (bookings count against it from the key's first request).
      if (rates.tokens) await this.rates.setTokenRate(account, id, rates.tokens);
      const result = this.isCluster
        ? await this.#createStepwise(account, id, digest, expiryArg, fields)
        : await this.#eval(lua.CREATE_ALL, [this.schema.keyRecord(digest), this.schema.keyIdIndex(id), this.schema.accountKeys(account), this.schema.accountActiveKeys(account), ...this.#indexKeys(account)], [String(this.#maxActive), id, digest, expiryArg, ...fields], ev);
      if (result !== 'OK' && limit !== null) await this.#money.dropSpend(account, id);
      if (result === 'EXISTS') continue;
      this.#expectOk(result, id);
      if (this.isCluster && ev) await this.#auditAfter(ev);
      return { id, key, record: await this.#readRecord(digest, id) };
    }
    throw new ConsoleError('CONFLICT', 'could not allocate a unique key id and key after 3 attempts');
  }

  /**
   * Replaces an active key with a new one of the same account, name, models and expiry, carrying its
   * spend record (every period, the total and the limit: rolling never resets a spend limit). Exactly
   * one roll of a key succeeds: the "already rolled" check and the new key are one script (on Cluster
   * the old record is claimed for the new key first). Another roll gets REVOKED ("already rolled").
   * The old key is revoked at once (`graceMs` 0; then it does not count against the active-key limit)
   * or expires after the grace.
   */
  async rollKey(keyId: string, graceMs: number, audit?: AuditWrite): Promise<CreatedKey> {
    validateKeyId(keyId);
    const s = this.schema;
    const oldDigest = await this.#digestOf(keyId);
    const old = await this.#readRecord(oldDigest, keyId);
    if (old.status === 'revoked') throw new ConsoleError('REVOKED', `key ${keyId} is revoked; revoked keys cannot be rolled`);
    const ring = this.#keyring();
    const account = old.account;
    for (let attempt = 0; attempt < 3; attempt++) {
      const key = generateKey(this.keyPrefix);
      const id = generateKeyId();
      const digest = keyDigest(key);
      const fields = [
        ...encodeKeyRecord({ id, account, name: old.name, models: old.models, expiresAt: old.expiresAt, hint: maskKey(key, this.keyPrefix), secret: sealSecret(ring, id, key) }),
        'rolled_from',
        keyId,
      ];
      const expiryArg = old.expiresAt === null ? '' : String(old.expiresAt);
      const ev = audit && { audit, account, keyId, changes: { rolled_to: id, grace_seconds: graceMs / 1000 } };
      // The spend first, like a create's limit: the new key is usable only once its record exists.
      await this.#money.copySpend(account, keyId, id);
      const result = this.isCluster
        ? await this.#rollStepwise(s.keyRecord(oldDigest), keyId, account, id, digest, expiryArg, fields, graceMs)
        : await this.#eval(
            lua.ROLL_ALL,
            [s.keyRecord(oldDigest), s.keyRecord(digest), s.keyIdIndex(id), s.accountKeys(account), s.accountActiveKeys(account), ...this.#indexKeys(account)],
            [keyId, id, String(graceMs), String(this.#maxActive), digest, expiryArg, ...fields],
            ev,
          );
      if (result !== 'OK') await this.#money.dropSpend(account, id);
      if (result === 'EXISTS') continue;
      if (result === 'ROLLED') throw new ConsoleError('REVOKED', `key ${keyId} was already rolled`);
      this.#expectOk(result, keyId);
      if (this.isCluster && ev) await this.#auditAfter(ev);
      return { id, key, record: await this.#readRecord(digest, id) };
    }
    throw new ConsoleError('CONFLICT', 'could not allocate a unique key id and key after 3 attempts');
  }

  /** Cluster roll: claim the old record, create the new key stepwise (undoing the claim if it fails), retire the old key. */
  async #rollStepwise(oldRec: string, keyId: string, account: string, id: string, digest: string, expiryArg: string, fields: string[], graceMs: number): Promise<string> {
    const claim = await this.#eval(lua.ROLL_CLAIM, [oldRec], [keyId, id]);
    if (claim !== 'OK') return claim;
    const created = await this.#createStepwise(account, id, digest, expiryArg, fields, graceMs === 0 ? keyId : '');
    if (created !== 'OK') {
      await this.#eval(lua.ROLL_UNCLAIM, [oldRec], [id]);
      return created;
    }
    const finished = await this.#eval(lua.ROLL_FINISH, [oldRec], [keyId, id, String(graceMs)]);
    if (graceMs === 0) await this.redis.srem(this.schema.accountActiveKeys(account), keyId);
    await this.indexRecords(account, [oldRec]);
    return finished;
  }

  /** Cluster: indexes first (each a single-slot write), the key record last; undo the indexes on a collision. */
  async #createStepwise(account: string, id: string, digest: string, expiryArg: string, fields: string[], replacing = ''): Promise<string> {
    const s = this.schema;
    const reserved = await this.#eval(lua.CREATE_RESERVE, [s.accountActiveKeys(account)], [String(this.#maxActive), id, replacing]);
    if (reserved !== 'OK') return reserved;
    const undo = async () => {
      await this.redis.srem(s.accountActiveKeys(account), id);
      await this.redis.srem(s.accountKeys(account), id);
    };
    await this.redis.sadd(s.accountKeys(account), id);
    if ((await this.redis.set(s.keyIdIndex(id), digest, 'NX')) === null) {
      await undo();
      return 'EXISTS';
    }
    const result = await this.#eval(lua.CREATE_RECORD, [s.keyRecord(digest)], [expiryArg, ...fields]);
    if (result !== 'OK') {
      await this.redis.del(s.keyIdIndex(id));
      await undo();
    } else {
      await this.indexRecords(account, [s.keyRecord(digest)]);
    }
    return result;
  }

  /** An account's keys, active and revoked, oldest first. Never plaintext. */
  async listKeys(account: string): Promise<KeyRecord[]> {
    validateAccountId(account);
    const s = this.schema;
    const [ids, active] = await Promise.all([this.redis.smembers(s.accountKeys(account)), this.redis.smembers(s.accountActiveKeys(account))]);
    const digests = await Promise.all(ids.map((id) => this.redis.get(s.keyIdIndex(id))));
    const hashes = await Promise.all(digests.map((d) => (d === null ? Promise.resolve({}) : this.redis.hgetall(s.keyRecord(d)))));
    const out: KeyRecord[] = [];
    const activeSet = new Set(active);
    const heal: string[] = [];
    hashes.forEach((h, i) => {
      const id = ids[i]!;
      const r = parseKeyRecord(h);
      // An index entry without a record is a create that has not finished (or crashed): not a key.
      if (r === null) return;
      if (typeof r === 'string') throw new ConsoleError('CORRUPT', `key ${id}: record does not follow schema v${SCHEMA_VERSION} (${r})`);
      if (r.id !== id || r.account !== account) throw new ConsoleError('CORRUPT', `key ${id}: index points at a record of another key`);
      if (r.status === 'revoked' && activeSet.has(id)) heal.push(id);
      out.push(r);
    });
    // A revoke interrupted between its steps on Cluster leaves the id in the active set; revoked is
    // terminal, so removing it is always safe.
    if (heal.length > 0) await this.redis.srem(s.accountActiveKeys(account), ...heal);
    return out.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  /**
   * The account of a key id, or null for an unknown id: always the same two reads (the id index, then
   * one field of a record — a placeholder name for an unknown id), so an unknown id and a known one
   * cost the same round trips.
   */
  async accountOfKeyId(keyId: string): Promise<string | null> {
    validateKeyId(keyId);
    const digest = await this.redis.get(this.schema.keyIdIndex(keyId));
    const ok = digest !== null && /^[0-9a-f]{64}$/.test(digest);
    const account = await this.redis.hget(this.schema.keyRecord(ok ? digest : '0'.repeat(64)), KeyField.account);
    return ok ? account : null;
  }

  /** One key's record (never plaintext). */
  async getKey(keyId: string): Promise<KeyRecord> {
    validateKeyId(keyId);
    return this.#readRecord(await this.#digestOf(keyId), keyId);
  }

  /** The plaintext of an active key, decrypted from its envelope. Revoked keys cannot be revealed. */
  async revealKey(keyId: string): Promise<{ id: string; key: string }> {
    validateKeyId(keyId);
    const ring = this.#keyring();
    const digest = await this.#digestOf(keyId);
    const [id, status, secret] = await this.redis.hmget(this.schema.keyRecord(digest), KeyField.id, KeyField.status, KeyField.secret);
    if (id !== keyId) throw notFound(keyId);
    if (status === 'revoked') throw new ConsoleError('REVOKED', `key ${keyId} is revoked; its plaintext was destroyed at revocation`);
    if (secret === null || secret === undefined) throw new ConsoleError('CORRUPT', `key ${keyId} has no stored secret`);
    let key: string;
    try {
      key = openSecret(ring, keyId, secret);
    } catch (err) {
      throw new ConsoleError('REVEAL_KEY', `cannot reveal key ${keyId}: ${(err as Error).message}`);
    }
    if (keyDigest(key) !== digest) throw new ConsoleError('CORRUPT', `key ${keyId}: the decrypted secret does not match the record's digest`);
    return { id: keyId, key };
  }

  /** Changes name, allowed models and/or expiry of an active key; other fields are untouched. */
  async updateKey(keyId: string, patch: KeyUpdate, audit?: AuditWrite): Promise<KeyRecord> {
    validateKeyId(keyId);
    const ops: string[] = [];
    if (patch.name !== undefined) ops.push('set', KeyField.name, validateName(patch.name));
    if (patch.models !== undefined) {
      const models = validateModels(patch.models);
      if (models === null) ops.push('del', KeyField.models);
      else ops.push('set', KeyField.models, encodeModels(models));
    }
    if (patch.expiresAt !== undefined) {
      if (patch.expiresAt === null) ops.push('del', KeyField.expiresAt);
      else ops.push('set', KeyField.expiresAt, String(validateExpiry(patch.expiresAt, Date.now())));
    }
    const limit = patch.limit === undefined ? undefined : patch.limit === null ? null : validateLimit(patch.limit);
    const rates = validateRatesPatch(patch.rates);
    ops.push(...rateOps(rates));
    if (ops.length === 0 && limit === undefined) throw new ConsoleError('INVALID_INPUT', 'nothing to update: give a name, models, expiry, limit or rate');
    const digest = await this.#digestOf(keyId);
    const account = await this.redis.hget(this.schema.keyRecord(digest), KeyField.account);
    if (account === null) throw notFound(keyId);
    let ev: AuditEval | undefined;
    if (audit) {
      const changes: Record<string, unknown> = {};
      for (let i = 0; i < ops.length; ) {
        const field = ops[i + 1]!;
        const key = field === KeyField.expiresAt ? 'expires_at' : field;
        if (ops[i] === 'set') changes[key] = field === KeyField.models ? JSON.parse(ops[i + 2]!) : field === KeyField.expiresAt ? new Date(Number(ops[i + 2])).toISOString() : ops[i + 2];
        else changes[key] = null;
        i += ops[i] === 'set' ? 3 : 2;
      }
      if (limit !== undefined) changes.limit = limit === null ? null : limitJson(limit);
      ev = { audit, account, keyId, changes };
    }
    if (ops.length > 0) {
      const rec = this.schema.keyRecord(digest);
      this.#expectOk(await this.#eval(lua.UPDATE, this.isCluster ? [rec] : [rec, ...this.#indexKeys(account)], [keyId, ...ops], ev), keyId);
      if (this.isCluster) await this.indexRecords(account, [rec]);
      if (this.isCluster && ev) await this.#auditAfter(ev);
    }
    if (rates.tokens !== undefined) {
      // The mirror after the record (a revoked key was refused above); a change lifts a block it no longer justifies.
      const r = await this.#readRecord(digest, keyId);
      await this.rates.setTokenRate(r.account, keyId, rates.tokens);
    }
    if (limit !== undefined) {
      // The limit lives with the account's money records (one Cluster slot per account); the record
      // is checked first so that a revoked key's limit is not changed.
      const before = await this.#readRecord(digest, keyId);
      if (before.status === 'revoked') this.#expectOk('REVOKED', keyId);
      await this.#money.setLimit(before.account, keyId, limit);
      // A change of the limit alone has no record script to carry its audit event: it follows the write.
      if (ops.length === 0 && ev) await this.#auditAfter(ev);
    }
    return this.#readRecord(digest, keyId);
  }

  /**
   * Revokes a key: the record stays (status revoked, revoked_at) for audit and lists; the sidecar
   * treats it as unknown; the encrypted plaintext is deleted, so it can never be revealed again.
   */
  async revokeKey(keyId: string, audit?: AuditWrite): Promise<RevokeResult> {
    validateKeyId(keyId);
    const s = this.schema;
    const digest = await this.#digestOf(keyId);
    const account = await this.redis.hget(s.keyRecord(digest), KeyField.account);
    if (account === null) throw notFound(keyId);
    let result: string;
    const ev = audit && { audit, account, keyId, changes: { status: 'revoked' } };
    if (this.isCluster) {
      result = await this.#eval(lua.REVOKE_RECORD_ONLY, [s.keyRecord(digest)], [keyId]);
      if (result === 'OK' || result === 'ALREADY') {
        await this.redis.srem(s.accountActiveKeys(account), keyId);
        await this.indexRecords(account, [s.keyRecord(digest)]);
      }
      if (result === 'OK' && ev) await this.#auditAfter(ev);
    } else {
      result = await this.#eval(lua.REVOKE_ALL, [s.keyRecord(digest), s.accountActiveKeys(account), ...this.#indexKeys(account)], [keyId, account], ev);
    }
    if (result === 'ALREADY') return { id: keyId, account, alreadyRevoked: true };
    this.#expectOk(result, keyId);
    return { id: keyId, account, alreadyRevoked: false };
  }

  /** Every key of the account is refused (403 USER_BLOCKED) until it is enabled again. */
  disableAccount(account: string, audit?: AuditWrite): Promise<AccountResult> {
    return this.#setAccount(account, 'disabled', audit);
  }

  enableAccount(account: string, audit?: AuditWrite): Promise<AccountResult> {
    return this.#setAccount(account, 'active', audit);
  }

  /** The account's status (a missing account record is an enabled account). */
  async accountStatus(account: string): Promise<AccountStatus> {
    validateAccountId(account);
    const st = await this.redis.hget(this.schema.account(account), 'status');
    if (st === null || st === 'active') return 'active';
    if (st === 'disabled') return 'disabled';
    throw new ConsoleError('CORRUPT', `account ${account}: status is neither active nor disabled`);
  }

  /** Adds to the account's prepaid wallet; idempotent on `reference`. `actor` is for the caller's audit log. */
  async creditAccount(account: string, amountMicros: number | string, reference: string, actor?: unknown): Promise<CreditResult> {
    void actor;
    return this.#money.credit(account, amountMicros, reference);
  }

  /** Books one request's cost against the key's account (wallet, key spend, usage log); idempotent on the request id. */
  recordUsage(input: UsageInput): Promise<UsageResult> {
    return this.#money.recordUsage(input);
  }

  /** `{id, status, wallet: {enforced, balance_micros}}`. */
  async accountInfo(account: string): Promise<AccountInfo> {
    const [status, wallet, rates, tokens] = await Promise.all([this.accountStatus(account), this.#money.wallet(account), this.rates.accountRates(account), this.#money.accountTokens(account)]);
    return { id: account, status, wallet, rates, tokens };
  }

  /** Sets or (null) removes the account's rates; refused (nothing changed) when a value is bad. Audited as `update`. */
  async setAccountRates(account: string, patch: RatesPatch, audit?: AuditWrite): Promise<Rates> {
    validateAccountId(account);
    const p = validateRatesPatch(patch);
    if (p.requests === undefined && p.tokens === undefined) throw new ConsoleError('INVALID_INPUT', 'nothing to update: give a rate or a token rate (or remove one)');
    const r = await this.rates.setAccountRates(account, p);
    if (audit) await appendAudit(this.redis, this.isCluster, audit.lists(account), audit.event(account, null, rateChanges(p)));
    return r;
  }

  /** One key with its usage: last used, requests today and this month, spend, limit. */
  async getKeyView(keyId: string): Promise<KeyView> {
    const r = await this.getKey(keyId);
    const [[usage], rateUse] = await Promise.all([this.#money.usage([r]), this.rates.use(r.account, r.id, r.rates)]);
    return { ...r, usage: usage!, rateUse };
  }

  /** The account's keys with their usage, oldest first. */
  async listKeyViews(account: string): Promise<KeyView[]> {
    const list = await this.listKeys(account);
    const [usage, rateUse] = await Promise.all([this.#money.usage(list), Promise.all(list.map((r) => this.rates.use(r.account, r.id, r.rates)))]);
    return list.map((r, i) => ({ ...r, usage: usage[i]!, rateUse: rateUse[i]! }));
  }

  /** Sets or (null) removes a key's spend limit; takes effect on the next request at every sidecar. */
  async setKeyLimit(keyId: string, limit: KeyLimit | null): Promise<KeyRecord> {
    return this.updateKey(keyId, { limit });
  }

  /** The usage log from `since` (inclusive), oldest first, over every account or one. */
  exportUsage(o: { since: Date | number; until?: Date | number; account?: string }): AsyncGenerator<UsageEntry> {
    const ms = (v: Date | number) => (v instanceof Date ? v.getTime() : v);
    const sinceMs = ms(o.since);
    if (!Number.isFinite(sinceMs) || sinceMs < 0) throw new ConsoleError('INVALID_INPUT', 'since must be a valid instant');
    return this.#money.exportUsage({ sinceMs, untilMs: o.until === undefined ? undefined : ms(o.until), account: o.account });
  }

  /** Closes the Redis connection if this console opened it. */
  async close(): Promise<void> {
    if (!this.#ownsClient) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }

  async #setAccount(account: string, status: AccountStatus, audit?: AuditWrite): Promise<AccountResult> {
    validateAccountId(account);
    const ev = audit && { audit, account, keyId: null, changes: { status } };
    const prev = await this.#eval(lua.SET_ACCOUNT_STATUS, [this.schema.account(account)], [status], ev);
    if (this.isCluster && ev && (prev || 'active') !== status) await this.#auditAfter(ev);
    return { account, status, changed: prev !== status };
  }

  #keyring(): Keyring {
    if (!this.#ring) {
      try {
        this.#ring = parseKeyring(this.#revealKey ?? process.env[REVEAL_KEY_ENV]);
      } catch (err) {
        if (err instanceof RevealKeyError) throw new ConsoleError('REVEAL_KEY', err.message);
        throw err;
      }
    }
    return this.#ring;
  }

  /** The account's key list index: keyorder, keycur, keyinfo (one Cluster slot). */
  #indexKeys(account: string): [string, string, string] {
    const s = this.schema;
    return [s.keyOrder(account), s.keyCurrent(account), s.keyInfo(account)];
  }

  /**
   * Writes the list index entries of the given key records (by record key name) from what they hold
   * now: the Cluster steps (the records are in other slots than the index) and the lazy build. An
   * entry is only replaced by a newer `rev`, so a late or repeated write never undoes a change.
   * `built`: the marker of a full build (see `KEY_INFO_BUILT`).
   */
  async indexRecords(account: string, records: readonly string[], built = ''): Promise<number> {
    const fields = [KeyField.id, KeyField.rev, KeyField.createdAt, KeyField.expiresAt, KeyField.status, KeyField.hint, KeyField.name];
    let written = 0;
    for (let i = 0; i < records.length || (i === 0 && built !== ''); i += 500) {
      const chunk = records.slice(i, i + 500);
      const rows = await Promise.all(chunk.map((r) => this.redis.hmget(r, ...fields)));
      const args: string[] = [];
      for (const v of rows) {
        if (v[0] === null || v[0] === undefined) continue;
        args.push(v[0], v[1] ?? '0', v[2] ?? '0', v[3] ?? '', v[4] ?? 'active', v[5] ?? '', v[6] ?? '');
      }
      const last = i + 500 >= records.length;
      written += Number(await this.redis.eval(lua.INDEX_PUT, 3, ...this.#indexKeys(account), last ? built : '', ...args));
    }
    return written;
  }

  async #digestOf(keyId: string): Promise<string> {
    const digest = await this.redis.get(this.schema.keyIdIndex(keyId));
    if (digest === null) throw notFound(keyId);
    if (!/^[0-9a-f]{64}$/.test(digest)) throw new ConsoleError('CORRUPT', `key ${keyId}: id index does not hold a SHA-256 digest`);
    return digest;
  }

  async #readRecord(digest: string, keyId: string): Promise<KeyRecord> {
    const r = parseKeyRecord(await this.redis.hgetall(this.schema.keyRecord(digest)));
    if (r === null) throw notFound(keyId);
    if (typeof r === 'string') throw new ConsoleError('CORRUPT', `key ${keyId}: record does not follow schema v${SCHEMA_VERSION} (${r})`);
    if (r.id !== keyId) throw new ConsoleError('CORRUPT', `key ${keyId}: id index points at a record of another key`);
    return r;
  }

  /** Runs a script; with an audit event (not on Cluster, where the lists are in other slots), the script writes it too. */
  async #eval(script: string, keys: string[], args: string[], audit?: AuditEval): Promise<string> {
    if (audit && !this.isCluster) {
      keys = [...keys, ...audit.audit.lists(audit.account)];
      args = [...args, audit.audit.event(audit.account, audit.keyId, audit.changes)];
    }
    const r = await this.redis.eval(script, keys.length, ...keys, ...args);
    return String(r);
  }

  /** Cluster: the audit event right after the change, one list at a time (they are in other slots). */
  async #auditAfter(e: AuditEval): Promise<void> {
    await appendAudit(this.redis, true, e.audit.lists(e.account), e.audit.event(e.account, e.keyId, e.changes));
  }

  #expectOk(result: string, keyId: string): void {
    switch (result) {
      case 'OK':
        return;
      case 'NOTFOUND':
        throw notFound(keyId);
      case 'REVOKED':
        throw new ConsoleError('REVOKED', `key ${keyId} is revoked; revoked keys cannot be changed`);
      case 'LIMIT':
        throw new ConsoleError('LIMIT', `the account already has ${this.#maxActive} active keys; revoke one first`);
      case 'PAST':
        throw new ConsoleError('INVALID_INPUT', 'expiry is not in the future (by the Redis server clock)');
      case 'EXISTS':
        throw new ConsoleError('CONFLICT', `key ${keyId} collides with an existing record`);
      default:
        throw new ConsoleError('CORRUPT', `key ${keyId}: the record does not follow schema v${SCHEMA_VERSION} (${result})`);
    }
  }
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

interface AuditEval {
  readonly audit: AuditWrite;
  readonly account: string;
  readonly keyId: string | null;
  readonly changes: Record<string, unknown>;
}

/** A limit as the audit log and the JSON views show it. */
function limitJson(l: KeyLimit): { amount_micros: number; period: string } {
  return { amount_micros: l.amountMicros, period: l.period };
}

function notFound(keyId: string): ConsoleError {
  return new ConsoleError('NOT_FOUND', `no key with id ${keyId}`);
}
