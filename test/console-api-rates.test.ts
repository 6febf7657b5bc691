/**
 * Who may set which rate over the management API (owners set their keys' rates within their
 * account's, operators set accounts'), against a real console and redis-server: an owner's token
 * cannot set its account's rates, nor a key rate or token rate above the account's, on create or on
 * update; each refusal changes nothing (a byte snapshot of the store). Within the account's rates the
 * owner is served; an operator sets any key rate. Malformed rate bodies (0, negative, a fraction, a
 * string, unit week, an unknown field, too large) get a 400 naming the field and what it must be, on
 * every route that takes rates, and change nothing.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { callApi, useTestConsole, type ApiCallOptions, type ApiResponse } from './helpers/console-api.ts';
import { snapshot } from './helpers/redis-dump.ts';

const MINE = `mine-${randomBytes(4).toString('hex')}`;
let db: Redis;
let srv: ConsoleServer;
let base: string;
let admin: string;
let owner: string;

const fx = useTestConsole(MINE);
beforeAll(async () => {
  ({ db, srv, base, admin, owner } = fx);
  // The account allows 10 requests a second and 1,000 tokens a minute.
  const set = await callApi(base, 'PATCH', `/v1/accounts/${MINE}`, { token: admin, body: { rate: { requests: 10, per: 'second' }, token_rate: { tokens: 1000, per: 'minute' } } });
  expect(set.status, JSON.stringify(set.body)).toBe(200);
});

const asOwner = (method: string, path: string, opts: ApiCallOptions = {}): Promise<ApiResponse> => callApi(base, method, path, { ...opts, token: owner });

/** Runs `act`, expects a refusal with `status` and `code`, and the store byte for byte as before. */
async function refusedUnchanged(act: () => Promise<ApiResponse>, status: number, code: string): Promise<ApiResponse> {
  const before = await snapshot(db);
  const res = await act();
  expect([res.status, res.body?.error?.code], JSON.stringify(res.body)).toEqual([status, code]);
  expect(await snapshot(db)).toEqual(before);
  return res;
}

describe("an owner's token and rates", () => {
  it("cannot set its own account's rates: 403, nothing changed", async () => {
    await refusedUnchanged(() => asOwner('PATCH', `/v1/accounts/${MINE}`, { body: { rate: { requests: 1000, per: 'second' } } }), 403, 'FORBIDDEN');
    await refusedUnchanged(() => asOwner('PATCH', `/v1/accounts/${MINE}`, { body: { token_rate: null } }), 403, 'FORBIDDEN');
    expect((await srv.console.accountInfo(MINE)).rates).toMatchObject({ requests: { count: 10, per: 'second' }, tokens: { count: 1000, per: 'minute' } });
  });

  it("cannot create a key with a request or token rate above the account's: 400 naming the account's rate, nothing changed", async () => {
    const r = await refusedUnchanged(() => asOwner('POST', `/v1/accounts/${MINE}/keys`, { body: { name: 'fast', rate: { requests: 11, per: 'second' } } }), 400, 'INVALID_INPUT');
    expect(JSON.stringify(r.body)).toContain("account's rate");
    const t = await refusedUnchanged(() => asOwner('POST', `/v1/accounts/${MINE}/keys`, { body: { name: 'hungry', token_rate: { tokens: 1001, per: 'minute' } } }), 400, 'INVALID_INPUT');
    expect(JSON.stringify(t.body)).toContain("account's token rate");
  });

  it("cannot raise a key's rate above the account's by update: 400, the key's rates as they were", async () => {
    const made = await asOwner('POST', `/v1/accounts/${MINE}/keys`, { body: { name: 'within', rate: { requests: 5, per: 'second' }, token_rate: { tokens: 500, per: 'minute' } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.rate).toEqual({ requests: 5, per: 'second' });
    await refusedUnchanged(() => asOwner('PATCH', `/v1/keys/${made.body.id}`, { body: { rate: { requests: 11, per: 'second' } } }), 400, 'INVALID_INPUT');
    await refusedUnchanged(() => asOwner('PATCH', `/v1/keys/${made.body.id}`, { body: { name: 'renamed too', token_rate: { tokens: 2000, per: 'minute' } } }), 400, 'INVALID_INPUT');
    const key = await srv.console.getKey(made.body.id);
    expect(key.name).toBe('within');
    expect(key.rates).toMatchObject({ requests: { count: 5, per: 'second' }, tokens: { count: 500, per: 'minute' } });
    // At the account's rate exactly: served.
    const at = await asOwner('PATCH', `/v1/keys/${made.body.id}`, { body: { rate: { requests: 10, per: 'second' } } });
    expect(at.status, JSON.stringify(at.body)).toBe(200);
    expect(at.body.rate).toEqual({ requests: 10, per: 'second' });
  });

  it("an operator's token sets a key rate above the account's (the bound is the owner's)", async () => {
    const made = await callApi(base, 'POST', `/v1/accounts/${MINE}/keys`, { token: admin, body: { name: 'ops-fast', rate: { requests: 50, per: 'second' } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.rate).toEqual({ requests: 50, per: 'second' });
  });
});

describe('malformed rate bodies: 400 naming the field and what it must be, nothing changed', () => {
  const REQUESTS = /^body\.rate\.requests: requests per window must be a whole number from 1 to 1000000000$/;
  const TOKENS = /^body\.token_rate\.tokens: tokens per window must be a whole number from 1 to 1000000000000$/;
  const PER = (f: string) => new RegExp(`^body\\.${f}\\.per: the window must be one of second, minute, hour, day$`);
  const BAD: Array<[string, Record<string, unknown>, RegExp]> = [
    ['0 requests', { rate: { requests: 0, per: 'second' } }, REQUESTS],
    ['negative requests', { rate: { requests: -5, per: 'minute' } }, REQUESTS],
    ['a fraction', { rate: { requests: 2.5, per: 'hour' } }, REQUESTS],
    ['a string count', { rate: { requests: '5', per: 'second' } }, REQUESTS],
    ['too many requests', { rate: { requests: 1_000_000_001, per: 'second' } }, REQUESTS],
    ['unit week', { rate: { requests: 5, per: 'week' } }, PER('rate')],
    ['no unit', { rate: { requests: 5 } }, PER('rate')],
    ['an unknown field in the rate', { rate: { requests: 5, per: 'second', burst: 10 } }, /^body\.rate: unknown field "burst"$/],
    ['an unknown field beside the rate', { rate: { requests: 5, per: 'second' }, rates: 1 }, /^body: unknown field "rates"$/],
    ['0 tokens', { token_rate: { tokens: 0, per: 'day' } }, TOKENS],
    ['too many tokens', { token_rate: { tokens: 1_000_000_000_001, per: 'day' } }, TOKENS],
    ['token unit week', { token_rate: { tokens: 5, per: 'week' } }, PER('token_rate')],
  ];
  let keyId: string;
  beforeAll(async () => {
    const made = await callApi(base, 'POST', `/v1/accounts/${MINE}/keys`, { token: admin, body: { name: 'shape', rate: { requests: 3, per: 'second' } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    keyId = made.body.id;
  });

  for (const [route, method, path, extra] of [
    ['PATCH an account', 'PATCH', () => `/v1/accounts/${MINE}`, {}],
    ['POST a key', 'POST', () => `/v1/accounts/${MINE}/keys`, { name: 'bad' }],
    ['PATCH a key', 'PATCH', () => `/v1/keys/${keyId}`, {}],
  ] as const) {
    it(`${route}: ${BAD.map(([n]) => n).join(', ')}`, async () => {
      for (const [name, body, msg] of BAD) {
        const r = await refusedUnchanged(() => callApi(base, method, path(), { token: admin, body: { ...extra, ...body } }), 400, 'INVALID_INPUT');
        expect(r.body.error.message, name).toMatch(msg);
      }
      expect((await srv.console.getKey(keyId)).rates).toMatchObject({ requests: { count: 3, per: 'second' } });
      expect((await srv.console.accountInfo(MINE)).rates).toMatchObject({ requests: { count: 10, per: 'second' }, tokens: { count: 1000, per: 'minute' } });
    });
  }
});
