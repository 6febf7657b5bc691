/**
 * The usage-record script (`RECORD_USAGE`): the one atomic write of a booking, whether the console's
 * `POST /v1/usage` (source `record`) or the sidecar's metering (source `meter`) books it; called only
 * through `src/ledger/book.ts`. It runs over records of ONE account (hash tag `{accountId}`), so it is
 * one single-slot script on standalone Redis, Sentinel and Cluster alike (docs/redis-schema.md,
 * "Wallet, spend limits and usage"). Its fragments shared with the other money scripts (time, the
 * wallet gate, the limit sync, the period roll) are in `src/schema/money-scripts.ts`.
 */
import { LUA_PERIODS, MAX_TOKEN_COUNT, MAX_TOKEN_TOTAL } from '../schema/money.ts';
import { NOW, ROLL, SYNC_LIMIT, WALLET_GATE } from '../schema/money-scripts.ts';
import { LUA_TOKEN_RATES } from '../schema/rate-scripts.ts';
import { rateKeys } from '../schema/rates.ts';
import { KEY_DAYS_KEPT, type Schema } from '../schema/redis-schema.ts';
import { eventsSchema } from '../schema/events.ts';
// ── events (src/schema/event-scripts.ts) ── optional extra KEYS: the account's event stream and alerts hash
import { ALERT_CHECKS } from '../schema/event-scripts.ts';
// ── end events ──
import { LEDGER_GROUP } from './scripts.ts';

/**
 * `roll_tokens(hash, input, output)`: adds to a token counter record (today and this month, UTC),
 * restarting a period's counts when a new one began. Fields: `day_start`, `day_in`, `day_out`,
 * `month_start`, `month_in`, `month_out` (TokenCounterField).
 */
const ROLL_TOKENS = `
local function roll_tokens(hash, tin, tout)
  for _, period in ipairs({'day', 'month'}) do
    local s = period_bounds(period, now)
    local start = redis.call('HGET', hash, period .. '_start')
    if start and tonumber(start) == s then
      if tin > 0 then redis.call('HINCRBY', hash, period .. '_in', tin) end
      if tout > 0 then redis.call('HINCRBY', hash, period .. '_out', tout) end
    else
      redis.call('HSET', hash, period .. '_start', fmt(s), period .. '_in', fmt(tin), period .. '_out', fmt(tout))
    end
  end
end
`;

/**
 * `tokens_over(hash, what, tin, tout)` and `rate_over(rec, what, tokens)`: read only, before any
 * write. Whether adding a record's counts would take a token counter record's input plus output
 * (today's or this month's) or a token-rate window past MAX_TOKEN_TOTAL: nil when it fits, else
 * "what period total" for the refusal. Every value read is at most MAX_TOKEN_TOTAL and every count at
 * most MAX_TOKEN_COUNT, so the sums are exact in Lua's doubles (below 2^53 + 2^41).
 */
const TOKEN_BOUNDS = `
local function tokens_over(hash, what, tin, tout)
  for _, period in ipairs({'day', 'month'}) do
    local r = redis.call('HMGET', hash, period .. '_start', period .. '_in', period .. '_out')
    if r[1] and tonumber(r[1]) == period_bounds(period, now) then
      local total = tonumber(r[2] or '0') + tonumber(r[3] or '0')
      if total + tin + tout > ${MAX_TOKEN_TOTAL} then return what .. ' ' .. period .. ' ' .. fmt(total) end
    end
  end
  return nil
end
local function rate_over(rec, what, tokens)
  local used = token_window_used(rec, now)
  if used + tokens > ${MAX_TOKEN_TOTAL} then return what .. ' window ' .. fmt(used) end
  return nil
end
`;

/** The number of KEYS of RECORD_USAGE. */
export const RECORD_USAGE_KEYS = 13;

/** The KEYS of RECORD_USAGE for one booking, in order. */
export function usageRecordKeys(s: Schema, account: string, keyId: string, requestId: string): string[] {
  const rk = rateKeys(s);
  const ev = eventsSchema(s.ns);
  return [
    s.usageRequest(account, requestId),
    s.wallet(account),
    s.keySpend(account, keyId),
    s.gate(account),
    s.usageLog(account),
    ev.stream(account),
    ev.alerts(account),
    s.tokens(account, keyId),
    s.tokens(account),
    rk.tokens(account, keyId),
    rk.tokens(account),
    s.usageDropped(account), // ledger: entries the cap dropped unacknowledged
    s.keyDays(account, keyId), // key days: the last KEYS entry
  ];
}


/** Where RECORD_USAGE's 'OK' reply tells the events written (`eventsWritten`). */
export const RECORD_USAGE_EVENTS_AT = 4;
/**
 * Usage record, shared by `POST /v1/usage` (source `record`) and the sidecar's metering (source
 * `meter`). KEYS (all in the account's slot):
 *   1 usagereq:{acct}:{reqId}, 2 wallet:{acct}, 3 spend:{acct}:{keyId}, 4 gate:{acct},
 *   5 usage:{acct} (log), 6 the account's event stream, 7 its alerts hash (src/schema/events.ts),
 *   8 tokens:{acct}:{keyId}, 9 tokens:{acct}, 10 tokrate:{acct}:{keyId}, 11 tokrate:{acct}.
 * ARGV: 1 key id, 2 amount (micros, ≥ 0), 3 request id, 4 idempotency seconds, 5 log max length,
 *   6 min balance (and the key's largest total spend), 7 model ('' = none), 8 input tokens ('' =
 *   not given), 9 output tokens, 10 account (events), 11 cached input tokens, 12 cache write
 *   tokens, 13 reasoning tokens, 14 source (`meter` | `record`; '' = record), 15 estimated ('1' |
 *   ''), 16 unpriced ('1' | ''), 17 price (the basis of the amount, JSON text; '' = none: the entry
 *   then has no `price` field), 18 the log's request id label (metering: Envoy's x-request-id;
 *   absent or '' = ARGV 3). The record is idempotent on ARGV 3 (metering: keygate's booking id),
 *   which the log entry carries as `booking_id`; its `req` is the label.
 * Events: wallet.low / wallet.empty / key.limit.threshold at their crossing (src/schema/event-scripts.ts).
 * Token counters (KEYS 8, 9) and token rates (book_tokens, KEYS 10, 11) are written when the input
 * or output count is given (tokens = input + output).
 * KEYS 12 usagedrop:{acct}: with the ledger's consumer group on the log (src/ledger), the log is
 * not trimmed by MAXLEN ~ but cut exactly at the cap, and the entries cut before any sink read them
 * are counted here (the ledger's sink trims what it acknowledged, and counts here the entries it
 * claims from a dead sink that were cut and are not in the table).
 * KEYS 13 keydays:{acct}:{keyId}: the key's spend, requests and tokens per UTC day (the last KEYS
 * entry, written when it is a keydays hash; docs/redis-schema.md, "A key's daily usage").
 * → {'OK', balance ('' = no wallet), spend in the limit's period ('' = no limit), log entry id, events written}
 *   | {'DUP', the first record's "keyId:amount:input:output:model", this call's}
 *   | {'FLOOR', balance} | {'TOTAL', the key's total spend}
 *   | {'TOKENS', "<key|account> <day|month|window> <its tokens>", or "count" for a count above MAX_TOKEN_COUNT}
 * The key's total spend (and so every period's) stays at most ARGV[6], like the balance: exact in Lua.
 * Every token total (counters and rate windows, input plus output) stays at most MAX_TOKEN_TOTAL:
 * all are checked before the first write, and a record that would pass one is refused whole.
 * `usagereq` keeps what a usage record can carry — key id, amount, input and output tokens, model
 * (ARGV 1, 2, 8, 9, 7, as given, '' = not given, joined by ':'; only the model, last, is free text)
 * — so a repeat of the request id with any of them different is told apart from a plain retry (the
 * caller compares the two; the script writes nothing either way). The cache and reasoning counts
 * only metering gives are left out, so a router recording a request metering booked, with the same
 * fields, is a plain retry. A value written before counts and model were kept is "keyId:amount".
 */
export const RECORD_USAGE = `${NOW}${LUA_PERIODS}${WALLET_GATE}${SYNC_LIMIT}${ROLL}${ALERT_CHECKS}${ROLL_TOKENS}${LUA_TOKEN_RATES}${TOKEN_BOUNDS}
local booked = table.concat({ARGV[1], ARGV[2], ARGV[8], ARGV[9], ARGV[7]}, ':')
local first = redis.call('GET', KEYS[1])
if first then return {'DUP', first, booked} end
local amount = tonumber(ARGV[2])
local total = tonumber(redis.call('HGET', KEYS[3], 'total') or '0')
if total + amount > tonumber(ARGV[6]) then return {'TOTAL', fmt(total)} end
local has_wallet = redis.call('HEXISTS', KEYS[2], 'balance') == 1
if has_wallet then
  local bal = tonumber(redis.call('HGET', KEYS[2], 'balance'))
  if bal - amount < -tonumber(ARGV[6]) then return {'FLOOR', fmt(bal)} end
end
local counted = ARGV[8] ~= '' or ARGV[9] ~= ''
local tin = tonumber(ARGV[8] ~= '' and ARGV[8] or '0')
local tout = tonumber(ARGV[9] ~= '' and ARGV[9] or '0')
if counted then
  if tin > ${MAX_TOKEN_COUNT} or tout > ${MAX_TOKEN_COUNT} then return {'TOKENS', 'count'} end
  local over = tokens_over(KEYS[8], 'key', tin, tout) or tokens_over(KEYS[9], 'account', tin, tout)
    or rate_over(KEYS[10], 'key', tin + tout) or rate_over(KEYS[11], 'account', tin + tout)
  if over then return {'TOKENS', over} end
end
redis.call('SET', KEYS[1], booked, 'EX', ARGV[4])
local balance = ''
if has_wallet then
  local new = redis.call('HINCRBY', KEYS[2], 'balance', fmt(-amount))
  redis.call('HSET', KEYS[2], 'updated_at', now_s)
  set_wallet_gate(KEYS[4], new)
  balance = fmt(new)
end
roll(KEYS[3], 'day', ARGV[2])
roll(KEYS[3], 'week', ARGV[2])
roll(KEYS[3], 'month', ARGV[2])
redis.call('HINCRBY', KEYS[3], 'total', ARGV[2])
local spent = sync_limit(KEYS[3], KEYS[4], ARGV[1])
-- events
if #KEYS >= 7 then
  if has_wallet then wallet_alerts(KEYS[6], KEYS[7], ARGV[10], tonumber(balance)) end
  limit_alerts(KEYS[6], KEYS[7], ARGV[10], KEYS[3], ARGV[1])
end
-- end events
if counted then
  roll_tokens(KEYS[8], tin, tout)
  roll_tokens(KEYS[9], tin, tout)
  book_tokens(KEYS[10], KEYS[11], KEYS[4], ARGV[1], tin + tout)
end
-- ── key days (docs/redis-schema.md, "A key's daily usage"): the last KEYS entry, when it is the key's keydays hash ──
do
  local kd = KEYS[#KEYS]
  if string.find(kd, ':keydays:', 1, true) then
    local day = fmt(math.floor(now / 86400000))
    local cur = redis.call('HGET', kd, day)
    local a, n, ti, to = 0, 0, 0, 0
    if cur then
      local p1, p2, p3, p4 = string.match(cur, '^(%d+) (%d+) (%d+) (%d+)$')
      if p1 then a, n, ti, to = tonumber(p1), tonumber(p2), tonumber(p3), tonumber(p4) end
    else
      for _, d in ipairs(redis.call('HKEYS', kd)) do
        if tonumber(d) == nil or tonumber(d) <= tonumber(day) - ${KEY_DAYS_KEPT} then redis.call('HDEL', kd, d) end
      end
    end
    a = a + amount
    n = n + 1
    -- token sums saturate at 2^53 - 1 (the amount cannot pass it: the key's total is capped above)
    if ARGV[8] ~= '' then ti = math.min(ti + tonumber(ARGV[8]), 9007199254740991) end
    if ARGV[9] ~= '' then to = math.min(to + tonumber(ARGV[9]), 9007199254740991) end
    redis.call('HSET', kd, day, fmt(a) .. ' ' .. fmt(n) .. ' ' .. fmt(ti) .. ' ' .. fmt(to))
    redis.call('EXPIRE', kd, ${KEY_DAYS_KEPT * 86400})
  end
end
-- ── end key days ──
local label = ARGV[18] ~= nil and ARGV[18] ~= '' and ARGV[18] or ARGV[3]
local entry = {'key', ARGV[1], 'req', label, 'amount', ARGV[2], 'booking_id', ARGV[3]}
local function opt(name, v) if v ~= nil and v ~= '' then table.insert(entry, name); table.insert(entry, v) end end
opt('model', ARGV[7])
opt('in', ARGV[8])
opt('out', ARGV[9])
opt('cached_in', ARGV[11])
opt('cache_write', ARGV[12])
opt('reasoning', ARGV[13])
opt('src', ARGV[14])
opt('est', ARGV[15])
opt('unpriced', ARGV[16])
opt('price', ARGV[17])
-- ── ledger (src/ledger/scripts.ts): with its consumer group on the log, only the cap trims here ──
local id
local ledger = nil
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[5])
if type(groups) == 'table' and groups.err == nil then
  for _, g in ipairs(groups) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f['name'] == '${LEDGER_GROUP}' then ledger = f end
  end
end
if ledger then
  id = redis.call('XADD', KEYS[5], '*', unpack(entry))
  local len = redis.call('XLEN', KEYS[5])
  local over = math.min(len - tonumber(ARGV[5]), 1000)
  if over > 0 then
    local cut = redis.call('XRANGE', KEYS[5], '-', '+', 'COUNT', over)
    local last = ledger['last-delivered-id']
    local function after(a, b)
      local am, as = string.match(a, '^(%d+)-(%d+)$')
      local bm, bs = string.match(b, '^(%d+)-(%d+)$')
      am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
      return am > bm or (am == bm and as > bs)
    end
    -- never delivered to a sink: lost to the ledger (a delivered one is in a sink's hands; one whose sink died is counted by the sink that claims it)
    local lost = 0
    for _, e in ipairs(cut) do
      if after(e[1], last) then lost = lost + 1 end
    end
    redis.call('XTRIM', KEYS[5], 'MAXLEN', '=', len - over)
    if lost > 0 then redis.call('INCRBY', KEYS[12], lost) end
  end
else
  id = redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[5], '*', unpack(entry))
end
-- ── end ledger ──
return {'OK', balance, spent, id, fmt(events_emitted)}`;

