/**
 * The console library (SPEC §5b): every operation the gateway's console performs on keys and
 * accounts, each atomic in Redis, on the schema of `src/schema/redis-schema.ts`
 * (prose: docs/redis-schema.md). Every input is validated before the first write.
 */
import { randomInt } from 'node:crypto';
import { Cluster } from 'ioredis';
import { openSecret, parseKeyring, REVEAL_KEY_ENV, RevealKeyError, sealSecret, type Keyring } from '../keys/crypto.ts';
import { BASE62, DEFAULT_KEY_PREFIX, generateKey, KEY_PREFIX_PATTERN, keyDigest, maskKey } from '../keys/format.ts';
import {
  DEFAULT_NAMESPACE,
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
import * as lua from './scripts.ts';
import { validateAccountId, validateExpiry, validateKeyId, validateModels, validateName } from './validate.ts';

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
}

export interface CreateKeyInput {
  readonly account: string;
  readonly name: string;
  /** Allowed model patterns; absent or null = every model. */
  readonly models?: readonly string[] | null;
  /** Expiry instant; absent or null = never. ISO-8601 strings need a zone (or are a plain date, UTC). */
  readonly expiresAt?: ExpiryInput | null;
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
  #ring: Keyring | undefined;
  #lastRedisError: Error | undefined;

  constructor(opts: KeyConsoleOptions) {
    this.schema = schema(opts.namespace ?? DEFAULT_NAMESPACE);
    const prefix = opts.keyPrefix ?? DEFAULT_KEY_PREFIX;
    if (!KEY_PREFIX_PATTERN.test(prefix) || prefix.length < 2 || prefix.length > 16) {
      throw new ConsoleError('INVALID_INPUT', 'key prefix must be 2-16 lower-case letters/digits ending in "_" or "-", e.g. kg_');
    }
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
  }

  get isCluster(): boolean {
    return this.redis instanceof Cluster;
  }

  /** The last connection error of a client this console opened itself (for a clearer message). */
  get lastRedisError(): Error | undefined {
    return this.#lastRedisError;
  }

  /** Creates an active key. Returns its id and plaintext (the only time it is returned unasked). */
  async createKey(input: CreateKeyInput): Promise<CreatedKey> {
    const account = validateAccountId(input.account);
    const name = validateName(input.name);
    const models = input.models === undefined ? null : validateModels(input.models);
    const expiresAt = input.expiresAt === undefined || input.expiresAt === null ? null : validateExpiry(input.expiresAt, Date.now());
    const ring = this.#keyring();

    for (let attempt = 0; attempt < 3; attempt++) {
      const key = generateKey(this.keyPrefix);
      const id = generateKeyId();
      const digest = keyDigest(key);
      const fields: string[] = [
        KeyField.version, SCHEMA_VERSION,
        KeyField.id, id,
        KeyField.account, account,
        KeyField.name, name,
        KeyField.status, 'active',
        KeyField.hint, maskKey(key, this.keyPrefix),
        KeyField.secret, sealSecret(ring, id, key),
      ];
      if (models !== null) fields.push(KeyField.models, JSON.stringify(models));
      if (expiresAt !== null) fields.push(KeyField.expiresAt, String(expiresAt));
      const expiryArg = expiresAt === null ? '' : String(expiresAt);
      const result = this.isCluster
        ? await this.#createStepwise(account, id, digest, expiryArg, fields)
        : await this.#eval(lua.CREATE_ALL, [this.schema.keyRecord(digest), this.schema.keyIdIndex(id), this.schema.accountKeys(account), this.schema.accountActiveKeys(account)], [String(this.#maxActive), id, digest, expiryArg, ...fields]);
      if (result === 'EXISTS') continue;
      this.#expectOk(result, id);
      return { id, key, record: await this.#readRecord(digest, id) };
    }
    throw new ConsoleError('CONFLICT', 'could not allocate a unique key id and key after 3 attempts');
  }

  /** Cluster: indexes first (each a single-slot write), the key record last; undo the indexes on a collision. */
  async #createStepwise(account: string, id: string, digest: string, expiryArg: string, fields: string[]): Promise<string> {
    const s = this.schema;
    const reserved = await this.#eval(lua.CREATE_RESERVE, [s.accountActiveKeys(account)], [String(this.#maxActive), id]);
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
  async updateKey(keyId: string, patch: KeyUpdate): Promise<KeyRecord> {
    validateKeyId(keyId);
    const ops: string[] = [];
    if (patch.name !== undefined) ops.push('set', KeyField.name, validateName(patch.name));
    if (patch.models !== undefined) {
      const models = validateModels(patch.models);
      if (models === null) ops.push('del', KeyField.models);
      else ops.push('set', KeyField.models, JSON.stringify(models));
    }
    if (patch.expiresAt !== undefined) {
      if (patch.expiresAt === null) ops.push('del', KeyField.expiresAt);
      else ops.push('set', KeyField.expiresAt, String(validateExpiry(patch.expiresAt, Date.now())));
    }
    if (ops.length === 0) throw new ConsoleError('INVALID_INPUT', 'nothing to update: give a name, models or expiry');
    const digest = await this.#digestOf(keyId);
    this.#expectOk(await this.#eval(lua.UPDATE, [this.schema.keyRecord(digest)], [keyId, ...ops]), keyId);
    return this.#readRecord(digest, keyId);
  }

  /**
   * Revokes a key: the record stays (status revoked, revoked_at) for audit and lists; the sidecar
   * treats it as unknown; the encrypted plaintext is deleted, so it can never be revealed again.
   */
  async revokeKey(keyId: string): Promise<RevokeResult> {
    validateKeyId(keyId);
    const s = this.schema;
    const digest = await this.#digestOf(keyId);
    const account = await this.redis.hget(s.keyRecord(digest), KeyField.account);
    if (account === null) throw notFound(keyId);
    let result: string;
    if (this.isCluster) {
      result = await this.#eval(lua.REVOKE_RECORD_ONLY, [s.keyRecord(digest)], [keyId]);
      if (result === 'OK' || result === 'ALREADY') await this.redis.srem(s.accountActiveKeys(account), keyId);
    } else {
      result = await this.#eval(lua.REVOKE_ALL, [s.keyRecord(digest), s.accountActiveKeys(account)], [keyId, account]);
    }
    if (result === 'ALREADY') return { id: keyId, account, alreadyRevoked: true };
    this.#expectOk(result, keyId);
    return { id: keyId, account, alreadyRevoked: false };
  }

  /** Every key of the account is refused (403 USER_BLOCKED) until it is enabled again. */
  disableAccount(account: string): Promise<AccountResult> {
    return this.#setAccount(account, 'disabled');
  }

  enableAccount(account: string): Promise<AccountResult> {
    return this.#setAccount(account, 'active');
  }

  /** The account's status (a missing account record is an enabled account). */
  async accountStatus(account: string): Promise<AccountStatus> {
    validateAccountId(account);
    const st = await this.redis.hget(this.schema.account(account), 'status');
    if (st === null || st === 'active') return 'active';
    if (st === 'disabled') return 'disabled';
    throw new ConsoleError('CORRUPT', `account ${account}: status is neither active nor disabled`);
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

  async #setAccount(account: string, status: AccountStatus): Promise<AccountResult> {
    validateAccountId(account);
    const prev = await this.#eval(lua.SET_ACCOUNT_STATUS, [this.schema.account(account)], [status]);
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

  async #eval(script: string, keys: string[], args: string[]): Promise<string> {
    const r = await this.redis.eval(script, keys.length, ...keys, ...args);
    return String(r);
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

function notFound(keyId: string): ConsoleError {
  return new ConsoleError('NOT_FOUND', `no key with id ${keyId}`);
}
