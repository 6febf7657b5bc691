/** The Redis server's clock in a script: `now`, epoch milliseconds (every script reads time this way, never the caller's). */
export const LUA_NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;
