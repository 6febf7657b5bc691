/**
 * Lua scripts of the console writes. Each runs atomically in Redis; times come from the server's
 * clock (`TIME`), so consoles on different hosts agree on `created_at`/`updated_at` and an expiry
 * is re-checked against the same clock that stamps the write.
 *
 * Standalone and Sentinel run the one-shot scripts (every key of the operation in one script).
 * Redis Cluster cannot run a script over keys in different hash slots, so there the multi-key
 * operations (create, revoke) run as single-key steps in the order given in docs/redis-schema.md
 * ("Cluster write order"): indexes first, the key record last on create; the record first on revoke.
 *
 * Results are status words: OK, EXISTS, LIMIT, PAST, NOTFOUND, REVOKED, ALREADY, CORRUPT.
 */

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_s = string.format('%d', now)
`;

/** Writes field/value pairs from ARGV[from..] plus created_at/updated_at/rev into KEYS[rec]. */
const WRITE_RECORD = (rec: number, from: number) => `
redis.call('HSET', KEYS[${rec}], 'created_at', now_s, 'updated_at', now_s, 'rev', '1', unpack(ARGV, ${from}))
`;

const EXPIRY_CHECK = (arg: number) => `
if ARGV[${arg}] ~= '' and tonumber(ARGV[${arg}]) <= now then return 'PAST' end
`;

/**
 * Create, one shot. KEYS: record, keyid index, account keys, account active keys.
 * ARGV: limit, key id, digest, expires_at ('' = never), field, value, …
 */
export const CREATE_ALL = `${NOW}
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 'EXISTS' end
if redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[1]) then return 'LIMIT' end
${EXPIRY_CHECK(4)}
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
${WRITE_RECORD(1, 5)}
return 'OK'`;

/** Cluster create, step 1. KEYS: account active keys. ARGV: limit, key id. */
export const CREATE_RESERVE = `
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 'LIMIT' end
redis.call('SADD', KEYS[1], ARGV[2])
return 'OK'`;

/** Cluster create, last step. KEYS: record. ARGV: expires_at ('' = never), field, value, … */
export const CREATE_RECORD = `${NOW}
if redis.call('EXISTS', KEYS[1]) == 1 then return 'EXISTS' end
${EXPIRY_CHECK(1)}
${WRITE_RECORD(1, 2)}
return 'OK'`;

/**
 * Patch of an active key: only the fields given are touched, so concurrent updates of different
 * fields never undo each other. KEYS: record. ARGV: key id, then ops: 'set' field value | 'del' field.
 */
export const UPDATE = `${NOW}
local cur = redis.call('HMGET', KEYS[1], 'id', 'status')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
if cur[2] == 'revoked' then return 'REVOKED' end
if cur[2] ~= 'active' then return 'CORRUPT' end
local i = 2
while i <= #ARGV do
  if ARGV[i] == 'set' then
    if ARGV[i + 1] == 'expires_at' and tonumber(ARGV[i + 2]) <= now then return 'PAST' end
    i = i + 3
  else
    i = i + 2
  end
end
i = 2
while i <= #ARGV do
  if ARGV[i] == 'set' then
    redis.call('HSET', KEYS[1], ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  else
    redis.call('HDEL', KEYS[1], ARGV[i + 1])
    i = i + 2
  end
end
redis.call('HSET', KEYS[1], 'updated_at', now_s)
redis.call('HINCRBY', KEYS[1], 'rev', 1)
return 'OK'`;

const REVOKE_RECORD = `
local cur = redis.call('HMGET', KEYS[1], 'id', 'status', 'account')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
local result = 'OK'
if cur[2] == 'revoked' then
  result = 'ALREADY'
else
  redis.call('HSET', KEYS[1], 'status', 'revoked', 'revoked_at', now_s, 'updated_at', now_s)
  redis.call('HDEL', KEYS[1], 'secret')
  redis.call('HINCRBY', KEYS[1], 'rev', 1)
end
`;

/** Revoke, one shot. KEYS: record, account active keys. ARGV: key id, account. */
export const REVOKE_ALL = `${NOW}
local acct = redis.call('HGET', KEYS[1], 'account')
if acct and acct ~= ARGV[2] then return 'CORRUPT' end
${REVOKE_RECORD}
redis.call('SREM', KEYS[2], ARGV[1])
return result`;

/** Cluster revoke, step 1 (then SREM from the active set). KEYS: record. ARGV: key id. */
export const REVOKE_RECORD_ONLY = `${NOW}
${REVOKE_RECORD}
return result`;

/** Account status. KEYS: account. ARGV: 'active' | 'disabled'. Returns the previous status or ''. */
export const SET_ACCOUNT_STATUS = `${NOW}
local prev = redis.call('HGET', KEYS[1], 'status')
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'updated_at', now_s)
return prev or ''`;
