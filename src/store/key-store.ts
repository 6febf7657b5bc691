/**
 * The sidecar's read side of the store: a key record by digest, an account's state. Implementations:
 * `RedisKeyStore` (one round trip each) and the invalidated cache in front of it.
 * A lookup that cannot reach the store rejects with `StoreUnavailable`; the authorizer turns that
 * into 503 AUTH_UNAVAILABLE.
 */
import type { Gate } from '../schema/money.ts';
import type { ParsedKey } from '../schema/redis-schema.ts';

export class StoreUnavailable extends Error {
  override name = 'StoreUnavailable';
}

export interface CachedAccount {
  readonly blocked: boolean | 'corrupt';
  readonly gate: Gate | 'corrupt';
}

export interface KeyStore {
  key(digest: string): Promise<ParsedKey>;
  /** `true` when disabled, `'corrupt'` when the record does not follow the schema. */
  accountBlocked(accountId: string): Promise<boolean | 'corrupt'>;
  /** The account's gate record (wallet empty, keys over their limit); `'corrupt'` when it does not follow the schema. */
  gate(accountId: string): Promise<Gate | 'corrupt'>;
  /**
   * Optional fast path: both account answers (`accountBlocked`, `gate`) when a cache holds them,
   * synchronously; undefined when either must be fetched. Saves two awaits per cached decision.
   */
  cachedAccount?(accountId: string): CachedAccount | undefined;
  /** The store is reachable and (for cached stores) the invalidation link is up. */
  ready(): boolean;
  close(): Promise<void>;
}
