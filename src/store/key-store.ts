/**
 * The sidecar's read side of the store: a key record by digest, an account's state. Implementations:
 * `RedisKeyStore` (one round trip each) and the invalidated cache in front of it.
 * A lookup that cannot reach the store rejects with `StoreUnavailable`; the authorizer turns that
 * into 503 AUTH_UNAVAILABLE.
 */
import type { ParsedKey } from '../schema/redis-schema.ts';

export class StoreUnavailable extends Error {
  override name = 'StoreUnavailable';
}

export interface KeyStore {
  key(digest: string): Promise<ParsedKey>;
  /** `true` when disabled, `'corrupt'` when the record does not follow the schema. */
  accountBlocked(accountId: string): Promise<boolean | 'corrupt'>;
  /** The store is reachable and (for cached stores) the invalidation link is up. */
  ready(): boolean;
  close(): Promise<void>;
}
