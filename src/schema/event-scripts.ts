/**
 * Lua fragments that publish events from inside another script, so the event is written in the
 * same atomic step as the change it tells of (a money script's KEYS all carry the account's hash
 * tag `{acct}`; the event stream and the alerts hash do too).
 *
 * `EMIT_EVENT` defines `emit_event(stream, account, type, data_json)`, and `events_emitted`, the events
 * it wrote: a script returns it so that its caller wakes the delivery worker for the account
 * (`wakeAccounts`: the due set is in the `{wh}` slot, which a script of the account's slot cannot touch). `json_str(s)` quotes a
 * string; numbers are written with `fmt` (`%d`, exact up to 2^53; never cjson, which writes 1e+14).
 *
 * `ALERT_CHECKS` defines, for the usage and credit scripts (and a metered booking, which reuses the
 * usage script):
 *   wallet_alerts(stream, alerts, account, balance)  after any balance change: wallet.low once per
 *       crossing below the account's threshold (re-armed when the balance rises back above it; at
 *       exactly the threshold it stays as it was), wallet.empty once per
 *       crossing to ≤ 0 (re-armed above 0)
 *   limit_alerts(stream, alerts, account, spend, key_id)  after spend was added: key.limit.threshold
 *       for each of the key's thresholds (percent of its limit, default 50,80,100) crossed and not yet
 *       fired in the limit's current period
 * Both need `now`, `fmt` and `period_bounds` (money scripts' NOW and LUA_PERIODS).
 */
import { AlertField as A, EVENT_STREAM_MAXLEN, EventField as E } from './events.ts';

export const DEFAULT_KEY_THRESHOLDS = [50, 80, 100] as const;

export const EMIT_EVENT = `
local function json_str(s) return cjson.encode(s) end
local events_emitted = 0
local function emit_event(stream, account, etype, data_json)
  redis.call('XADD', stream, 'MAXLEN', '~', '${EVENT_STREAM_MAXLEN}', '*', '${E.type}', etype, '${E.account}', account, '${E.data}', data_json)
  events_emitted = events_emitted + 1
end
`;

export const ALERT_CHECKS = `${EMIT_EVENT}
local function wallet_alerts(stream, alerts, account, balance)
  local a = redis.call('HMGET', alerts, '${A.walletLow}', '${A.walletLowFired}', '${A.walletEmptyFired}')
  if a[1] then
    local low = tonumber(a[1])
    if balance < low then
      if not a[2] then
        redis.call('HSET', alerts, '${A.walletLowFired}', '1')
        emit_event(stream, account, 'wallet.low', '{"balance_micros":' .. fmt(balance) .. ',"threshold_micros":' .. fmt(low) .. '}')
      end
    elseif balance > low and a[2] then
      redis.call('HDEL', alerts, '${A.walletLowFired}')
    end
  end
  if balance <= 0 then
    if not a[3] then
      redis.call('HSET', alerts, '${A.walletEmptyFired}', '1')
      emit_event(stream, account, 'wallet.empty', '{"balance_micros":' .. fmt(balance) .. '}')
    end
  elseif a[3] then
    redis.call('HDEL', alerts, '${A.walletEmptyFired}')
  end
end
local function limit_alerts(stream, alerts, account, spend, key_id)
  local lim = redis.call('HMGET', spend, 'limit', 'period')
  if not lim[1] or not lim[2] then return end
  local limit = tonumber(lim[1])
  local period = lim[2]
  local spent
  local start = 0
  if period == 'total' then
    spent = tonumber(redis.call('HGET', spend, 'total') or '0')
  else
    start = period_bounds(period, now)
    local cur = redis.call('HMGET', spend, period .. '_start', period)
    if not cur[1] or tonumber(cur[1]) ~= start then return end
    spent = tonumber(cur[2] or '0')
  end
  local list = redis.call('HGET', alerts, '${A.keyThresholds('')}' .. key_id) or '${DEFAULT_KEY_THRESHOLDS.join(',')}'
  if list == '' then return end
  local mark = period .. ':' .. fmt(start) .. ':'
  local fired = redis.call('HGET', alerts, '${A.keyFired('')}' .. key_id) or ''
  local top = 0
  if string.sub(fired, 1, #mark) == mark then top = tonumber(string.sub(fired, #mark + 1)) or 0 end
  -- need = ceil(limit * t / 100), exact: limit = q * 100 + r
  local q = math.floor(limit / 100)
  local r = limit - q * 100
  local new_top = top
  for t in string.gmatch(list, '%d+') do
    local pct = tonumber(t)
    local need = q * pct + math.floor((r * pct + 99) / 100)
    if pct > top and spent >= need then
      emit_event(stream, account, 'key.limit.threshold', '{"key_id":' .. json_str(key_id) .. ',"threshold":' .. fmt(pct) .. ',"period":' .. json_str(period) .. ',"spend_micros":' .. fmt(spent) .. ',"limit_micros":' .. fmt(limit) .. '}')
      if pct > new_top then new_top = pct end
    end
  end
  if new_top > top then redis.call('HSET', alerts, '${A.keyFired('')}' .. key_id, mark .. fmt(new_top)) end
end
`;
