/**
 * The Lua scripts of rate limits (docs/rate-limits.md). Every script touches records of ONE account
 * (all `{acct}`-tagged), so each runs as one atomic single-slot script on standalone Redis, Sentinel
 * and Cluster alike. Windows come from the Redis server's `TIME`: every sidecar counts in the same
 * window whatever its own clock says.
 */

/** `rate_now()`: epoch ms from the server's clock. `rate_fmt(n)`: an integer as text. */
const NOW = `
local function rate_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function rate_fmt(n) return string.format('%d', n) end
`;

/** Arguments per window record in TAKE (after the first, `need`). */
export const TAKE_ARGS_PER_WINDOW = 8;

/**
 * Take units of one or two request windows (the key's, the account's) for `need` waiting requests,
 * and lease extra units to the calling sidecar.
 *
 * KEYS: the request window records (1 or 2). ARGV: need, then per window: limit, window length ms,
 * pool (units all sidecars may hold unused; 0 = exact), covered (units of this sidecar's lease
 * already set aside for these requests), release (size of a lease given back; 0 = none), its
 * window start, its unused units, want (extra units to lease).
 *
 * The batch allows k = min(need, covered_i + limit_i − counted_i over every window) requests; each
 * window counts k − covered_i more. Leases are granted only when the whole batch was allowed, at
 * most half of the pool's free room (rounded up) and never past the limit, so the units held by all
 * sidecars never exceed the pool. A release from another window (the record has rolled) is ignored.
 * Units a released lease set aside (covered) that the batch did not use return to the window.
 *
 * → {now, k, then per window: window start, window end, counted, held, leased}
 */
export const TAKE = `${NOW}
local now = rate_now()
local need = tonumber(ARGV[1])
local st = {}
local k = need
for i = 1, #KEYS do
  local b = 1 + (i - 1) * ${TAKE_ARGS_PER_WINDOW}
  local s = {
    limit = tonumber(ARGV[b + 1]), len = tonumber(ARGV[b + 2]), pool = tonumber(ARGV[b + 3]),
    covered = tonumber(ARGV[b + 4]), rel = tonumber(ARGV[b + 5]), relw = tonumber(ARGV[b + 6]),
    unused = tonumber(ARGV[b + 7]), want = tonumber(ARGV[b + 8]),
  }
  s.w = math.floor(now / s.len) * s.len
  local cur = redis.call('HMGET', KEYS[i], 'w', 'c', 'h')
  s.c, s.h = 0, 0
  if cur[1] and tonumber(cur[1]) == s.w then
    s.c = tonumber(cur[2] or '0')
    s.h = tonumber(cur[3] or '0')
  end
  if s.rel > 0 and s.relw == s.w then
    s.h = math.max(0, s.h - s.rel)
    s.c = math.max(0, s.c - math.min(s.unused, s.rel))
  end
  local avail = s.covered + math.max(0, s.limit - s.c)
  if avail < k then k = avail end
  st[i] = s
end
if k < 0 then k = 0 end
local out = {rate_fmt(now), rate_fmt(k)}
for i = 1, #KEYS do
  local s = st[i]
  s.c = s.c + math.max(0, k - s.covered)
  if s.rel > 0 and s.relw == s.w then
    -- units of the lease given back in this call that were set aside but not used
    s.c = math.max(0, s.c - math.max(0, s.covered - k))
  end
  local extra = 0
  if k == need and s.pool > 0 and s.want > 0 then
    local room = s.pool - s.h
    extra = math.min(s.want, s.limit - s.c, math.floor((room + 1) / 2))
    if extra < 0 then extra = 0 end
  end
  s.c = s.c + extra
  s.h = s.h + extra
  redis.call('HSET', KEYS[i], 'w', rate_fmt(s.w), 'c', rate_fmt(s.c), 'h', rate_fmt(s.h))
  redis.call('PEXPIREAT', KEYS[i], rate_fmt(s.w + s.len + 60000))
  table.insert(out, rate_fmt(s.w))
  table.insert(out, rate_fmt(s.w + s.len))
  table.insert(out, rate_fmt(s.c))
  table.insert(out, rate_fmt(s.h))
  table.insert(out, rate_fmt(extra))
end
return out`;

/**
 * The token-rate part of a booking, for every script that books tokens (usage records, metered
 * answers): include `LUA_TOKEN_RATES` in the script and call
 *
 *     book_tokens(key_tokrate, account_tokrate, gate, key_id, tokens)
 *
 * with the records `tokrate:{acct}:{keyId}`, `tokrate:{acct}` and `gate:{acct}` among the script's
 * KEYS (same slot as every other money record) and tokens = input + output (0 is fine: it only
 * lifts stale blocks). Each record that carries a rate (`limit`, `per`, mirrored by SET_TOKEN_RATE)
 * adds the tokens to its current window; when the window's tokens reach the rate, the gate gets
 * `tokrate:{keyId}` (or `tokrate`) = the window's end, written only when it changes — so a booking
 * below the rate never writes the gate and never invalidates a sidecar's cache. The block lifts by
 * itself at that instant. Returns the window's tokens of the key and of the account ('' = no rate).
 * `token_window_used(rec, now)` reads a record's current window (for a bound checked before any write);
 * both read the record through `token_window`.
 */
export const LUA_TOKEN_RATES = `${NOW}
local RATE_UNIT_MS = {second = 1000, minute = 60000, hour = 3600000, day = 86400000}
local function sync_token_gate(gate, field, over, till)
  local have = redis.call('HGET', gate, field)
  if over then
    local want = rate_fmt(till)
    if have ~= want then redis.call('HSET', gate, field, want) end
  elseif have then
    redis.call('HDEL', gate, field)
  end
end
-- the record's token rate and current window: limit, window length, window start, the tokens the
-- window already holds (0 in a new window), the window start stored; nil without a rate (read only)
local function token_window(rec, now)
  local r = redis.call('HMGET', rec, 'limit', 'per', 'w', 'used')
  local len = r[2] and RATE_UNIT_MS[r[2]]
  if not r[1] or not len then return nil end
  local w = math.floor(now / len) * len
  local used = 0
  if r[3] and tonumber(r[3]) == w then used = tonumber(r[4] or '0') end
  return tonumber(r[1]), len, w, used, r[3]
end
local function book_token_window(rec, gate, field, tokens, now)
  local limit, len, w, used, stored = token_window(rec, now)
  if not limit then
    if redis.call('HEXISTS', gate, field) == 1 then redis.call('HDEL', gate, field) end
    return ''
  end
  used = used + tokens
  if tokens > 0 or not stored or tonumber(stored) ~= w then
    redis.call('HSET', rec, 'w', rate_fmt(w), 'used', rate_fmt(used))
  end
  sync_token_gate(gate, field, used >= limit, w + len)
  return rate_fmt(used)
end
-- the tokens the record's current window already holds (0 without a rate or in a new window)
local function token_window_used(rec, now)
  local limit, _, _, used = token_window(rec, now)
  return limit and used or 0
end
local function book_tokens(key_rec, acct_rec, gate, key_id, tokens)
  local now = rate_now()
  local k = book_token_window(key_rec, gate, 'tokrate:' .. key_id, tokens, now)
  local a = book_token_window(acct_rec, gate, 'tokrate', tokens, now)
  return k, a
end
`;

/**
 * Books tokens alone (for a caller that books outside a money script, and the tests).
 * KEYS: key tokrate, account tokrate, gate. ARGV: key id, tokens. → {key tokens, account tokens}
 */
export const BOOK_TOKENS = `${LUA_TOKEN_RATES}
local k, a = book_tokens(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]))
return {k, a}`;

/**
 * Sets or removes the token rate mirror of a key or an account and brings its gate block in line
 * (a raised or removed rate lifts the block at once). KEYS: tokrate record, gate.
 * ARGV: gate field (`tokrate:{keyId}` or `tokrate`), count ('' = remove), per (unit name).
 * → window's tokens ('' = no rate)
 */
export const SET_TOKEN_RATE = `${LUA_TOKEN_RATES}
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], 'limit', 'per', 'w', 'used')
else
  if redis.call('HGET', KEYS[1], 'per') ~= ARGV[3] then redis.call('HDEL', KEYS[1], 'w', 'used') end
  redis.call('HSET', KEYS[1], 'limit', ARGV[2], 'per', ARGV[3])
end
return book_token_window(KEYS[1], KEYS[2], ARGV[1], 0, rate_now())`;
