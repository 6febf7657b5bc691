/**
 * `GET /v1/accounts/{account}/usage`: an account's usage log summed per day, key or model, over a
 * real console and redis-server. Owner or operator only; bounded span; absent token counts are 0.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { priceBooking, redisBookingWrite } from '../src/metering/booker.ts';
import { PriceTable } from '../src/schema/prices.ts';
import { callApi, useTestConsole } from './helpers/console-api.ts';
import type { RedisServer } from './helpers/redis-server.ts';

let redis: RedisServer;
let db: Redis;
let srv: ConsoleServer;
let base: string;
let admin: string;
let owner: string;
const MINE = `mine-${randomBytes(4).toString('hex')}`;
const OTHER = `other-${randomBytes(4).toString('hex')}`;
const hourAgo = () => new Date(Date.now() - 3600_000).toISOString();
const zero = { input: 0, cached_input: 0, cache_write: 0, output: 0, reasoning: 0 };

const fx = useTestConsole(MINE);
beforeAll(() => {
  ({ redis, db, srv, base, admin, owner } = fx);
});

describe('usage summed per day, key and model', () => {
  let k1: string;
  let k2: string;
  beforeAll(async () => {
    k1 = (await srv.console.createKey({ account: MINE, name: 'one' }, CLI_ACTOR)).id;
    k2 = (await srv.console.createKey({ account: MINE, name: 'two' }, CLI_ACTOR)).id;
    const rec = (keyId: string, amountMicros: number, model: string | null, inputTokens: number | null, outputTokens: number | null) =>
      srv.console.recordUsage({ keyId, amountMicros, requestId: `req-${randomBytes(6).toString('hex')}`, model, inputTokens, outputTokens });
    await rec(k1, 100, 'GPT-4o', 1000, 50);
    await rec(k1, 200, 'gpt-4o', 2000, 70);
    await rec(k2, 5, null, null, null);
    await rec(k2, 7, 'claude-sonnet-4', 10, 3);
    const other = (await srv.console.createKey({ account: OTHER, name: 'theirs' }, CLI_ACTOR)).id;
    await srv.console.recordUsage({ keyId: other, amountMicros: 999, requestId: 'theirs-1', model: 'gpt-4o', inputTokens: 1, outputTokens: 1 });
  });

  it('by key, by model (lower case; (none) without a model), by day; totals; absent counts are 0', async () => {
    const byKey = await callApi(base, 'GET', `/v1/accounts/${MINE}/usage?since=${hourAgo()}&group_by=key`, { token: owner });
    expect(byKey.status).toBe(200);
    expect(byKey.body.groups).toEqual(
      [
        { group: k1, requests: 2, amount_micros: 300, tokens: { ...zero, input: 3000, output: 120 } },
        { group: k2, requests: 2, amount_micros: 12, tokens: { ...zero, input: 10, output: 3 } },
      ].sort((a, b) => (a.group < b.group ? -1 : 1)),
    );
    expect(byKey.body.total).toEqual({ requests: 4, amount_micros: 312, tokens: { ...zero, input: 3010, output: 123 } });
    expect(byKey.body.truncated).toBe(false);

    const byModel = await callApi(base, 'GET', `/v1/accounts/${MINE}/usage?since=${hourAgo()}&group_by=model`, { token: admin });
    expect(byModel.body.groups.map((g: { group: string; requests: number }) => [g.group, g.requests])).toEqual([['(none)', 1], ['claude-sonnet-4', 1], ['gpt-4o', 2]]);

    const byDay = await callApi(base, 'GET', `/v1/accounts/${MINE}/usage?since=${hourAgo()}`, { token: admin });
    expect(byDay.body.group_by).toBe('day');
    const days = byDay.body.groups.map((g: { group: string }) => g.group);
    expect(days.every((d: string) => /^\d{4}-\d{2}-\d{2}$/.test(d))).toBe(true);
    expect(byDay.body.groups.reduce((n: number, g: { requests: number }) => n + g.requests, 0)).toBe(4);

    // A span that ends before the records: nothing.
    const before = await callApi(base, 'GET', `/v1/accounts/${MINE}/usage?since=${new Date(Date.now() - 7200_000).toISOString()}&until=${hourAgo()}`, { token: admin });
    expect(before.body).toMatchObject({ groups: [], total: { requests: 0, amount_micros: 0, tokens: zero } });
  });

  it("another account's usage is a 404 to a scoped token; bad spans and groupings are 400", async () => {
    const theirs = await callApi(base, 'GET', `/v1/accounts/${OTHER}/usage?since=${hourAgo()}`, { token: owner });
    expect([theirs.status, theirs.body.error.code]).toEqual([404, 'NOT_FOUND']);
    const cases = [
      `since=${new Date(Date.now() - 100 * 86_400_000).toISOString()}`,
      `since=${hourAgo()}&until=${new Date(Date.now() - 7200_000).toISOString()}`,
      `since=${hourAgo()}&group_by=week`,
      'since=yesterday',
      'group_by=day',
    ];
    for (const q of cases) {
      const r = await callApi(base, 'GET', `/v1/accounts/${MINE}/usage?${q}`, { token: admin });
      expect([q, r.status, r.body.error.code]).toEqual([q, 400, 'INVALID_INPUT']);
    }
  });
});

describe('metered bookings: token fields in the summary, the export, and tokens on keys and accounts', () => {
  it('a booking priced from the table set through the API shows its tokens everywhere', async () => {
    const acct = `meter-${randomBytes(4).toString('hex')}`;
    const key = (await srv.console.createKey({ account: acct, name: 'metered' }, CLI_ACTOR)).id;
    const put = await callApi(base, 'PUT', `/v1/prices/${encodeURIComponent('openai/gpt-4o')}`, { token: admin, body: { input_micros: 2_500_000, output_micros: 10_000_000, cached_input_micros: 1_250_000 } });
    expect(put.status).toBe(200);
    const table = PriceTable.fromHash(await db.hgetall(srv.console.schema.prices()));
    const write = redisBookingWrite(srv.console.redis, srv.console.schema);
    const rid = `req-${randomBytes(4).toString('hex')}`;
    const booking = {
      booking_id: rid, request_id: rid, key_id: key, account: acct, model: 'gpt-4o', family: 'openai' as const,
      input_tokens: 1000, cached_input_tokens: 400, cache_write_tokens: 0, output_tokens: 200, reasoning_tokens: 50, estimated: false,
    };
    const priced = priceBooking(booking, table, Date.now());
    // (600 × 2.5 + 400 × 1.25 + 200 × 10) per million = 0.004 = 4000 micro-units.
    expect(priced.amountMicros).toBe(4000);
    expect(await write([priced])).toEqual(['booked']);
    // And a usage record with only input and output counts.
    await srv.console.recordUsage({ keyId: key, amountMicros: 10, requestId: 'plain-1', model: 'gpt-4o', inputTokens: 5, outputTokens: 1 });

    const sum = await callApi(base, 'GET', `/v1/accounts/${acct}/usage?since=${hourAgo()}&group_by=model`, { token: admin });
    expect(sum.body.groups).toEqual([{ group: 'gpt-4o', requests: 2, amount_micros: 4010, tokens: { input: 1005, cached_input: 400, cache_write: 0, output: 201, reasoning: 50 } }]);

    const exp = await callApi(base, 'GET', `/v1/usage?account=${acct}&since=${hourAgo()}`, { token: admin });
    expect(exp.body.entries[0]).toMatchObject({ input_tokens: 1000, output_tokens: 200, cached_input_tokens: 400, cache_write_tokens: 0, reasoning_tokens: 50 });
    expect(exp.body.entries[1]).not.toHaveProperty('cached_input_tokens');

    const tokens = { today: { input: 1005, output: 201 }, month: { input: 1005, output: 201 } };
    expect((await callApi(base, 'GET', `/v1/keys/${key}`, { token: admin })).body.tokens).toEqual(tokens);
    expect((await callApi(base, 'GET', `/v1/accounts/${acct}`, { token: admin })).body.tokens).toEqual(tokens);
    expect((await srv.console.getKeyView(key)).usage.tokens).toEqual(tokens);
    const bin = fileURLToPath(new URL('../bin/keygate', import.meta.url));
    const shown = await new Promise<string>((resolve, reject) =>
      execFile(bin, ['accounts', 'show', acct, '--json'], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', KEYGATE_NODE: process.execPath, REDIS_URL: redis.url }, timeout: 60_000 }, (err, out) => (err ? reject(err) : resolve(out))),
    );
    expect(JSON.parse(shown).tokens).toEqual(tokens);
    expect((await srv.console.accountInfo(acct)).tokens).toEqual(tokens);
    // A key without bookings: zeros.
    const idle = (await srv.console.createKey({ account: acct, name: 'idle' }, CLI_ACTOR)).id;
    expect((await callApi(base, 'GET', `/v1/keys/${idle}`, { token: admin })).body.tokens).toEqual({ today: { input: 0, output: 0 }, month: { input: 0, output: 0 } });
  });
});

describe('the export marks each entry: metered or recorded, estimated, unpriced', () => {
  it('GET /v1/usage and `usage export` carry source, estimated and unpriced on every entry', async () => {
    const acct = `marks-${randomBytes(4).toString('hex')}`;
    const key = (await srv.console.createKey({ account: acct, name: 'marked' }, CLI_ACTOR)).id;
    const put = await callApi(base, 'PUT', `/v1/prices/${encodeURIComponent('openai/gpt-4o-marks')}`, { token: admin, body: { input_micros: 1_000_000, output_micros: 1_000_000 } });
    expect(put.status).toBe(200);
    const table = PriceTable.fromHash(await db.hgetall(srv.console.schema.prices()));
    const write = redisBookingWrite(srv.console.redis, srv.console.schema);
    const metered = (request_id: string, model: string, family: 'openai' | 'google', estimated: boolean) =>
      priceBooking({ booking_id: request_id, request_id, key_id: key, account: acct, model, family, input_tokens: 10, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 5, reasoning_tokens: 0, estimated }, table, Date.now());
    // an estimated metered booking (10 + 5 tokens at 1 each: 15 micro-units), an unpriced one (no
    // price matches a Google model here), then a usage record
    expect(await write([metered('m-cut', 'gpt-4o-marks', 'openai', true)])).toEqual(['booked']);
    expect(await write([metered('m-unpriced', 'no-such-model-marks', 'google', false)])).toEqual(['booked']);
    await srv.console.recordUsage({ keyId: key, amountMicros: 10, requestId: 'r-plain', model: 'gpt-4o', inputTokens: 5, outputTokens: 1 });
    const want = [
      { request_id: 'm-cut', amount_micros: 15, source: 'meter', estimated: true, unpriced: false },
      { request_id: 'm-unpriced', amount_micros: 0, source: 'meter', estimated: false, unpriced: true },
      { request_id: 'r-plain', amount_micros: 10, source: 'record', estimated: false, unpriced: false },
    ];
    const pick = (e: Record<string, unknown>) => ({ request_id: e.request_id, amount_micros: e.amount_micros, source: e.source, estimated: e.estimated, unpriced: e.unpriced });

    const exp = await callApi(base, 'GET', `/v1/usage?account=${acct}&since=${hourAgo()}`, { token: admin });
    expect(exp.status).toBe(200);
    expect(exp.body.entries.map(pick)).toEqual(want);

    const bin = fileURLToPath(new URL('../bin/keygate', import.meta.url));
    const lines = await new Promise<string>((resolve, reject) =>
      execFile(bin, ['usage', 'export', '--since', hourAgo(), '--account', acct], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', KEYGATE_NODE: process.execPath, REDIS_URL: redis.url }, timeout: 60_000 }, (err, out) => (err ? reject(err) : resolve(out))),
    );
    expect(lines.trim().split('\n').map((l) => pick(JSON.parse(l)))).toEqual(want);
  });
});

describe('the default end of the span', () => {
  it('is now, including what was booked in the current millisecond (a CI run once missed a booking made in the same ms)', async () => {
    const acct = `now-${randomBytes(4).toString('hex')}`;
    const key = (await srv.console.createKey({ account: acct, name: 'now' }, CLI_ACTOR)).id;
    await srv.console.recordUsage({ keyId: key, amountMicros: 3, requestId: 'same-ms-1', model: 'gpt-4o', inputTokens: 1, outputTokens: 1 });
    const entries = (await db.xrange(srv.console.schema.usageLog(acct), '-', '+')) as [string, string[]][];
    expect(entries).toHaveLength(1);
    const bookedAt = Number(entries[0]![0].split('-')[0]);
    const since = new Date(bookedAt - 3600_000).toISOString();
    // The request arrives in the very millisecond the booking was written (this process's clock pinned there).
    const now = vi.spyOn(Date, 'now').mockReturnValue(bookedAt);
    try {
      const sum = await callApi(base, 'GET', `/v1/accounts/${acct}/usage?since=${since}&group_by=model`, { token: admin });
      expect(sum.status).toBe(200);
      expect(sum.body.total.requests).toBe(1);
    } finally {
      now.mockRestore();
    }
  });
});
