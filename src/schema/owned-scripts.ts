/**
 * Writing an owned-object record (`src/schema/owned.ts`): one script, one key, so a Cluster slot of
 * its own. The first account to create an object owns it: a record of another account is never
 * overwritten (an id reused by a hostile upstream cannot move an object to another tenant); the
 * owner's record gets its time to live again.
 *
 * KEYS: 1 the record (`Schema.owned(provider, id)`). ARGV: 1 account, 2 created_at (epoch ms), 3 key
 * id, 4 time to live (seconds). → 1 written or refreshed, 0 owned by another account (unchanged).
 */
export const RECORD_OWNED = `
local owner = redis.call('HGET', KEYS[1], 'account')
if owner and owner ~= ARGV[1] then return 0 end
if not owner then redis.call('HSET', KEYS[1], 'account', ARGV[1], 'created_at', ARGV[2], 'key_id', ARGV[3]) end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1`;
