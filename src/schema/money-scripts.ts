/**
 * The Lua scripts of the money operations (docs/redis-schema.md, "Wallet, spend limits and usage").
 * Every script touches only records of ONE account, all carrying the hash tag `{accountId}`, so each
 * runs as one atomic single-slot script on standalone Redis, Sentinel and Cluster alike. Times come
 * from the Redis server's `TIME`; periods are UTC (`LUA_PERIODS`).
 *
 * The gate record (the only one the sidecars read and cache) is written only when a state changes:
 * a wallet going from positive to ≤ 0 or back, a key reaching its limit, or a block that no longer
 * holds (new period, raised or removed limit). Recording usage below a threshold never touches it,
 * so it never invalidates a sidecar's cache.
 *
 * The usage record (`RECORD_USAGE`) is the ledger's booking write: src/ledger/book-script.ts.
 */
import { LUA_PERIODS } from './money.ts';
// ── events (src/schema/event-scripts.ts) ── optional extra KEYS: the account's event stream and alerts hash
import { ALERT_CHECKS } from './event-scripts.ts';
import { LUA_NOW } from './lua-time.ts';
// ── end events ──

// The fragments below are shared with the usage-record script (`RECORD_USAGE`, src/ledger/book-script.ts).
/** `now` (the server's clock, epoch ms), `fmt(n)` and `now_s`. */
export const NOW = `${LUA_NOW}
local function fmt(n) return string.format('%d', n) end
local now_s = fmt(now)
`;

/** `set_wallet_gate(gate, balance)`: wallet = open | empty, written only on a change. */
export const WALLET_GATE = `
local function set_wallet_gate(gate, balance)
  local want = 'empty'
  if balance > 0 then want = 'open' end
  if redis.call('HGET', gate, 'wallet') ~= want then redis.call('HSET', gate, 'wallet', want) end
end
`;

/**
 * `sync_limit(spend, gate, key_id)`: compares the key's spend in its limit's current period with the
 * limit and writes `limit:{keyId}` in the gate only when the answer changes (a stale block of an
 * ended period is removed here too). Returns the spend in the period ('' without a limit).
 */
export const SYNC_LIMIT = `
local function spend_in(spend, period)
  if period == 'total' then return tonumber(redis.call('HGET', spend, 'total') or '0') end
  local s = period_bounds(period, now)
  local cur = redis.call('HMGET', spend, period .. '_start', period)
  if cur[1] and tonumber(cur[1]) == s then return tonumber(cur[2] or '0') end
  return 0
end
local function sync_limit(spend, gate, key_id)
  local field = 'limit:' .. key_id
  local have = redis.call('HGET', gate, field)
  local lim = redis.call('HMGET', spend, 'limit', 'period')
  if not lim[1] or not lim[2] then
    if have then redis.call('HDEL', gate, field) end
    return ''
  end
  local spent = spend_in(spend, lim[2])
  if spent >= tonumber(lim[1]) then
    local _, e = period_bounds(lim[2], now)
    local want = 'never'
    if e >= 0 then want = fmt(e) end
    if have ~= want then redis.call('HSET', gate, field, want) end
  elseif have then
    redis.call('HDEL', gate, field)
  end
  return fmt(spent)
end
`;

/** `roll(hash, period, amount)`: adds to the period's counter, restarting it when a new period began. */
export const ROLL = `
local function roll(hash, period, amount)
  local s = period_bounds(period, now)
  local start = redis.call('HGET', hash, period .. '_start')
  if start and tonumber(start) == s then
    redis.call('HINCRBY', hash, period, amount)
  else
    redis.call('HSET', hash, period .. '_start', fmt(s), period, amount)
  end
end
`;

/** Where CREDIT's 'OK' reply tells the events written (`eventsWritten`). */
export const CREDIT_EVENTS_AT = 2;
/**
 * Credit. KEYS: wallet, credits, gate[, event stream, alerts]. ARGV: amount (micros), reference, max balance[, account].
 * With the two event KEYS: wallet.credited, and the wallet alerts re-armed (src/schema/event-scripts.ts).
 * → {'OK', balance, events written} | {'DUP', balance, first credit "amount:time"} | {'OVERFLOW', balance}
 */
export const CREDIT = `${NOW}${LUA_PERIODS}${WALLET_GATE}${ALERT_CHECKS}
local prev = redis.call('HGET', KEYS[2], ARGV[2])
if prev then return {'DUP', redis.call('HGET', KEYS[1], 'balance') or '0', prev} end
local bal = tonumber(redis.call('HGET', KEYS[1], 'balance') or '0')
if bal + tonumber(ARGV[1]) > tonumber(ARGV[3]) then return {'OVERFLOW', fmt(bal)} end
local new = redis.call('HINCRBY', KEYS[1], 'balance', ARGV[1])
redis.call('HSETNX', KEYS[1], 'created_at', now_s)
redis.call('HSET', KEYS[1], 'updated_at', now_s)
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1] .. ':' .. now_s)
set_wallet_gate(KEYS[3], new)
-- events
if #KEYS >= 5 then
  emit_event(KEYS[4], ARGV[4], 'wallet.credited', '{"amount_micros":' .. ARGV[1] .. ',"reference":' .. json_str(ARGV[2]) .. ',"balance_micros":' .. fmt(new) .. '}')
  wallet_alerts(KEYS[4], KEYS[5], ARGV[4], new)
end
-- end events
return {'OK', fmt(new), fmt(events_emitted)}`;

/**
 * A roll's spend: the new key starts with its predecessor's spend record (every period, the total
 * and the limit), so that rolling never resets a spend limit. KEYS: old spend, new spend, gate.
 * ARGV: new key id. → {'OK', spend in the limit's period ('' = no limit)}
 */
export const COPY_SPEND = `${NOW}${LUA_PERIODS}${SYNC_LIMIT}
local h = redis.call('HGETALL', KEYS[1])
if #h > 0 then redis.call('HSET', KEYS[2], unpack(h)) end
return {'OK', sync_limit(KEYS[2], KEYS[3], ARGV[1])}`;

/**
 * A key's spend limit. KEYS: spend, gate. ARGV: key id, amount ('' = remove the limit), period.
 * → {'OK', spend in the period ('' = no limit)}
 */
export const SET_LIMIT = `${NOW}${LUA_PERIODS}${SYNC_LIMIT}
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], 'limit', 'period')
else
  redis.call('HSET', KEYS[1], 'limit', ARGV[2], 'period', ARGV[3])
end
return {'OK', sync_limit(KEYS[1], KEYS[2], ARGV[1])}`;

/**
 * The sidecars' counter flush, one call per key (pipelined). KEYS: keyuse. ARGV: requests, last used (epoch ms).
 * `last_used` only moves forward (several sidecars flush the same key).
 */
export const KEY_USE = `${NOW}${LUA_PERIODS}${ROLL}
local last = tonumber(redis.call('HGET', KEYS[1], 'last_used') or '0')
if tonumber(ARGV[2]) > last then redis.call('HSET', KEYS[1], 'last_used', ARGV[2]) end
roll(KEYS[1], 'day', ARGV[1])
roll(KEYS[1], 'month', ARGV[1])
return 'OK'`;
