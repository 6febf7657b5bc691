/**
 * The one lookup shape the decision reads the store through: `lookup(type, id)` for any
 * `RecordType` (`src/schema/records.ts`). Implementations: `RedisRecordSource` (one round trip per
 * lookup, over any `HashReads`: Redis, or the unit tier's in-memory hashes) and `CachedRecordSource`
 * (`cache.ts`), the invalidated cache that decorates it. A lookup that cannot reach the store
 * rejects with `StoreUnavailable`; the decision turns that into 503 AUTH_UNAVAILABLE.
 */
import type { RecordType } from '../schema/records.ts';

export class StoreUnavailable extends Error {
  override name = 'StoreUnavailable';
}

export interface RecordSource {
  /**
   * The record of `id`: the answer itself when it is held in memory and may be served at once, else
   * a promise (rejecting with `StoreUnavailable`). Callers await only a promise (the hot path does
   * not pay an await per cached record).
   */
  lookup<T>(type: RecordType<T>, id: string): T | Promise<T>;
  /** The store is reachable and (for cached stores) the invalidation link is up. */
  ready(): boolean;
  close(): Promise<void>;
}

/** Whether a lookup's answer must be awaited (a promise) or is the answer itself. */
export function isPending<T>(v: T | Promise<T>): v is Promise<T> {
  return v instanceof Promise;
}
