/**
 * The management API's races and limits, each attacked over real HTTP against a real redis-server
 * (no sidecar: the store's command counts are the console's alone): parallel rolls, a roll's spend
 * and its slot in the active set, the exact-integer bounds of amounts and totals, a repeated usage
 * request id with another body, a replayed create's audit, the round trips of another account's key
 * id against an unknown one, the usage export's scope and paging, and the per-token rate limit.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { startConsole, type ConsoleServer } from '../src/console-api/main.ts';
import { usageRecordArgs } from '../src/ledger/book.ts';
import { RECORD_USAGE, RECORD_USAGE_KEYS, usageRecordKeys } from '../src/ledger/book-script.ts';
import { usageOf, type PricedBooking } from '../src/metering/booker.ts';
import { MAX_AMOUNT_MICROS, MAX_BALANCE_MICROS, MAX_TOKEN_COUNT, MAX_TOKEN_TOTAL, periodBounds } from '../src/schema/money.ts';
import { rateKeys } from '../src/schema/rates.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { callApi, useTestConsole, type ApiCallOptions, type ApiResponse } from './helpers/console-api.ts';
import type { RedisServer } from './helpers/redis-server.ts';
import { chatRequest, outcomeOf, startStack, startTestSidecar, waitTracking, type TestSidecar } from './helpers/sidecars.ts';

let redis: RedisServer;
let db: Redis;
let srv: ConsoleServer;
let base: string;
let admin: string;
let owner: string;
const OWNED = `owned-${randomBytes(4).toString('hex')}`;

const fx = useTestConsole(OWNED);
beforeAll(() => {
  ({ redis, db, srv, base, admin, owner } = fx);
});

const call = (method: string, path: string, opts: ApiCallOptions = {}): Promise<ApiResponse> =>
  callApi(base, method, path, { ...opts, token: opts.token === undefined ? admin : opts.token });
const acct = () => `acct-${randomBytes(5).toString('hex')}`;
const errOf = (r: ApiResponse) => [r.status, r.body?.error?.code];

async function activeIds(account: string): Promise<string[]> {
  const keys = (await call('GET', `/v1/accounts/${account}/keys`)).body.keys as { id: string; status: string }[];
  return keys.filter((k) => k.status === 'active').map((k) => k.id).sort();
}

describe('rolling a key', () => {
  for (const n of [10, 20]) {
    it(`${n} parallel rolls of one key make exactly one new key; the others answer 409`, async () => {
      const a = acct();
      const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'racy' } });
      const rolls = await Promise.all(Array.from({ length: n }, () => call('POST', `/v1/keys/${c.body.id}/roll`, { body: { grace_seconds: 60 } })));
      const won = rolls.filter((r) => r.status === 201);
      expect(won).toHaveLength(1);
      expect(rolls.filter((r) => r.status === 409)).toHaveLength(n - 1);
      for (const r of rolls.filter((x) => x.status === 409)) expect(r.body.error.code).toBe('REVOKED');
      // One old key (in its grace) and its one successor: nothing else.
      expect(await activeIds(a)).toEqual([c.body.id, won[0]!.body.id].sort());
      const all = (await call('GET', `/v1/accounts/${a}/keys`)).body.keys as unknown[];
      expect(all).toHaveLength(2);
      expect((await call('GET', `/v1/keys/${c.body.id}`)).body.rolled_to).toBe(won[0]!.body.id);
    });
  }

  it('parallel rolls with one Idempotency-Key all answer the same new key', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'retried' } });
    const headers = { 'idempotency-key': `roll-${randomBytes(4).toString('hex')}` };
    const first = await call('POST', `/v1/keys/${c.body.id}/roll`, { body: {}, headers });
    expect(first.status).toBe(201);
    const again = await Promise.all(Array.from({ length: 5 }, () => call('POST', `/v1/keys/${c.body.id}/roll`, { body: {}, headers })));
    for (const r of again) {
      expect(r.status).toBe(201);
      expect(r.body.id).toBe(first.body.id);
      expect(r.body.key).toBe(first.body.key);
    }
    expect(await activeIds(a)).toEqual([first.body.id]);
    // Another body with the same Idempotency-Key is a conflict.
    expect(errOf(await call('POST', `/v1/keys/${c.body.id}/roll`, { body: { grace_seconds: 5 }, headers }))).toEqual([409, 'CONFLICT']);
    // Each replay showed the new key again: each is audited as a reveal of it (the conflict is not).
    const events = (await call('GET', `/v1/audit?account=${a}`)).body.events as { action: string; key_id: string; changes: Record<string, unknown> }[];
    const reveals = events.filter((e) => e.action === 'reveal');
    expect(reveals).toHaveLength(5);
    for (const e of reveals) expect([e.key_id, e.changes]).toEqual([first.body.id, { via: 'idempotent replay' }]);
    expect(events.filter((e) => e.action !== 'reveal').map((e) => e.action)).toEqual(['roll', 'create']);
  });

  it('a grace-0 roll takes the old key out of the active set; a roll at the cap of 100 active keys works', async () => {
    const a = acct();
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push((await call('POST', `/v1/accounts/${a}/keys`, { body: { name: `k${i}` } })).body.id);
    expect(errOf(await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'one too many' } }))).toEqual([422, 'LIMIT_REACHED']);
    const rolled = await call('POST', `/v1/keys/${ids[0]}/roll`);
    expect(rolled.status).toBe(201);
    const set = (await db.smembers(srv.console.schema.accountActiveKeys(a))).sort();
    expect(set).toHaveLength(100);
    expect(set).not.toContain(ids[0]);
    expect(set).toContain(rolled.body.id);
    // With a grace both stay active: at the cap that is refused, and nothing is left behind.
    expect(errOf(await call('POST', `/v1/keys/${ids[1]}/roll`, { body: { grace_seconds: 60 } }))).toEqual([422, 'LIMIT_REACHED']);
    expect(await db.scard(srv.console.schema.accountActiveKeys(a))).toBe(100);
    expect((await call('GET', `/v1/keys/${ids[1]}`)).body.rolled_to).toBeNull();
    expect((await call('GET', `/v1/accounts/${a}/keys?limit=200`)).body.keys).toHaveLength(101);
  });

  it('the roll names the new key: NAME (rolled), (rolled 2)…, or the name asked for (API and library); a bad name changes nothing', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'ci' } });
    const r1 = await call('POST', `/v1/keys/${c.body.id}/roll`, { body: { grace_seconds: 60 } });
    expect([r1.body.name, r1.body.old.name]).toEqual(['ci (rolled)', 'ci']);
    const r2 = await call('POST', `/v1/keys/${r1.body.id}/roll`, { body: { grace_seconds: 60 } });
    expect([r2.body.name, r2.body.old.name]).toEqual(['ci (rolled 2)', 'ci (rolled)']);
    // The name asked for, trimmed like a create's; one too long or empty is refused before anything changes.
    for (const bad of ['x'.repeat(129), '   ', 'a\u202eb']) {
      expect(errOf(await call('POST', `/v1/keys/${r2.body.id}/roll`, { body: { name: bad } }))).toEqual([400, 'INVALID_INPUT']);
    }
    expect((await call('GET', `/v1/keys/${r2.body.id}`)).body).toMatchObject({ status: 'active', rolled_to: null });
    const r3 = await call('POST', `/v1/keys/${r2.body.id}/roll`, { body: { name: '  ci, third  ' } });
    expect(r3.body.name).toBe('ci, third');
    const lib = await srv.console.rollKey(r3.body.id, { name: 'ci from the library' }, CLI_ACTOR);
    expect(lib.record.name).toBe('ci from the library');
    const libDefault = await srv.console.rollKey(lib.id, { graceSeconds: 60 }, CLI_ACTOR);
    expect([libDefault.record.name, libDefault.old.status]).toEqual(['ci from the library (rolled)', 'active']);
    // The longest name: the default is cut to fit.
    const long = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'y'.repeat(128) } });
    const rl = await call('POST', `/v1/keys/${long.body.id}/roll`);
    expect(rl.body.name).toBe(`${'y'.repeat(119)} (rolled)`);
  });

  it("a rolled key carries its predecessor's spend: a key at its total limit stays at it", async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'capped', limit: { amount_micros: 1_000, period: 'total' } } });
    expect((await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 1_000, request_id: 'spent' } })).status).toBe(200);
    const rolled = await call('POST', `/v1/keys/${c.body.id}/roll`);
    expect(rolled.status).toBe(201);
    expect(rolled.body.spend).toEqual({ period: 'total', period_micros: 1_000, total_micros: 1_000 });
    // The sidecars' gate holds the new key's block at once.
    expect(await db.hget(srv.console.schema.gate(a), `limit:${rolled.body.id}`)).toBe('never');
  });
});

describe('exact integers', () => {
  it('a key total that would pass the bound is refused (422 OUT_OF_RANGE); the key stays readable', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'big spender' } });
    const s = srv.console.schema;
    // Nine records of the maximum amount leave room for less than one more.
    await db.hset(s.keySpend(a, c.body.id), 'total', String(MAX_BALANCE_MICROS - 5));
    expect((await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 5, request_id: 'edge' } })).status).toBe(200);
    const over = await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 1, request_id: 'over' } });
    expect(errOf(over)).toEqual([422, 'OUT_OF_RANGE']);
    const k = await call('GET', `/v1/keys/${c.body.id}`);
    expect(k.status).toBe(200);
    expect(k.body.spend.total_micros).toBe(MAX_BALANCE_MICROS);
    expect((await call('GET', `/v1/accounts/${a}/keys`)).status).toBe(200);
  });

  it('ten records of 10^15 micro-units: never a 500, every total exact', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'ten' } });
    const answers: number[] = [];
    for (let i = 0; i < 10; i++) answers.push((await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: MAX_AMOUNT_MICROS, request_id: `r${i}` } })).status);
    expect(answers.filter((s) => s === 200).length).toBe(8);
    expect(answers.slice(8)).toEqual([422, 422]);
    const k = await call('GET', `/v1/keys/${c.body.id}`);
    expect(k.status).toBe(200);
    expect(k.body.spend.total_micros).toBe(8 * MAX_AMOUNT_MICROS);
  });

  it('the wallet ceiling on credits and floor on usage: max is accepted, max+1 refused', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'w' } });
    const s = srv.console.schema;
    expect((await call('POST', `/v1/accounts/${a}/credits`, { body: { amount_micros: 1, reference: 'open' } })).status).toBe(200);
    await db.hset(s.wallet(a), 'balance', String(MAX_BALANCE_MICROS - 3));
    expect((await call('POST', `/v1/accounts/${a}/credits`, { body: { amount_micros: 3, reference: 'to-max' } })).body.balance_micros).toBe(MAX_BALANCE_MICROS);
    const over = await call('POST', `/v1/accounts/${a}/credits`, { body: { amount_micros: 1, reference: 'over' } });
    expect(errOf(over)).toEqual([422, 'OUT_OF_RANGE']);
    expect(await db.hget(s.wallet(a), 'balance')).toBe(String(MAX_BALANCE_MICROS));
    await db.hset(s.wallet(a), 'balance', String(-MAX_BALANCE_MICROS + 3));
    expect((await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 3, request_id: 'to-floor' } })).body.balance_micros).toBe(-MAX_BALANCE_MICROS);
    const under = await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 1, request_id: 'under' } });
    expect(errOf(under)).toEqual([422, 'OUT_OF_RANGE']);
    expect(await db.hget(s.wallet(a), 'balance')).toBe(String(-MAX_BALANCE_MICROS));
  });

  it('a token count of at most 10^12 is taken, one more is refused (400); nothing changes', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'counts' } });
    const max = { key_id: c.body.id, amount_micros: 1, request_id: 'max', input_tokens: MAX_TOKEN_COUNT, output_tokens: MAX_TOKEN_COUNT };
    expect((await call('POST', '/v1/usage', { body: max })).status).toBe(200);
    for (const field of ['input_tokens', 'output_tokens']) {
      const r = await call('POST', '/v1/usage', { body: { ...max, request_id: `over-${field}`, [field]: MAX_TOKEN_COUNT + 1 } });
      expect(errOf(r)).toEqual([400, 'INVALID_INPUT']);
    }
    const k = await call('GET', `/v1/keys/${c.body.id}`);
    expect(k.body.tokens.month).toEqual({ input: MAX_TOKEN_COUNT, output: MAX_TOKEN_COUNT });
    expect(k.body.spend.total_micros).toBe(1);
    await expect(srv.console.recordUsage({ keyId: c.body.id, amountMicros: 1, requestId: 'lib-over', inputTokens: MAX_TOKEN_COUNT + 1 })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });

  for (const whose of ['key', 'account'] as const) {
    it(`the ${whose}'s token totals: a record reaching 2^53 − 1 is booked, one past it is refused (422 OUT_OF_RANGE) and changes nothing`, async () => {
      const a = acct();
      const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'tokens' } });
      const s = srv.console.schema;
      expect((await call('POST', `/v1/accounts/${a}/credits`, { body: { amount_micros: 1_000, reference: 'c' } })).status).toBe(200);
      const now = Date.now();
      const hash = whose === 'key' ? s.tokens(a, c.body.id) : s.tokens(a);
      // This month's input and output already sum to 2^53 − 1 − 10 (today's are lower).
      await db.hset(hash, 'month_start', String(periodBounds('month', now).start), 'month_in', String(MAX_TOKEN_TOTAL - 12), 'month_out', '2');
      const edge = { key_id: c.body.id, amount_micros: 7, request_id: 'edge', input_tokens: 4, output_tokens: 6 };
      expect((await call('POST', '/v1/usage', { body: edge })).status).toBe(200);
      const tokensOf = async () => (whose === 'key' ? (await call('GET', `/v1/keys/${c.body.id}`)).body.tokens : (await call('GET', `/v1/accounts/${a}`)).body.tokens);
      expect((await tokensOf()).month).toEqual({ input: MAX_TOKEN_TOTAL - 8, output: 8 });
      // Everything a record writes: wallet, ledger, spend, log, token counters and token-rate windows.
      const state = async () => ({
        tokens: await tokensOf(),
        wallet: (await call('GET', `/v1/accounts/${a}`)).body.wallet,
        ledger: (await call('GET', `/v1/accounts/${a}/ledger`)).body,
        spend: (await call('GET', `/v1/keys/${c.body.id}`)).body.spend,
        log: await db.xlen(s.usageLog(a)),
        keyTokens: await db.hgetall(s.tokens(a, c.body.id)),
        acctTokens: await db.hgetall(s.tokens(a)),
        rates: await Promise.all([db.hgetall(rateKeys(s).tokens(a, c.body.id)), db.hgetall(rateKeys(s).tokens(a))]),
      });
      const before = await state();
      for (const [i, counts] of [{ input_tokens: 1 }, { output_tokens: 1 }, { input_tokens: 1, output_tokens: 0 }].entries()) {
        const over = await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 7, request_id: `over-${i}`, ...counts } });
        expect(errOf(over)).toEqual([422, 'OUT_OF_RANGE']);
        expect(over.body.error.message).toContain('tokens');
        expect(await db.exists(s.usageRequest(a, `over-${i}`))).toBe(0);
      }
      expect(await state()).toEqual(before);
      expect(before.wallet.balance_micros).toBe(993);
      // A record without counts still books: only the token totals are full.
      expect((await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 7, request_id: 'no-counts' } })).status).toBe(200);
    });
  }

  it('a token-rate window that would pass 2^53 − 1 is refused the same way', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'rated', token_rate: { tokens: 1_000, per: 'day' } } });
    const rec = rateKeys(srv.console.schema).tokens(a, c.body.id);
    expect(await db.hget(rec, 'per')).toBe('day');
    await db.hset(rec, 'w', String(periodBounds('day', Date.now()).start), 'used', String(MAX_TOKEN_TOTAL - 1));
    expect((await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 1, request_id: 'edge', input_tokens: 1 } })).status).toBe(200);
    expect(errOf(await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 1, request_id: 'over', output_tokens: 1 } }))).toEqual([422, 'OUT_OF_RANGE']);
    expect(await db.hget(rec, 'used')).toBe(String(MAX_TOKEN_TOTAL));
  });
});

describe('usage records and the export', () => {
  it('a repeated request id with another amount → 409 with the booked record; the same body → 200 booked: false', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'u' } });
    const first = { key_id: c.body.id, amount_micros: 700, request_id: 'same-id' };
    expect((await call('POST', '/v1/usage', { body: first })).body.booked).toBe(true);
    const same = await call('POST', '/v1/usage', { body: first });
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ booked: false, amount_micros: 700 });
    const other = await call('POST', '/v1/usage', { body: { ...first, amount_micros: 9 } });
    expect(errOf(other)).toEqual([409, 'CONFLICT']);
    expect(other.body.booked).toEqual({ key_id: c.body.id, account: a, request_id: 'same-id', amount_micros: 700, model: null, input_tokens: null, output_tokens: null });
  });

  it('a repeated request id with another model or token counts → 409 with the whole booked record; nothing changes', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'u' } });
    const first = { key_id: c.body.id, amount_micros: 700, request_id: 'same', model: 'openai/gpt-4o', input_tokens: 10, output_tokens: 5 };
    expect((await call('POST', '/v1/usage', { body: first })).body.booked).toBe(true);
    const booked = { key_id: c.body.id, account: a, request_id: 'same', amount_micros: 700, model: 'openai/gpt-4o', input_tokens: 10, output_tokens: 5 };
    const before = { log: await db.xlen(srv.console.schema.usageLog(a)), key: (await call('GET', `/v1/keys/${c.body.id}`)).body };
    for (const change of [{ model: 'anthropic/claude-opus' }, { model: null }, { input_tokens: 11 }, { output_tokens: 0 }, { output_tokens: null }, { input_tokens: 5, output_tokens: 10 }]) {
      const r = await call('POST', '/v1/usage', { body: { ...first, ...change } });
      expect(errOf(r)).toEqual([409, 'CONFLICT']);
      expect(r.body.booked).toEqual(booked);
    }
    await expect(srv.console.recordUsage({ keyId: c.body.id, amountMicros: 700, requestId: 'same', model: 'openai/gpt-4o', inputTokens: 10 })).rejects.toMatchObject({
      code: 'CONFLICT',
      booked: { keyId: c.body.id, account: a, requestId: 'same', amountMicros: 700, model: 'openai/gpt-4o', inputTokens: 10, outputTokens: 5 },
    });
    const same = await call('POST', '/v1/usage', { body: first });
    expect([same.status, same.body.booked]).toEqual([200, false]);
    expect({ log: await db.xlen(srv.console.schema.usageLog(a)), key: (await call('GET', `/v1/keys/${c.body.id}`)).body }).toEqual(before);
  });

  it('a request id booked by an earlier version ("keyId:amount" kept) is compared on key and amount only', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'earlier' } });
    await db.set(srv.console.schema.usageRequest(a, 'earlier-1'), `${c.body.id}:500`, 'EX', 600);
    const same = await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 500, request_id: 'earlier-1', model: 'openai/gpt-4o', input_tokens: 3 } });
    expect([same.status, same.body.booked]).toEqual([200, false]);
    const other = await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 501, request_id: 'earlier-1' } });
    expect(errOf(other)).toEqual([409, 'CONFLICT']);
    expect(other.body.booked).toEqual({ key_id: c.body.id, account: a, request_id: 'earlier-1', amount_micros: 500, model: null, input_tokens: null, output_tokens: null });
    expect(await db.xlen(srv.console.schema.usageLog(a))).toBe(0);
  });

  it('a router recording a request that metering booked, with the same key, amount, model and counts, is a plain retry (200 booked: false)', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'metered' } });
    const s = srv.console.schema;
    // The booking metering writes (src/metering/booker.ts through src/ledger/book.ts): every token count given, cache and reasoning counts 0.
    const booking = { key_id: c.body.id, account: a, request_id: 'metered-1', model: 'openai/gpt-4o', input_tokens: 10, output_tokens: 5, cached_input_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 0, estimated: false };
    const args = usageRecordArgs(usageOf({ booking, amountMicros: 100, unpriced: false, endedAt: Date.now() } as PricedBooking), { idempotencySeconds: 600, logMaxEntries: 1000 });
    expect(((await db.eval(RECORD_USAGE, RECORD_USAGE_KEYS, ...usageRecordKeys(s, a, c.body.id, 'metered-1'), ...args)) as unknown[])[0]).toBe('OK');
    const before = { log: await db.xlen(s.usageLog(a)), key: (await call('GET', `/v1/keys/${c.body.id}`)).body };
    const same = await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 100, request_id: 'metered-1', model: 'openai/gpt-4o', input_tokens: 10, output_tokens: 5 } });
    expect([same.status, same.body.booked]).toEqual([200, false]);
    // Another count is still a conflict.
    expect(errOf(await call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 100, request_id: 'metered-1', model: 'openai/gpt-4o', input_tokens: 11, output_tokens: 5 } }))).toEqual([409, 'CONFLICT']);
    expect({ log: await db.xlen(s.usageLog(a)), key: (await call('GET', `/v1/keys/${c.body.id}`)).body }).toEqual(before);
  });

  it('an account-scoped token without ?account= gets its own account’s entries only', async () => {
    const since = new Date(Date.now() - 60_000).toISOString();
    const mine = await call('POST', `/v1/accounts/${OWNED}/keys`, { body: { name: 'mine' } });
    const theirs = await call('POST', `/v1/accounts/${acct()}/keys`, { body: { name: 'theirs' } });
    await call('POST', '/v1/usage', { body: { key_id: mine.body.id, amount_micros: 1, request_id: 'mine-1' } });
    await call('POST', '/v1/usage', { body: { key_id: theirs.body.id, amount_micros: 1, request_id: 'theirs-1' } });
    const r = await call('GET', `/v1/usage?since=${since}`, { token: owner });
    expect(r.status).toBe(200);
    expect(r.body.entries.map((e: any) => [e.account, e.request_id])).toEqual([[OWNED, 'mine-1']]);
    // The all-accounts token sees both.
    const all = await call('GET', `/v1/usage?since=${since}`);
    expect(all.body.entries.map((e: any) => e.request_id).filter((id: string) => /^(mine|theirs)-1$/.test(id)).sort()).toEqual(['mine-1', 'theirs-1']);
  });

  it('the export goes past its first page of 500 entries', async () => {
    const a = acct();
    const c = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'many' } });
    const since = new Date(Date.now() - 60_000).toISOString();
    for (let i = 0; i < 1_203; i += 100) {
      await Promise.all(
        Array.from({ length: Math.min(100, 1_203 - i) }, (_, j) => call('POST', '/v1/usage', { body: { key_id: c.body.id, amount_micros: 1, request_id: `p-${i + j}` } })),
      );
    }
    const r = await call('GET', `/v1/usage?account=${a}&since=${since}&limit=10000`);
    expect(r.body.more).toBe(false);
    expect(r.body.entries).toHaveLength(1_203);
    expect(new Set(r.body.entries.map((e: any) => e.request_id)).size).toBe(1_203);
    const lib: string[] = [];
    for await (const e of srv.console.exportUsage({ since: Date.parse(since), account: a })) lib.push(e.requestId);
    expect(lib).toHaveLength(1_203);
  }, 60_000);
});

describe('audit and disclosure', () => {
  it('a replayed create (same Idempotency-Key) is audited as a reveal', async () => {
    const a = acct();
    const headers = { 'idempotency-key': `create-${randomBytes(4).toString('hex')}` };
    const c1 = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'once' }, headers });
    const c2 = await call('POST', `/v1/accounts/${a}/keys`, { body: { name: 'once' }, headers });
    expect(c2.body.key).toBe(c1.body.key);
    const events = (await call('GET', `/v1/audit?account=${a}`)).body.events as { action: string; key_id: string; changes: Record<string, unknown> }[];
    expect(events.map((e) => [e.action, e.key_id])).toEqual([
      ['reveal', c1.body.id],
      ['create', c1.body.id],
    ]);
    expect(events[0]!.changes).toEqual({ via: 'idempotent replay' });
  });

  it("another account's key id costs the same Redis commands as an unknown id", async () => {
    const other = await call('POST', `/v1/accounts/${acct()}/keys`, { body: { name: 'not yours' } });
    const unknown = `key_${'Z'.repeat(24)}`;
    const total = async () => {
      const info = await db.info('commandstats');
      let n = 0;
      for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) if (m[1] !== 'info') n += Number(m[2]);
      return n;
    };
    // The console's webhook worker polls the same Redis about once a second, adding commands now and
    // then: it can only add, so the fewest commands over three calls is the call's own cost.
    const cost = async (path: string, method = 'GET') => {
      await call(method, path, { token: owner }); // warm (script cache, connections)
      let fewest = Infinity;
      for (let i = 0; i < 3; i++) {
        const before = await total();
        const r = await call(method, path, { token: owner });
        expect(errOf(r)).toEqual([404, 'NOT_FOUND']);
        fewest = Math.min(fewest, (await total()) - before);
      }
      return fewest;
    };
    for (const [method, suffix] of [['GET', ''], ['POST', '/reveal'], ['POST', '/revoke']] as const) {
      const a = await cost(`/v1/keys/${other.body.id}${suffix}`, method);
      const b = await cost(`/v1/keys/${unknown}${suffix}`, method);
      expect([method, suffix, a]).toEqual([method, suffix, b]);
    }
  });
});

describe('rate limits', () => {
  let small: ConsoleServer;
  let smallBase: string;
  let op: string;
  let own: string;
  beforeAll(async () => {
    const config = loadConsoleApiConfig({ port: 0, redisUrl: redis.url }, { KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_CONSOLE_RATE_LIMIT: '30' });
    small = await startConsole(config, createLogger('silent'), { revealKey: `k1:${randomBytes(32).toString('base64')}` });
    smallBase = `http://127.0.0.1:${small.port}`;
    op = (await small.console.createToken({ name: 'router', account: null }, CLI_ACTOR)).token;
    own = (await small.console.createToken({ name: 'reader', account: OWNED }, CLI_ACTOR)).token;
  });
  afterAll(async () => {
    await small?.close();
  });

  /** A 429 RATE_LIMITED that says when to come back: `retry-after` in whole seconds, within the minute's window. */
  function expectTooMany(r: ApiResponse): void {
    expect([r.status, r.body?.error?.code]).toEqual([429, 'RATE_LIMITED']);
    const retry = Number(r.headers.get('retry-after'));
    expect(Number.isInteger(retry), `retry-after ${r.headers.get('retry-after')}`).toBe(true);
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
  }

  it("one token's reads do not starve another's, and usage records are not in the readers' bucket", async () => {
    const k = await callApi(smallBase, 'POST', `/v1/accounts/${OWNED}/keys`, { token: op, body: { name: 'billed' } });
    for (let i = 0; i < 30; i++) await callApi(smallBase, 'GET', `/v1/accounts/${OWNED}`, { token: own });
    const limited = await callApi(smallBase, 'GET', `/v1/accounts/${OWNED}`, { token: own });
    expectTooMany(limited);
    // The operator's own bucket is untouched by the owner's reads.
    expect((await callApi(smallBase, 'GET', `/v1/accounts/${OWNED}`, { token: op })).status).toBe(200);
    // Book-keeping writes have their own, larger bucket: 100 records after the reads all pass.
    const booked = await Promise.all(
      Array.from({ length: 100 }, (_, i) => callApi(smallBase, 'POST', '/v1/usage', { token: op, body: { key_id: k.body.id, amount_micros: 1, request_id: `rl-${i}` } })),
    );
    expect(booked.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
    // Before authentication: per address.
    const anon: ApiResponse[] = [];
    for (let i = 0; i < 31; i++) anon.push(await callApi(smallBase, 'GET', `/v1/accounts/${OWNED}`, { token: 'kgmt_bogus' }));
    expect(anon.slice(0, 30).every((r) => r.status === 401)).toBe(true);
    expectTooMany(anon[30]!);
  });
});

/** A sidecar's first answer (`'allow'` or the deny code) that is not a store timeout (a loaded machine can miss the deadline: not the answer under test). */
async function answer(sc: TestSidecar, key: string, model = 'openai/gpt-4o'): Promise<string> {
  let code = 'AUTH_UNAVAILABLE';
  for (let i = 0; i < 5 && code === 'AUTH_UNAVAILABLE'; i++) code = outcomeOf(await sc.client.check(chatRequest(key, model)));
  return code;
}

describe('wallet.enforced', () => {
  async function consoleOn(redisUrl: string, requireWallet: boolean) {
    const config = loadConsoleApiConfig({ port: 0, redisUrl }, { KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_REQUIRE_WALLET: String(requireWallet) });
    const c = await startConsole(config, createLogger('silent'), { revealKey: `k1:${randomBytes(32).toString('base64')}` });
    const op = (await c.console.createToken({ name: 'ops', account: null }, CLI_ACTOR)).token;
    return { c, wallet: async (a: string) => (await callApi(`http://127.0.0.1:${c.port}`, 'GET', `/v1/accounts/${a}`, { token: op })).body.wallet };
  }

  it("reports the rule the live sidecars apply, not the console's own setting: sidecars requiring wallets, a console that does not", async () => {
    const stack = await startStack({ requireWallet: true });
    const { c, wallet } = await consoleOn(stack.redis.url, false);
    try {
      const a = acct();
      const k = await c.console.createKey({ account: a, name: 'strict' }, CLI_ACTOR);
      expect(await answer(stack, k.key)).toBe('INSUFFICIENT_BALANCE');
      expect(await wallet(a)).toEqual({ enforced: true, balance_micros: 0, exists: false, rule: 'required' });
      expect((await c.console.accountInfo(a)).wallet).toEqual({ enforced: true, balance_micros: 0, rule: 'required' });
      // A credited account is enforced by every sidecar whatever the setting.
      await c.console.creditAccount(a, 5, 'c1');
      expect(await wallet(a)).toEqual({ enforced: true, balance_micros: 5, exists: true, rule: 'credited' });
    } finally {
      await c.close();
      await stack.close();
    }
  });

  it('a console requiring wallets before sidecars that do not says not enforced; sidecars that differ say mixed; none live: the console’s own setting', async () => {
    const stack = await startStack({ requireWallet: false });
    const { c, wallet } = await consoleOn(stack.redis.url, true);
    let strict: TestSidecar | null = null;
    try {
      const a = acct();
      const k = await c.console.createKey({ account: a, name: 'lenient' }, CLI_ACTOR);
      expect(await answer(stack, k.key)).toBe('allow');
      expect(await wallet(a)).toEqual({ enforced: false, balance_micros: 0, exists: false, rule: 'not-required' });
      strict = await startTestSidecar(stack.redis.url, { requireWallet: true });
      expect(await answer(strict, k.key)).toBe('INSUFFICIENT_BALANCE');
      expect(await wallet(a)).toEqual({ enforced: true, balance_micros: 0, exists: false, rule: 'mixed' });
      await strict.close();
      strict = null;
      expect(await wallet(a)).toEqual({ enforced: false, balance_micros: 0, exists: false, rule: 'not-required' });
      await stack.sidecar.close();
      expect(await wallet(a)).toEqual({ enforced: true, balance_micros: 0, exists: false, rule: 'unreported' });
    } finally {
      await strict?.close();
      await c.close();
      await stack.close();
    }
  });
});

describe('bare_models', () => {
  const none = { rule: 'none', provider: null };

  it('tells how the live sidecars read a plain model name, per entry family: one provider, none, mixed, unreported (the API and the library)', async () => {
    const stack = await startStack({ bareModelProviders: 'google=vertex, openai=OpenAI' });
    const config = loadConsoleApiConfig({ port: 0, redisUrl: stack.redis.url }, { KEYGATE_CONSOLE_HOST: '127.0.0.1' });
    const c = await startConsole(config, createLogger('silent'), { revealKey: `k1:${randomBytes(32).toString('base64')}` });
    let plain: TestSidecar | null = null;
    try {
      const op = (await c.console.createToken({ name: 'ops', account: null }, CLI_ACTOR)).token;
      const bare = async (a: string) => (await callApi(`http://127.0.0.1:${c.port}`, 'GET', `/v1/accounts/${a}`, { token: op })).body.bare_models;
      const a = acct();
      const k = await c.console.createKey({ account: a, name: 'mini', models: ['openai/gpt-4o-mini'] }, CLI_ACTOR);
      // The record holds the mapping in canonical form (families in a fixed order, providers in lower case).
      expect(Object.values(await stack.db.hgetall(c.console.schema.sidecars()))).toEqual([expect.stringMatching(/^0 openai=openai,google=vertex \d+$/)]);
      expect(await answer(stack, k.key, 'gpt-4o-mini')).toBe('allow');
      const one = { openai: { rule: 'provider', provider: 'openai' }, anthropic: none, google: { rule: 'provider', provider: 'vertex' } };
      expect(await bare(a)).toEqual(one);
      expect(await c.console.bareModels()).toEqual(one);

      plain = await startTestSidecar(stack.redis.url);
      // Its store linked first: a loaded CI run once answered a cold lookup AUTH_UNAVAILABLE here (the lookup deadline).
      await waitTracking(plain);
      expect(await answer(plain, k.key, 'gpt-4o-mini')).toBe('MODEL_NOT_ALLOWED');
      const mixed = { openai: { rule: 'mixed', provider: null }, anthropic: none, google: { rule: 'mixed', provider: null } };
      expect(await bare(a)).toEqual(mixed);
      expect(await c.console.bareModels()).toEqual(mixed);

      await stack.sidecar.close();
      expect(await bare(a)).toEqual({ openai: none, anthropic: none, google: none });

      // A live sidecar whose mapping this console cannot read (a family of a later version): what it does is not known.
      const [secs] = await stack.db.time();
      await stack.db.hset(c.console.schema.sidecars(), 'later', `1 openai=openai,mistral=mistral ${Number(secs) * 1000 + 30_000}`);
      const differ = { rule: 'mixed', provider: null };
      expect(await bare(a)).toEqual({ openai: differ, anthropic: differ, google: differ });
      await plain.close();
      plain = null;
      const unreported = { rule: 'unreported', provider: null };
      expect(await bare(a)).toEqual({ openai: unreported, anthropic: unreported, google: unreported });
      await stack.db.hdel(c.console.schema.sidecars(), 'later');
      expect(await c.console.bareModels()).toEqual({ openai: unreported, anthropic: unreported, google: unreported });
    } finally {
      await plain?.close();
      await c.close();
      await stack.close();
    }
  });
});
