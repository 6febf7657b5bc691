/**
 * The sink's own Lua (one key each: the account's usage log, so one slot on Cluster). The record
 * script (`RECORD_USAGE`, ./book-script.ts) cuts the log at the hard cap once the ledger's group is
 * on it; what the ledger acknowledged is trimmed here.
 */

/** The consumer group of the usage ledger's sink on every account's usage log. */
export const LEDGER_GROUP = 'keygate-ledger';

/**
 * Trims what the group acknowledged and tells the oldest entry it has not. KEYS: the usage log.
 * ARGV: the group. Every entry before the oldest one pending or not yet delivered is acknowledged.
 * → {'OK', oldest unacknowledged id ('' = none), entries left} | {'NOGROUP'}
 */
export const TRIM_ACKED = `
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])
if type(groups) ~= 'table' or groups.err ~= nil then return {'NOGROUP'} end
local info = nil
for _, g in ipairs(groups) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  if f['name'] == ARGV[1] then info = f end
end
if not info then return {'NOGROUP'} end
local oldest = nil
if tonumber(info['pending']) > 0 then
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1)
  if #p > 0 then oldest = p[1][1] end
end
local nxt = redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', 1)
local function ms_seq(id)
  local m, s = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(m), tonumber(s)
end
if #nxt > 0 then
  if oldest == nil then
    oldest = nxt[1][1]
  else
    local am, as = ms_seq(nxt[1][1])
    local bm, bs = ms_seq(oldest)
    if am < bm or (am == bm and as < bs) then oldest = nxt[1][1] end
  end
end
if oldest then
  redis.call('XTRIM', KEYS[1], 'MINID', oldest)
else
  redis.call('XTRIM', KEYS[1], 'MAXLEN', 0)
end
return {'OK', oldest or '', redis.call('XLEN', KEYS[1])}`;
