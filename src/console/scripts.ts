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

import { LUA_NOW } from '../schema/lua-time.ts';
import { AccountField, KEY_INFO_BUILT, KeyField } from '../schema/redis-schema.ts';

export const NOW = `${LUA_NOW}
local now_s = string.format('%d', now)
`;

/** Writes field/value pairs from ARGV[from..last] plus created_at/updated_at/rev into KEYS[rec]. */
const WRITE_RECORD = (rec: number, from: number, last = '#ARGV') => `
redis.call('HSET', KEYS[${rec}], '${KeyField.createdAt}', now_s, '${KeyField.updatedAt}', now_s, '${KeyField.rev}', '1', unpack(ARGV, ${from}, ${last}))
`;

/** Audit retention: the newest events kept overall and per account (docs/redis-schema.md). */
export const AUDIT_RETENTION = { all: 10_000, perAccount: 1_000 } as const;

/**
 * Optional audit event of a change, written in the change's own script. A caller that passes two
 * more KEYS than the operation's `n` (the global and the account's audit list) passes the event
 * JSON, without its time, as the last ARGV; `nargs` is then the operation's own ARGV count.
 */
const AUDIT_ARGS = (n: number) => `
local nargs = #ARGV
local audit_ev = false
if #KEYS == ${n + 2} then audit_ev = ARGV[nargs]; nargs = nargs - 1 end
`;

/** Appends `audit_ev` (stamped with the server time) to KEYS[g] and KEYS[g+1], trimmed to the retention. */
export const AUDIT_WRITE = (g: number) => `
if audit_ev then
  local ev = '{"time":"' .. now_s .. '",' .. string.sub(audit_ev, 2)
  redis.call('LPUSH', KEYS[${g}], ev)
  redis.call('LTRIM', KEYS[${g}], 0, ${AUDIT_RETENTION.all - 1})
  redis.call('LPUSH', KEYS[${g + 1}], ev)
  redis.call('LTRIM', KEYS[${g + 1}], 0, ${AUDIT_RETENTION.perAccount - 1})
end
`;

/** An audit event alone (a reveal). KEYS: audit, audit of account. ARGV: event. */
export const AUDIT_APPEND = `${NOW}
local audit_ev = ARGV[1]
${AUDIT_WRITE(1)}
return 'OK'`;

/** Cluster: an audit event into one list. KEYS: the list. ARGV: event, how many to keep. */
export const AUDIT_APPEND_ONE = `${NOW}
local ev = '{"time":"' .. now_s .. '",' .. string.sub(ARGV[1], 2)
redis.call('LPUSH', KEYS[1], ev)
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
return 'OK'`;

const EXPIRY_CHECK = (arg: number) => `
if ARGV[${arg}] ~= '' and tonumber(ARGV[${arg}]) <= now then return 'PAST' end
`;

/**
 * The key list index of one account (docs/redis-schema.md, "Key list index"): `keyorder` (every
 * key by created_at), `keycur` (keys not revoked) and `keyinfo` (id → the small fields of a list).
 * `index_put` writes one key's entry only when its `rev` is newer than the one held, so a lazy build
 * racing a change never undoes it; `index_key` reads the entry from a record.
 */
export const INDEX_FUNCTIONS = `
local function index_put(order, cur, info, id, rev, created, expires, status, hint, name)
  local have = redis.call('HGET', info, id)
  if have and tonumber(cjson.decode(have)[1]) >= tonumber(rev) then return 0 end
  local st = 'a'
  if status == 'revoked' then st = 'r' end
  redis.call('HSET', info, id, cjson.encode({rev, created, expires, st, hint, name}))
  redis.call('ZADD', order, created, id)
  if st == 'r' then redis.call('ZREM', cur, id) else redis.call('ZADD', cur, created, id) end
  return 1
end
local function index_key(rec, order, cur, info)
  local r = redis.call('HMGET', rec, '${KeyField.id}', '${KeyField.rev}', '${KeyField.createdAt}', '${KeyField.expiresAt}', '${KeyField.status}', '${KeyField.hint}', '${KeyField.name}')
  if not r[1] then return 0 end
  return index_put(order, cur, info, r[1], r[2] or '0', r[3] or '0', r[4] or '', r[5] or 'active', r[6] or '', r[7] or '')
end
`;

/**
 * Index entries given by the caller (Cluster steps, the lazy build). KEYS: keyorder, keycur, keyinfo.
 * ARGV: built marker ('' = none), then groups of id, rev, created_at, expires_at, status, hint, name.
 */
export const INDEX_PUT = `${INDEX_FUNCTIONS}
local n = 0
for i = 2, #ARGV, 7 do
  n = n + index_put(KEYS[1], KEYS[2], KEYS[3], ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6])
end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[3], '~built', ARGV[1]) end
return n`;

/**
 * Create, one shot. KEYS: record, keyid index, account keys, account active keys, keyorder, keycur, keyinfo.
 * ARGV: limit, key id, digest, expires_at ('' = never), field, value, …
 */
export const CREATE_ALL = `${NOW}${INDEX_FUNCTIONS}${AUDIT_ARGS(7)}
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 'EXISTS' end
if redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[1]) then return 'LIMIT' end
${EXPIRY_CHECK(4)}
-- An account's first key starts its list index complete (no build needed).
if redis.call('SCARD', KEYS[3]) == 0 then redis.call('HSET', KEYS[7], '${KEY_INFO_BUILT}', '0') end
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
${WRITE_RECORD(1, 5, 'nargs')}
index_key(KEYS[1], KEYS[5], KEYS[6], KEYS[7])
${AUDIT_WRITE(8)}
return 'OK'`;

/**
 * Cluster create, step 1. KEYS: account active keys. ARGV: limit, key id, the key it replaces ('' =
 * none: a grace-0 roll's old key, about to leave the set, does not count against the limit).
 */
export const CREATE_RESERVE = `
local n = redis.call('SCARD', KEYS[1])
if ARGV[3] and ARGV[3] ~= '' then n = n - redis.call('SISMEMBER', KEYS[1], ARGV[3]) end
if n >= tonumber(ARGV[1]) then return 'LIMIT' end
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
 * fields never undo each other. KEYS: record[, keyorder, keycur, keyinfo (the list index, kept with
 * it; Cluster updates the index in its own step)]. ARGV: key id, then ops: 'set' field value | 'del' field.
 */
export const UPDATE = `${NOW}${INDEX_FUNCTIONS}
local idx = #KEYS == 4 or #KEYS == 6
local nkeys = 1
if idx then nkeys = 4 end
local nargs = #ARGV
local audit_ev = false
if #KEYS == nkeys + 2 then audit_ev = ARGV[nargs]; nargs = nargs - 1 end
local cur = redis.call('HMGET', KEYS[1], '${KeyField.id}', '${KeyField.status}')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
if cur[2] == 'revoked' then return 'REVOKED' end
if cur[2] ~= 'active' then return 'CORRUPT' end
local i = 2
while i <= nargs do
  if ARGV[i] == 'set' then
    if ARGV[i + 1] == '${KeyField.expiresAt}' and tonumber(ARGV[i + 2]) <= now then return 'PAST' end
    i = i + 3
  else
    i = i + 2
  end
end
i = 2
while i <= nargs do
  if ARGV[i] == 'set' then
    redis.call('HSET', KEYS[1], ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  else
    redis.call('HDEL', KEYS[1], ARGV[i + 1])
    i = i + 2
  end
end
redis.call('HSET', KEYS[1], '${KeyField.updatedAt}', now_s)
redis.call('HINCRBY', KEYS[1], '${KeyField.rev}', 1)
if idx then index_key(KEYS[1], KEYS[2], KEYS[3], KEYS[4]) end
local g = nkeys + 1
if audit_ev then
  local ev = '{"time":"' .. now_s .. '",' .. string.sub(audit_ev, 2)
  redis.call('LPUSH', KEYS[g], ev)
  redis.call('LTRIM', KEYS[g], 0, ${AUDIT_RETENTION.all - 1})
  redis.call('LPUSH', KEYS[g + 1], ev)
  redis.call('LTRIM', KEYS[g + 1], 0, ${AUDIT_RETENTION.perAccount - 1})
end
return 'OK'`;

/**
 * Moves the model list of a revoked record KEYS[rec] out of `models` (the field the sidecar reads)
 * into `revoked_models` (never read by the sidecar), so that the sidecar's reply for a revoked key
 * is as short as for a never-issued one. Idempotent: a record revoked before this rule is fixed by
 * revoking it again.
 */
export const STASH_MODELS = (rec: number) => `
local stash_m = redis.call('HGET', KEYS[${rec}], '${KeyField.models}')
if stash_m then
  redis.call('HSET', KEYS[${rec}], '${KeyField.revokedModels}', stash_m)
  redis.call('HDEL', KEYS[${rec}], '${KeyField.models}')
end
`;

/** The revoke of an active record KEYS[rec]: status, times, the envelope deleted, the model list stashed. */
export const REVOKE_WRITE = (rec: number) => `
redis.call('HSET', KEYS[${rec}], '${KeyField.status}', 'revoked', '${KeyField.revokedAt}', now_s, '${KeyField.updatedAt}', now_s)
redis.call('HDEL', KEYS[${rec}], '${KeyField.secret}')
${STASH_MODELS(rec)}`;

const REVOKE_RECORD = `
local cur = redis.call('HMGET', KEYS[1], '${KeyField.id}', '${KeyField.status}', '${KeyField.account}')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
local result = 'OK'
if cur[2] == 'revoked' then
  result = 'ALREADY'
  ${STASH_MODELS(1)}
else
  ${REVOKE_WRITE(1)}
  redis.call('HINCRBY', KEYS[1], '${KeyField.rev}', 1)
end
`;

/** Revoke, one shot. KEYS: record, account active keys, keyorder, keycur, keyinfo. ARGV: key id, account. */
export const REVOKE_ALL = `${NOW}${INDEX_FUNCTIONS}${AUDIT_ARGS(5)}
local acct = redis.call('HGET', KEYS[1], '${KeyField.account}')
if acct and acct ~= ARGV[2] then return 'CORRUPT' end
${REVOKE_RECORD}
redis.call('SREM', KEYS[2], ARGV[1])
index_key(KEYS[1], KEYS[3], KEYS[4], KEYS[5])
if result == 'OK' then
${AUDIT_WRITE(6)}
end
return result`;

/** Cluster revoke, step 1 (then SREM from the active set). KEYS: record. ARGV: key id. */
export const REVOKE_RECORD_ONLY = `${NOW}
${REVOKE_RECORD}
return result`;

/** Account status. KEYS: account. ARGV: 'active' | 'disabled'. Returns the previous status or ''. */
export const SET_ACCOUNT_STATUS = `${NOW}${AUDIT_ARGS(1)}
local prev = redis.call('HGET', KEYS[1], '${AccountField.status}')
redis.call('HSET', KEYS[1], '${AccountField.status}', ARGV[1], '${AccountField.updatedAt}', now_s)
if (prev or 'active') ~= ARGV[1] then
${AUDIT_WRITE(2)}
end
return prev or ''`;

/**
 * The old key's side of a roll (KEYS[1]; `cur`: its id, status, expires_at; `grace` in ms): revoked
 * at once at grace 0, otherwise its expiry becomes now + grace (or stays, if sooner).
 */
const RETIRE_OLD = `
redis.call('HSET', KEYS[1], '${KeyField.updatedAt}', now_s)
if grace == 0 then
  ${REVOKE_WRITE(1)}
else
  local at = now + grace
  if cur[3] == false or tonumber(cur[3]) > at then
    redis.call('HSET', KEYS[1], '${KeyField.expiresAt}', string.format('%d', at))
  end
end
redis.call('HINCRBY', KEYS[1], '${KeyField.rev}', 1)
`;

/**
 * A roll, one shot: the "already rolled" check, the new key and the old key's retirement in one
 * script, so parallel rolls of one key make exactly one new key (the others get ROLLED).
 * KEYS: old record, new record, new key's id index, account keys, account active keys, keyorder,
 * keycur, keyinfo.
 * ARGV: old id, new id, grace ms, limit, new digest, expires_at ('' = never), field, value, …
 * Grace 0 revokes the old key at once (and it does not count against the limit); otherwise its
 * expiry becomes now + grace (or stays, if sooner).
 */
export const ROLL_ALL = `${NOW}${INDEX_FUNCTIONS}${AUDIT_ARGS(8)}
local cur = redis.call('HMGET', KEYS[1], '${KeyField.id}', '${KeyField.status}', '${KeyField.expiresAt}', '${KeyField.rolledTo}')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
if cur[2] == 'revoked' then return 'REVOKED' end
if cur[2] ~= 'active' then return 'CORRUPT' end
if cur[4] then return 'ROLLED' end
if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then return 'EXISTS' end
local grace = tonumber(ARGV[3])
local n = redis.call('SCARD', KEYS[5])
if grace == 0 then n = n - redis.call('SISMEMBER', KEYS[5], ARGV[1]) end
if n >= tonumber(ARGV[4]) then return 'LIMIT' end
${EXPIRY_CHECK(6)}
redis.call('SADD', KEYS[4], ARGV[2])
redis.call('SADD', KEYS[5], ARGV[2])
redis.call('SET', KEYS[3], ARGV[5])
${WRITE_RECORD(2, 7, 'nargs')}
redis.call('HSET', KEYS[1], '${KeyField.rolledTo}', ARGV[2])
${RETIRE_OLD}
if grace == 0 then redis.call('SREM', KEYS[5], ARGV[1]) end
index_key(KEYS[2], KEYS[6], KEYS[7], KEYS[8])
index_key(KEYS[1], KEYS[6], KEYS[7], KEYS[8])
${AUDIT_WRITE(9)}
return 'OK'`;

/** Cluster roll, step 1: claims the old record for one new key. KEYS: old record. ARGV: old id, new id. */
export const ROLL_CLAIM = `
local cur = redis.call('HMGET', KEYS[1], '${KeyField.id}', '${KeyField.status}', '${KeyField.rolledTo}')
if cur[1] ~= ARGV[1] then return 'NOTFOUND' end
if cur[2] == 'revoked' then return 'REVOKED' end
if cur[2] ~= 'active' then return 'CORRUPT' end
if cur[3] then return 'ROLLED' end
redis.call('HSET', KEYS[1], '${KeyField.rolledTo}', ARGV[2])
return 'OK'`;

/** Cluster roll, undo of a claim whose new key was not created. KEYS: old record. ARGV: new id. */
export const ROLL_UNCLAIM = `
if redis.call('HGET', KEYS[1], '${KeyField.rolledTo}') == ARGV[1] then redis.call('HDEL', KEYS[1], '${KeyField.rolledTo}') end
return 'OK'`;

/** Cluster roll, last step: the old key's retirement. KEYS: old record. ARGV: old id, new id, grace ms. */
export const ROLL_FINISH = `${NOW}
local cur = redis.call('HMGET', KEYS[1], '${KeyField.id}', '${KeyField.status}', '${KeyField.expiresAt}', '${KeyField.rolledTo}')
if cur[1] ~= ARGV[1] or cur[4] ~= ARGV[2] then return 'NOTFOUND' end
if cur[2] ~= 'active' then return 'OK' end
local grace = tonumber(ARGV[3])
${RETIRE_OLD}
return 'OK'`;
