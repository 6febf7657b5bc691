/**
 * Per-key counts of requests the endpoint rule refused (ENDPOINT_NOT_ALLOWED, USAGE_NOT_GUARANTEED):
 * counted in memory by a `UsageCounter` (same bounds, same once-a-second flush) and added to the
 * key's counter record (`keyUse`, field `refused_endpoint`) — what the page's key row and `keys show`
 * read as "refused: endpoint". A deny never reaches the request path's usage count.
 */
import { KeyUseField } from '../schema/money.ts';
import type { Schema } from '../schema/redis-schema.ts';
import type { RedisClient } from './redis.ts';
import type { UsageWrite } from './usage-counter.ts';

/** One HINCRBY per key (each key's record is in its account's slot; on Cluster each goes to its node). */
export function redisRefusalWrite(redis: RedisClient, s: Schema): UsageWrite {
  return async (batch) => {
    await Promise.all([...batch].map(([id, p]) => redis.hincrby(s.keyUse(p.account, id), KeyUseField.refusedEndpoint, p.n)));
  };
}
