/**
 * What every console operation shares: one Redis client, the key schema and the management schema
 * (both from src/schema/), the key prefix, the key-encryption keyring (read on first use), the money
 * and rate records, the price table and the events publisher. Built once by `ConsoleService`; the
 * resource modules (keys.ts, accounts.ts, management.ts, wallet.ts, rates.ts, prices.ts) take it as
 * their first argument.
 */
import { Cluster } from 'ioredis';
import { parseKeyring, REVEAL_KEY_ENV, RevealKeyError, type Keyring } from '../keys/crypto.ts';
import { CREDENTIAL_KEY_ENV, parseCredentialKeyring } from '../keys/credential-crypto.ts';
import { DEFAULT_KEY_PREFIX, isValidKeyPrefix, KEY_PREFIX_RULE } from '../core/key-format.ts';
import { DEFAULT_NAMESPACE, LIMITS, schema, type Schema } from '../schema/redis-schema.ts';
import { managementSchema, type ManagementSchema } from '../schema/management.ts';
import { connectRedis, type RedisClient } from '../store/redis.ts';
import { EventPublisher } from '../events/publish.ts';
import { WebhookStore } from '../events/webhooks.ts';
import { ConsoleError } from './errors.ts';
import { RateSettings } from './rates.ts';
import { PriceBook } from './prices.ts';
import { MONEY_DEFAULTS } from '../core/money.ts';
import { WalletOps } from './wallet.ts';

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
  /**
   * The key(s) accounts' own upstream credentials are sealed with (`KEYGATE_CREDENTIAL_KEY` format; the
   * sidecars hold the same). Only setting a credential needs it; read from the environment when not given.
   */
  readonly credentialKey?: string;
  /** Maximum active keys per account (default LIMITS.activeKeysPerAccount = 100). */
  readonly maxActiveKeysPerAccount?: number;
  /** Command timeout when `redis` is a URL (default 5000 ms). */
  readonly commandTimeoutMs?: number;
  /** `KEYGATE_REQUIRE_WALLET`: shown as `wallet.enforced` of an account without a wallet only while no live sidecar has published its own (`wallet.rule` `unreported`). */
  readonly requireWallet?: boolean;
  /** How long a usage record's request id is remembered (default 7 days). */
  readonly usageIdempotencySeconds?: number;
  /** Usage-log entries kept per account (default 100,000; trimmed approximately). */
  readonly usageLogMaxEntries?: number;
}

export class ConsoleContext {
  readonly redis: RedisClient;
  readonly schema: Schema;
  /** Tokens, audit lists, idempotency slots (hash tag `{mgmt}`). */
  readonly m: ManagementSchema;
  readonly keyPrefix: string;
  readonly isCluster: boolean;
  readonly maxActive: number;
  readonly money: WalletOps;
  readonly rates: RateSettings;
  readonly prices: PriceBook;
  readonly events: EventPublisher;
  /** Webhook endpoint records (src/events/webhooks.ts; secrets sealed with the reveal key). */
  readonly webhooks: WebhookStore;
  readonly ownsClient: boolean;
  readonly #revealKey: string | undefined;
  #ring: Keyring | undefined;
  readonly #credentialKey: string | undefined;
  #credentialRing: Keyring | undefined;
  lastRedisError: Error | undefined;

  constructor(opts: KeyConsoleOptions) {
    this.schema = schema(opts.namespace ?? DEFAULT_NAMESPACE);
    this.m = managementSchema(this.schema.ns);
    const prefix = opts.keyPrefix ?? DEFAULT_KEY_PREFIX;
    if (!isValidKeyPrefix(prefix)) throw new ConsoleError('INVALID_INPUT', `key prefix ${KEY_PREFIX_RULE}`);
    this.keyPrefix = prefix;
    this.#revealKey = opts.revealKey;
    this.#credentialKey = opts.credentialKey;
    const max = opts.maxActiveKeysPerAccount ?? LIMITS.activeKeysPerAccount;
    if (!Number.isSafeInteger(max) || max < 1) throw new ConsoleError('INVALID_INPUT', 'maxActiveKeysPerAccount must be a positive integer');
    this.maxActive = max;
    if (typeof opts.redis === 'string') {
      this.redis = connectRedis(opts.redis, {
        commandTimeoutMs: opts.commandTimeoutMs ?? 5000,
        connectionName: 'keygate-console',
        queueWhileOffline: true,
      });
      this.ownsClient = true;
      this.redis.on('error', (err: Error) => {
        this.lastRedisError = err;
      });
    } else {
      this.redis = opts.redis;
      this.ownsClient = false;
    }
    this.isCluster = this.redis instanceof Cluster;
    const positive = (v: number | undefined, d: number, what: string) => {
      const n = v ?? d;
      if (!Number.isSafeInteger(n) || n < 1) throw new ConsoleError('INVALID_INPUT', `${what} must be a positive integer`);
      return n;
    };
    this.rates = new RateSettings(this.redis, this.schema);
    this.money = new WalletOps(this.redis, this.schema, {
      requireWallet: opts.requireWallet === true,
      usageIdempotencySeconds: positive(opts.usageIdempotencySeconds, MONEY_DEFAULTS.usageIdempotencySeconds, 'usageIdempotencySeconds'),
      usageLogMaxEntries: positive(opts.usageLogMaxEntries, MONEY_DEFAULTS.usageLogMaxEntries, 'usageLogMaxEntries'),
    });
    this.prices = new PriceBook(this.redis, this.schema.ns, this.isCluster);
    this.events = new EventPublisher(this.redis, this.schema.ns);
    this.webhooks = new WebhookStore(this.redis, this.schema.ns, opts.revealKey);
  }

  /** The key-encryption keyring (`KEYGATE_REVEAL_KEY`), parsed on first use. */
  keyring(): Keyring {
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

  /** The credential keyring (`KEYGATE_CREDENTIAL_KEY`), parsed on first use; CREDENTIAL_KEY when absent or malformed. */
  credentialKeyring(): Keyring {
    if (!this.#credentialRing) {
      const v = this.#credentialKey ?? process.env[CREDENTIAL_KEY_ENV];
      if (v === undefined || v.trim() === '') {
        throw new ConsoleError('CREDENTIAL_KEY', `${CREDENTIAL_KEY_ENV} is not set: accounts' own credentials are stored encrypted under it, and the sidecars need the same key to use them (docs/credentials.md)`);
      }
      try {
        this.#credentialRing = parseCredentialKeyring(v);
      } catch (err) {
        if (err instanceof RevealKeyError) throw new ConsoleError('CREDENTIAL_KEY', err.message);
        throw err;
      }
    }
    return this.#credentialRing;
  }

  /** The global audit list and the account's (operator events without an account go to `auditacct:*`). */
  auditLists(account: string | null): readonly [string, string] {
    return [this.m.audit(), this.m.auditOfAccount(account)];
  }

  /** Closes the Redis connection if this console opened it. */
  async close(): Promise<void> {
    if (!this.ownsClient) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
