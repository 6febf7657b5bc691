/** Uncached store reads against Redis: one HMGET per key, one HGET per account. */
import type { Logger } from 'pino';
import {
  AccountField,
  parseAccountBlocked,
  parseSidecarKey,
  SIDECAR_KEY_FIELDS,
  type ParsedKey,
  type Schema,
} from '../schema/redis-schema.ts';
import { StoreUnavailable, type KeyStore } from './key-store.ts';
import type { RedisClient } from './redis.ts';

export class RedisKeyStore implements KeyStore {
  readonly redis: RedisClient;
  readonly #schema: Schema;
  readonly #log: Logger;
  readonly #ownsClient: boolean;
  /** Digests whose corrupt record was already logged (bounded). */
  readonly #loggedCorrupt = new Set<string>();

  constructor(redis: RedisClient, schema: Schema, log: Logger, ownsClient = true) {
    this.redis = redis;
    this.#schema = schema;
    this.#log = log;
    this.#ownsClient = ownsClient;
  }

  async key(digest: string): Promise<ParsedKey> {
    let values: (string | null)[];
    try {
      values = await this.redis.hmget(this.#schema.keyRecord(digest), ...SIDECAR_KEY_FIELDS);
    } catch (err) {
      throw unavailable(err);
    }
    const parsed = parseSidecarKey(values);
    if (parsed.kind === 'corrupt') this.#corrupt(`key:${digest.slice(0, 12)}`, parsed.reason);
    return parsed;
  }

  async accountBlocked(accountId: string): Promise<boolean | 'corrupt'> {
    let status: string | null;
    try {
      status = await this.redis.hget(this.#schema.account(accountId), AccountField.status);
    } catch (err) {
      throw unavailable(err);
    }
    const blocked = parseAccountBlocked(status);
    if (blocked === 'corrupt') this.#corrupt(`account:${accountId}`, 'status is not active|disabled');
    return blocked;
  }

  ready(): boolean {
    return this.redis.status === 'ready';
  }

  async close(): Promise<void> {
    if (this.#ownsClient) this.redis.disconnect();
  }

  #corrupt(what: string, reason: string): void {
    if (this.#loggedCorrupt.has(what)) return;
    if (this.#loggedCorrupt.size >= 10_000) this.#loggedCorrupt.clear();
    this.#loggedCorrupt.add(what);
    this.#log.error({ record: what, reason }, 'corrupt record in the key store; treated as a deny');
  }
}

function unavailable(err: unknown): StoreUnavailable {
  return new StoreUnavailable(err instanceof Error ? err.message : String(err));
}
