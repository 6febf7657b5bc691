/**
 * Rate limits through the sidecar (docs/rate-limits.md): a key limited to 5/s gets its sixth request
 * in a second refused with a 429 in each family's shape over gRPC and HTTP, with `retry-after` and
 * `retry-after-ms` and without `x-should-retry: false`; allowed answers carry the `x-ratelimit-*`
 * headers and `total_limit` metadata; keys without rates cost no Redis command per request (counted
 * by the server's command statistics); an account rate holds across its keys; a token rate stops a
 * key after usage records with tokens; a 429 for several used-up rates waits for the latest of them;
 * a window's use says how much of it is reserved ahead in leases; requests refused by the model
 * rule, the wallet, the spend limit, expiry or a token block count against no request window; two
 * sidecars together hold a 100/s limit within its bound; the settings refuse bad values and change
 * nothing.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { rateArgs } from '../src/cli/console-commands.ts';
import { KeyConsole } from '../src/console/service.ts';
import { parseRateText, rateKeys, RequestWindowField, type Rate } from '../src/schema/rates.ts';
import { deniedBody, deniedHeaders, responseHeadersToAdd, type CheckResponseMsg } from './helpers/envoy-client.ts';
import { send } from './helpers/http-client.ts';
import { awayFromWindowEnd, nextSecond } from './helpers/rate-window.ts';
import { chatRequest, outcomeOf, startSharedPair, startTestSidecar, waitFor, type SharedPair, type TestSidecar } from './helpers/sidecars.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
let pair: SharedPair;
let db: Redis;
let kc: KeyConsole;
let a: TestSidecar;
let b: TestSidecar;

const rate = (t: string, kind: 'requests' | 'tokens' = 'requests'): Rate => {
  const r = parseRateText(t, kind);
  if ('error' in r) throw new Error(r.error);
  return r;
};
const acct = () => `acct-${randomBytes(4).toString('hex')}`;
let seq = 0;
const rid = () => `req-${++seq}-${randomBytes(3).toString('hex')}`;

beforeAll(async () => {
  pair = await startSharedPair({ stalenessBoundMs: 10_000, countUsage: false });
  ({ db, a, b } = pair);
  kc = new KeyConsole({ redis: pair.redis.url, revealKey: REVEAL });
});

afterAll(async () => {
  await kc?.close();
  await pair?.close();
});

/** Waits for the start of the next second (plus `offsetMs`), so a burst stays inside one 1 s window. */
const FAMILIES = [
  { family: 'openai', path: '/v1/chat/completions', type: (body: any) => body.error.type, want: 'rate_limit_error', code: (body: any) => body.error.code },
  { family: 'anthropic', path: '/v1/messages', type: (body: any) => body.error.type, want: 'rate_limit_error', code: (body: any) => body.error.code },
  { family: 'google', path: '/v1beta/models/gemini-2.0-flash:generateContent', type: (body: any) => body.error.status, want: 'RESOURCE_EXHAUSTED', code: (body: any) => body.error.details[0].reason },
] as const;

describe('a key limited to 5/s', () => {
  for (const f of FAMILIES) {
    it(`${f.family}: the sixth request in a second is refused with a 429 over gRPC and over HTTP`, async () => {
      for (let attempt = 0; ; attempt++) {
        const k = await kc.createKey({ account: acct(), name: 'r', rates: { requests: rate('5/s') } });
        const sec = await nextSecond();
        const grpc: CheckResponseMsg[] = [];
        for (let i = 0; i < 6; i++) grpc.push(await a.client.check({ path: f.path, headers: { 'x-api-key': k.key } }));
        const k2 = await kc.createKey({ account: acct(), name: 'r2', rates: { requests: rate('5/s') } });
        const http = [];
        for (let i = 0; i < 6; i++) http.push(await send(a.sidecar.httpPort, { method: 'POST', path: `/authz${f.path}`, headers: { 'x-api-key': k2.key } }));
        if (Math.floor(Date.now() / 1000) !== sec) {
          if (attempt < 3) continue; // the burst crossed a window on a slow machine: again
          throw new Error('could not send 6 requests within one second');
        }
        expect(grpc.slice(0, 5).map(outcomeOf)).toEqual(Array(5).fill('allow'));
        const denied = grpc[5]!;
        expect(denied.status?.code).toBe(8); // RESOURCE_EXHAUSTED
        expect(denied.denied_response?.status?.code).toBe(429);
        const body = deniedBody(denied);
        expect(f.type(body)).toBe(f.want);
        expect(f.code(body)).toBe('RATE_LIMITED');
        const h = deniedHeaders(denied);
        expect(h['x-should-retry']).toBeUndefined();
        expect(Number(h['retry-after'])).toBe(1);
        expect(Number(h['retry-after-ms'])).toBeGreaterThanOrEqual(1);
        expect(Number(h['retry-after-ms'])).toBeLessThanOrEqual(1000);
        expect(JSON.stringify(body)).toContain('key request rate 5/s');

        expect(http.slice(0, 5).map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
        expect(http[5]!.status).toBe(429);
        expect(http[5]!.headers['x-should-retry']).toBeUndefined();
        expect(http[5]!.headers['retry-after']).toBe('1');
        expect(f.code(JSON.parse(http[5]!.body))).toBe('RATE_LIMITED');
        return;
      }
    });
  }

  it('allowed answers carry x-ratelimit-* (gRPC response_headers_to_add and HTTP) and total_limit metadata', async () => {
    const k = await kc.createKey({ account: acct(), name: 'h', rates: { requests: rate('5/s') } });
    await nextSecond();
    const res = await a.client.check(chatRequest(k.key));
    expect(outcomeOf(res)).toBe('allow');
    const h = responseHeadersToAdd(res);
    expect(h['x-ratelimit-limit-requests']).toBe('5');
    expect(Number(h['x-ratelimit-remaining-requests'])).toBe(4);
    expect(h['x-ratelimit-reset-requests']).toMatch(/^(\d+ms|1s)$/);
    const tl = res.dynamic_metadata?.fields?.total_limit?.structValue?.fields;
    expect(tl?.requests_per_unit?.numberValue).toBe(5);
    expect(tl?.unit?.stringValue).toBe('SECOND');
    const second = responseHeadersToAdd(await a.client.check(chatRequest(k.key)));
    expect(second['x-ratelimit-remaining-requests']).toBe('3'); // not a stale cached frame
    const http = await send(a.sidecar.httpPort, { method: 'POST', path: '/authz/v1/chat/completions', headers: { 'x-api-key': k.key } });
    expect(http.status).toBe(200);
    expect(http.headers['x-ratelimit-limit-requests']).toBe('5');
    expect(http.headers['x-ratelimit-remaining-requests']).toBe('2');
  });

  it('a token-rate key carries x-ratelimit-*-tokens from its very first allowed request (gRPC and HTTP): the limit from its record, a window not read yet whole', async () => {
    const onlyTokens = await kc.createKey({ account: acct(), name: 'tok', rates: { tokens: rate('1000/h', 'tokens') } });
    const first = await a.client.check(chatRequest(onlyTokens.key));
    expect(outcomeOf(first)).toBe('allow');
    const h = responseHeadersToAdd(first);
    expect(h['x-ratelimit-limit-tokens']).toBe('1000');
    expect(h['x-ratelimit-remaining-tokens']).toBe('1000');
    expect(h['x-ratelimit-reset-tokens']).toMatch(/^(\d+m)?\d+(\.\d+)?s$|^\d+ms$/);
    expect(h['x-ratelimit-limit-requests']).toBeUndefined();
    const both = await kc.createKey({ account: acct(), name: 'both', rates: { requests: rate('5/s'), tokens: rate('2000/h', 'tokens') } });
    const http = await send(b.sidecar.httpPort, { method: 'POST', path: '/authz/v1/chat/completions', headers: { 'x-api-key': both.key } });
    expect(http.status).toBe(200);
    expect(http.headers['x-ratelimit-limit-tokens']).toBe('2000');
    expect(http.headers['x-ratelimit-remaining-tokens']).toBe('2000');
    expect(http.headers['x-ratelimit-limit-requests']).toBe('5');
    // an account's token rate, for a key of its own without rates: the same
    const account = acct();
    await kc.setAccountRates(account, { tokens: rate('3000/h', 'tokens') });
    const plain = await kc.createKey({ account, name: 'plain' });
    const viaAccount = responseHeadersToAdd(await a.client.check(chatRequest(plain.key)));
    expect([viaAccount['x-ratelimit-limit-tokens'], viaAccount['x-ratelimit-remaining-tokens']]).toEqual(['3000', '3000']);
    // booked tokens show once the window has been read (in the background, at most once a second)
    await kc.recordUsage({ keyId: onlyTokens.id, amountMicros: 1, requestId: rid(), inputTokens: 300, outputTokens: 100 });
    await waitFor(async () => responseHeadersToAdd(await a.client.check(chatRequest(onlyTokens.key)))['x-ratelimit-remaining-tokens'] === '600', 'the booked tokens in the header', 5000);
  });

  it('a key without rates has none of them, and its allow is the cached frame', async () => {
    const k = await kc.createKey({ account: acct(), name: 'plain' });
    const res = await a.client.check(chatRequest(k.key));
    expect(outcomeOf(res)).toBe('allow');
    expect(res.ok_response?.response_headers_to_add ?? []).toEqual([]);
    expect(res.dynamic_metadata?.fields?.total_limit).toBeUndefined();
  });
});

/** Calls of the given commands the Redis server has run (INFO commandstats). */
async function calls(commands: string[]): Promise<number> {
  const info = await db.info('commandstats');
  let n = 0;
  for (const c of commands) {
    const m = new RegExp(`cmdstat_${c}:calls=(\\d+)`).exec(info);
    if (m) n += Number(m[1]);
  }
  return n;
}
const DATA_COMMANDS = ['evalsha', 'eval', 'hmget', 'hget', 'hgetall', 'hset', 'fcall'];

describe('cost', () => {
  it('a cached key without rates costs no Redis command per request; a rated key (the control) does', async () => {
    const plain = await kc.createKey({ account: acct(), name: 'plain' });
    const rated = await kc.createKey({ account: acct(), name: 'rated', rates: { requests: rate('50/m') } });
    for (const k of [plain, rated]) for (let i = 0; i < 2; i++) expect(outcomeOf(await b.client.check(chatRequest(k.key)))).toBe('allow');
    const before = await calls(DATA_COMMANDS);
    for (let i = 0; i < 200; i++) expect(outcomeOf(await b.client.check(chatRequest(plain.key)))).toBe('allow');
    const afterPlain = await calls(DATA_COMMANDS);
    expect(afterPlain - before).toBe(0);
    for (let i = 0; i < 20; i++) await b.client.check(chatRequest(rated.key));
    const afterRated = await calls(DATA_COMMANDS);
    expect(afterRated - afterPlain).toBeGreaterThanOrEqual(20); // exact below 100: one TAKE per request
  });
});

describe('the grpc-js transport', () => {
  it('the same allow headers, total_limit metadata and 429', async () => {
    const g = await startTestSidecar(pair.redis.url, { grpcTransport: 'grpc-js', countUsage: false, stalenessBoundMs: 10_000 });
    try {
      const k = await kc.createKey({ account: acct(), name: 'gj', rates: { requests: rate('2/h') } });
      const first = await g.client.check(chatRequest(k.key));
      expect(responseHeadersToAdd(first)['x-ratelimit-limit-requests']).toBe('2');
      const tl = first.dynamic_metadata?.fields?.total_limit?.structValue?.fields;
      expect([tl?.requests_per_unit?.numberValue, tl?.unit?.stringValue]).toEqual([2, 'HOUR']);
      await g.client.check(chatRequest(k.key));
      const third = await g.client.check(chatRequest(k.key));
      expect(third.denied_response?.status?.code).toBe(429);
      expect(Number(deniedHeaders(third)['retry-after'])).toBeGreaterThanOrEqual(1);
    } finally {
      await g.close();
    }
  });
});

describe('account rates and token rates', () => {
  it("an account's rate holds across its keys (3/m for two keys), and refuses in the account's name", async () => {
    const account = acct();
    const k1 = await kc.createKey({ account, name: 'a1' });
    const k2 = await kc.createKey({ account, name: 'a2' });
    await kc.setAccountRates(account, { requests: rate('3/m') });
    const out: string[] = [];
    for (const k of [k1, k2, k1, k2, k1]) out.push(outcomeOf(await a.client.check(chatRequest(k.key))));
    // (a minute boundary in the middle of this burst would give more: very unlikely, and then the window reset explains it)
    expect(out.filter((o) => o === 'allow').length).toBe(3);
    const last = await a.client.check(chatRequest(k2.key));
    expect(JSON.stringify(deniedBody(last))).toContain('account request rate 3/m');
  });

  it('a token rate stops a key after usage records with tokens; raising it lifts the block at once', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 't', rates: { tokens: rate('1000/h', 'tokens') } });
    expect(outcomeOf(await a.client.check(chatRequest(k.key)))).toBe('allow');
    await kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid(), inputTokens: 400, outputTokens: 200 });
    expect(outcomeOf(await a.client.check(chatRequest(k.key)))).toBe('allow');
    await kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid(), inputTokens: 300, outputTokens: 100 });
    await waitFor(async () => outcomeOf(await a.client.check(chatRequest(k.key))) === 'RATE_LIMITED', 'the token block at the sidecar', 5000);
    const denied = await b.client.check(chatRequest(k.key));
    expect(outcomeOf(denied)).toBe('RATE_LIMITED');
    expect(JSON.stringify(deniedBody(denied))).toContain('key token rate 1000/h');
    expect(Number(deniedHeaders(denied)['retry-after'])).toBeGreaterThan(0);
    const view = await kc.getKeyView(k.id);
    expect(view.rateUse.tokens?.used).toBe(1000);
    await kc.updateKey(k.id, { rates: { tokens: rate('5000/h', 'tokens') } });
    await waitFor(async () => outcomeOf(await a.client.check(chatRequest(k.key))) === 'allow', 'the block lifted', 5000);
  });
});

describe('several used-up rates', () => {
  const DAY = 86_400_000;
  /** A 429's wait agrees with the end of the current UTC day (the latest window that refuses), and names `name`. */
  const waitsForDayEnd = (res: CheckResponseMsg, name: string) => {
    const now = Date.now();
    const toDayEnd = (Math.floor(now / DAY) + 1) * DAY - now;
    expect(outcomeOf(res)).toBe('RATE_LIMITED');
    expect(JSON.stringify(deniedBody(res))).toContain(name);
    const h = deniedHeaders(res);
    const ms = Number(h['retry-after-ms']);
    expect(ms).toBeGreaterThan(toDayEnd - 3000);
    expect(ms).toBeLessThanOrEqual(toDayEnd + 1000);
    expect(Number(h['retry-after'])).toBe(Math.ceil(ms / 1000));
    expect(JSON.stringify(deniedBody(res))).toContain(`Retry after ${h['retry-after']} s`);
  };

  it('key 2/s and account 3/d both used up: retry-after waits for the day to end (the sidecar that saw it, and one that asks Redis)', async () => {
    await awayFromWindowEnd('day');
    for (let attempt = 0; ; attempt++) {
      const account = acct();
      const other = await kc.createKey({ account, name: 'other' });
      const k = await kc.createKey({ account, name: 'k', rates: { requests: rate('2/s') } });
      await kc.setAccountRates(account, { requests: rate('3/d') });
      expect(outcomeOf(await a.client.check(chatRequest(other.key)))).toBe('allow'); // the account: 1 of 3
      const sec = await nextSecond();
      const out = [];
      for (let i = 0; i < 3; i++) out.push(await a.client.check(chatRequest(k.key)));
      out.push(await b.client.check(chatRequest(k.key)));
      if (Math.floor(Date.now() / 1000) !== sec) {
        if (attempt < 3) continue;
        throw new Error('could not send 4 requests within one second');
      }
      expect(out.slice(0, 2).map(outcomeOf)).toEqual(['allow', 'allow']); // the key: 2 of 2, the account: 3 of 3
      waitsForDayEnd(out[2]!, 'key request rate 2/s'); // a knew both windows were used up
      waitsForDayEnd(out[3]!, 'key request rate 2/s'); // b learnt it from its TAKE
      return;
    }
  });

  it('a key token block (per minute) and its account request rate 3/d used up: retry-after waits for the day to end', async () => {
    await awayFromWindowEnd('day');
    const account = acct();
    const other = await kc.createKey({ account, name: 'other' });
    const k = await kc.createKey({ account, name: 't', rates: { tokens: rate('1000/m', 'tokens') } });
    await kc.setAccountRates(account, { requests: rate('3/d') });
    for (let i = 0; i < 3; i++) expect(outcomeOf(await a.client.check(chatRequest(other.key)))).toBe('allow');
    expect(JSON.stringify(deniedBody(await a.client.check(chatRequest(k.key))))).toContain('account request rate 3/d');
    await kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid(), inputTokens: 600, outputTokens: 400 });
    let last!: CheckResponseMsg;
    await waitFor(async () => {
      last = await a.client.check(chatRequest(k.key));
      return JSON.stringify(deniedBody(last)).includes('key token rate 1000/m');
    }, 'the token block at the sidecar', 5000);
    waitsForDayEnd(last, 'key token rate 1000/m');
  });
});

describe("a window's use", () => {
  it('a 1000/h key after 3 requests: used counts the units reserved ahead, held says how many; exactly 3 once the lease is given back', async () => {
    await awayFromWindowEnd('hour');
    const account = acct();
    const k = await kc.createKey({ account, name: 'use', rates: { requests: rate('1000/h') } });
    for (let i = 0; i < 3; i++) expect(outcomeOf(await a.client.check(chatRequest(k.key)))).toBe('allow');
    // The first request was counted with a lease of 25 units (half the pool of 50), which paid for
    // requests 2 and 3: the window counts 26, 25 of them held by the sidecar — unless the lease was
    // given back already ([3, 0]), or went back idle between two requests on a slow machine and the
    // next took a new one ([28, 25]). Whatever the timing, the 3 allowed lie in [used − held, used].
    const busy = (await kc.getKeyView(k.id)).rateUse.requests!;
    const held = busy.held;
    if (held === 0) expect(busy.used).toBe(3);
    else {
      expect(held).toBe(25);
      expect(busy.used - held).toBeLessThanOrEqual(3);
      expect(busy.used).toBeGreaterThanOrEqual(3);
    }
    // Idle for 250 ms, the lease goes back (its 23 unused units with it): what was really used remains.
    await waitFor(async () => (await kc.getKeyView(k.id)).rateUse.requests!.held === 0, 'the idle lease given back', 5000);
    const idle = (await kc.getKeyView(k.id)).rateUse.requests!;
    expect([idle.used, idle.held]).toEqual([3, 0]);
    expect((await kc.listKeyViews(account)).find((x) => x.id === k.id)?.rateUse.requests).toMatchObject({ used: 3, held: 0 });
  });
});

describe('refused requests count against no request rate', () => {
  const DAY = 86_400_000;
  /** The key's and the account's request windows (today's counts; 0 when none). */
  async function counted(account: string, keyId: string): Promise<[number, number]> {
    const rk = rateKeys(kc.schema);
    const day = Math.floor(Date.now() / DAY) * DAY;
    const one = async (rec: string) => {
      const [w, c] = await db.hmget(rec, RequestWindowField.start, RequestWindowField.counted);
      return w !== null && Number(w) === day ? Number(c) : 0;
    };
    return [await one(rk.requests(account, keyId)), await one(rk.requests(account))];
  }

  const CASES: Array<{
    name: string;
    code: string;
    model?: string;
    key?: (account: string) => Partial<Parameters<KeyConsole['createKey']>[0]>;
    refuse: (account: string, id: string) => Promise<void>;
    lift: (account: string, id: string) => Promise<void>;
  }> = [
    {
      name: 'the model rule',
      code: 'MODEL_NOT_ALLOWED',
      model: 'gpt-3.5-turbo',
      key: () => ({ models: ['openai/gpt-4o'] }),
      refuse: async () => {},
      lift: async (_, id) => void (await kc.updateKey(id, { models: null })),
    },
    {
      name: 'the wallet (402)',
      code: 'INSUFFICIENT_BALANCE',
      refuse: async (account, id) => {
        await kc.creditAccount(account, 5, `cr-${rid()}`);
        await kc.recordUsage({ keyId: id, amountMicros: 5, requestId: rid() });
      },
      lift: async (account) => void (await kc.creditAccount(account, 1_000_000, `cr-${rid()}`)),
    },
    {
      name: 'the spend limit',
      code: 'KEY_LIMIT_EXCEEDED',
      key: () => ({ limit: { amountMicros: 100, period: 'day' } }),
      refuse: async (_, id) => void (await kc.recordUsage({ keyId: id, amountMicros: 100, requestId: rid() })),
      lift: async (_, id) => void (await kc.setKeyLimit(id, { amountMicros: 1_000_000, period: 'day' })),
    },
    {
      name: 'expiry',
      code: 'API_KEY_EXPIRED',
      key: () => ({ expiresAt: new Date(Date.now() + 1000) }),
      refuse: () => new Promise((r) => setTimeout(r, 1100)), // no request before it expires
      lift: async (_, id) => void (await kc.updateKey(id, { expiresAt: new Date(Date.now() + 3_600_000) })),
    },
    {
      name: 'a token-rate block',
      code: 'RATE_LIMITED',
      key: () => ({ rates: { requests: rate('50/d'), tokens: rate('100/d', 'tokens') } }),
      refuse: async (_, id) => void (await kc.recordUsage({ keyId: id, amountMicros: 1, requestId: rid(), inputTokens: 60, outputTokens: 40 })),
      lift: async (_, id) => void (await kc.updateKey(id, { rates: { tokens: rate('100000/d', 'tokens') } })),
    },
  ];

  for (const c of CASES) {
    it(`refused by ${c.name}: the key's 50/d and the account's 90/d windows stay unchanged; then one allowed request counts 1 in each`, async () => {
      await awayFromWindowEnd('day');
      const account = acct();
      await kc.setAccountRates(account, { requests: rate('90/d') });
      const k = await kc.createKey({ account, name: 'refused', rates: { requests: rate('50/d') }, ...c.key?.(account) });
      await c.refuse(account, k.id);
      const check = () => a.client.check(chatRequest(k.key, c.model));
      await waitFor(async () => outcomeOf(await check()) === c.code, `refused by ${c.name}`, 5000);
      for (let i = 0; i < 5; i++) expect(outcomeOf(await check())).toBe(c.code);
      expect(await counted(account, k.id)).toEqual([0, 0]);
      await c.lift(account, k.id);
      await waitFor(async () => {
        const o = outcomeOf(await check());
        if (o !== 'allow') expect(o).toBe(c.code);
        return o === 'allow';
      }, `allowed once ${c.name} no longer refuses`, 5000);
      expect(await counted(account, k.id)).toEqual([1, 1]);
    });
  }
});

describe('two sidecars, one limit', () => {
  it('together they allow at most 100 of 160 requests in one second, and at least 95', async () => {
    for (let attempt = 0; ; attempt++) {
      const k = await kc.createKey({ account: acct(), name: 'shared', rates: { requests: rate('100/s') } });
      // Warm both caches (these count: 2 per sidecar) outside the measured second.
      for (const sc of [a, b]) await sc.client.check(chatRequest(k.key));
      const sec = await nextSecond(10);
      const results = await Promise.all(Array.from({ length: 160 }, (_, i) => (i % 2 === 0 ? a : b).client.check(chatRequest(k.key))));
      if (Math.floor(Date.now() / 1000) !== sec) {
        if (attempt < 3) continue;
        throw new Error('could not send the burst within one second');
      }
      const allowed = results.filter((r) => outcomeOf(r) === 'allow').length;
      const refused = results.filter((r) => outcomeOf(r) === 'RATE_LIMITED').length;
      expect(allowed + refused).toBe(160);
      expect(allowed).toBeLessThanOrEqual(100);
      expect(allowed).toBeGreaterThanOrEqual(95);
      return;
    }
  });
});

describe('settings: bad values are refused and nothing changes', () => {
  it('the CLI forms', () => {
    expect(rateArgs({ rate: '5/s', tokenRate: '1000/m' })).toEqual({ requests: { count: 5, per: 'second' }, tokens: { count: 1000, per: 'minute' } });
    expect(rateArgs({ rate: false })).toEqual({ requests: null });
    for (const bad of ['5', '5/x', '0/s', '-1/s', '05/s', '5/sec', '1000000001/s', '']) expect(() => rateArgs({ rate: bad })).toThrow(/--rate: rate must be/);
  });

  it('the library: a bad rate on update or on an account changes nothing', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'x', rates: { requests: rate('7/m') } });
    const before = await db.hgetall(kc.schema.keyRecord((await db.get(kc.schema.keyIdIndex(k.id)))!));
    await expect(kc.updateKey(k.id, { name: 'y', rates: { requests: { count: 0, per: 'second' } } })).rejects.toThrow(/rate/);
    await expect(kc.updateKey(k.id, { rates: { tokens: { count: 5, per: 'week' as never } } })).rejects.toThrow(/per must be/);
    const after = await db.hgetall(kc.schema.keyRecord((await db.get(kc.schema.keyIdIndex(k.id)))!));
    expect(after).toEqual(before);
    await expect(kc.setAccountRates(account, { requests: { count: 1.5, per: 'second' } })).rejects.toThrow(/rate/);
    expect(await db.hgetall(kc.schema.account(account))).toEqual({});
    await expect(kc.createKey({ account, name: 'z', rates: { requests: { count: 2e9, per: 'second' } } })).rejects.toThrow(/at most/);
    expect((await kc.listKeys(account)).length).toBe(1);
  });
});
