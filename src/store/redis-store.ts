/** Uncached store reads against Redis: one HMGET per key, one HGET per account, one HGETALL per gate. */
import type { Logger } from 'pino';
import {
  AccountField,
  parseAccountBlocked,
  parseSidecarKey,
  SIDECAR_KEY_FIELDS,
  type ParsedKey,
  type Schema,
} from '../schema/redis-schema.ts';
import { parseGate, type Gate } from '../schema/money.ts';
import { StoreUnavailable, type KeyStore } from './key-store.ts';
import type { RedisClient } from './redis.ts';

export class RedisKeyStore implements KeyStore {
  readonly redis: RedisClient;
  readonly #schema: Schema;
  readonly #log: Logger;
  readonly #ownsClient: boolean;
  /** Digests whose corrupt record was already logged (bounded). */
  readonly #loggedCorrupt = new Set<string>();
  /** Why reads are refused (a Sentinel failover under way), or null. */
  #paused: string | null = null;
  readonly #closers: Array<() => void> = [];

  constructor(redis: RedisClient, schema: Schema, log: Logger, ownsClient = true) {
    this.redis = redis;
    this.#schema = schema;
    this.#log = log;
    this.#ownsClient = ownsClient;
  }

  /**
   * Refuse every read (503) until `resume`: while a failover is under way the connected node may be
   * an old master that no longer receives writes.
   */
  pause(reason: string): void {
    this.#paused = reason;
  }

  resume(): void {
    this.#paused = null;
  }

  async key(digest: string): Promise<ParsedKey> {
    if (this.#paused !== null) throw new StoreUnavailable(this.#paused);
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
    if (this.#paused !== null) throw new StoreUnavailable(this.#paused);
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

  async gate(accountId: string): Promise<Gate | 'corrupt'> {
    let hash: Record<string, string>;
    try {
      hash = await this.redis.hgetall(this.#schema.gate(accountId));
    } catch (err) {
      throw unavailable(err);
    }
    const g = parseGate(hash);
    if (typeof g !== 'string') return g;
    this.#corrupt(`gate:${accountId}`, g);
    return 'corrupt';
  }

  ready(): boolean {
    return this.redis.status === 'ready' && this.#paused === null;
  }

  /** Runs `fn` when the store closes (companion connections, e.g. the sentinel watch). */
  onClose(fn: () => void): void {
    this.#closers.push(fn);
  }

  async close(): Promise<void> {
    for (const fn of this.#closers.splice(0)) fn();
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
