/**
 * Rate limits without Redis: the settings' text, API and record forms, fixed UTC windows on a fake
 * clock (the last millisecond of a window, the first of the next), the pool bound, which rate
 * refuses first, retry-after, the message, the x-ratelimit headers and Envoy's total_limit.
 */
import { describe, expect, it } from 'vitest';
import {
  firstRefusal,
  formatResetDuration,
  leasePool,
  rateLimitHeaders,
  rateMessage,
  retryAfter,
  retryHeaders,
  tighterView,
  tokenRefusals,
  totalLimitMetadata,
  windowOf,
  type RateRefusal,
} from '../../src/core/rate.ts';
import {
  encodeRateFields,
  formatRate,
  MAX_RATE_REQUESTS,
  NO_RATES,
  NO_TOKEN_BLOCKS,
  parseRateFields,
  parseRateText,
  parseTokenBlocks,
  rateFromApi,
  rateKeys,
  requestRateToApi,
  tokenRateToApi,
  withinRate,
  type Rate,
} from '../../src/schema/rates.ts';
import { schema } from '../../src/schema/redis-schema.ts';

const MIN = 60_000;
// 2026-11-24T22:00:00.000Z, a whole hour.
const HOUR_START = Date.UTC(2026, 10, 24, 22, 0, 0, 0);
const rate = (text: string): Rate => {
  const r = parseRateText(text);
  if ('error' in r) throw new Error(r.error);
  return r;
};

describe('rate settings', () => {
  it('reads N/UNIT with UNIT exactly s, m, h or d', () => {
    expect(parseRateText('5/s')).toEqual({ count: 5, per: 'second' });
    expect(parseRateText('1000/m')).toEqual({ count: 1000, per: 'minute' });
    expect(parseRateText('7/h')).toEqual({ count: 7, per: 'hour' });
    expect(parseRateText('1/d')).toEqual({ count: 1, per: 'day' });
    for (const bad of ['', '5', '5/', '/s', '0/s', '-1/s', '05/s', '5/S', '5/sec', '5 /s', '5/s ', '1.5/s', '5/w', '1e3/s', '5//s']) {
      const r = parseRateText(bad);
      expect('error' in r, bad).toBe(true);
      expect((r as { error: string }).error).toMatch(/N\/UNIT/);
    }
  });

  it('bounds the count per window', () => {
    expect(parseRateText(`${MAX_RATE_REQUESTS}/s`)).toEqual({ count: MAX_RATE_REQUESTS, per: 'second' });
    expect((parseRateText(`${MAX_RATE_REQUESTS + 1}/s`) as { error: string }).error).toMatch(/at most 1000000000/);
    expect(parseRateText('1000000000000/m', 'tokens')).toEqual({ count: 1e12, per: 'minute' });
    expect((parseRateText('1000000000001/m', 'tokens') as { error: string }).error).toMatch(/token rate must be at most/);
  });

  it('formats back to the same text', () => {
    for (const t of ['5/s', '1000/m', '7/h', '1/d']) expect(formatRate(rate(t))).toBe(t);
  });

  it('takes and gives the API form {requests|tokens, per}; null removes', () => {
    expect(rateFromApi({ requests: 5, per: 'second' }, 'requests')).toEqual({ count: 5, per: 'second' });
    expect(rateFromApi({ tokens: 9000, per: 'day' }, 'tokens')).toEqual({ count: 9000, per: 'day' });
    expect(rateFromApi(null, 'requests')).toBeNull();
    const bad: Array<[unknown, 'requests' | 'tokens', RegExp]> = [
      [{ requests: 0, per: 'second' }, 'requests', /rate.requests must be an integer from 1/],
      [{ requests: 1.5, per: 'second' }, 'requests', /integer/],
      [{ requests: '5', per: 'second' }, 'requests', /integer/],
      [{ requests: 5, per: 's' }, 'requests', /per must be one of second, minute, hour, day/],
      [{ requests: 5 }, 'requests', /per must be/],
      [{ tokens: 5, per: 'second' }, 'requests', /unknown field "tokens"/],
      [{ requests: 5, per: 'second', burst: 2 }, 'requests', /unknown field/],
      [[5, 'second'], 'requests', /must be \{requests, per\}/],
      ['5/s', 'tokens', /token_rate must be \{tokens, per\}/],
      [{ tokens: 1e13, per: 'minute' }, 'tokens', /token_rate.tokens must be an integer from 1 to 1000000000000/],
    ];
    for (const [v, kind, msg] of bad) {
      const r = rateFromApi(v, kind);
      expect(r !== null && 'error' in r, JSON.stringify(v)).toBe(true);
      expect((r as { error: string }).error).toMatch(msg);
    }
    expect(requestRateToApi(rate('5/s'))).toEqual({ requests: 5, per: 'second' });
    expect(tokenRateToApi(rate('5/m'))).toEqual({ tokens: 5, per: 'minute' });
    expect(requestRateToApi(null)).toBeNull();
  });

  it('encodes as record fields and decodes them; no fields is the shared NO_RATES', () => {
    expect(encodeRateFields({ requests: rate('5/s'), tokens: null })).toEqual({ set: ['rate', '5/s'], del: ['token_rate'] });
    expect(encodeRateFields({ tokens: rate('100/h') })).toEqual({ set: ['token_rate', '100/h'], del: [] });
    expect(parseRateFields(null, null)).toBe(NO_RATES);
    expect(parseRateFields(undefined, undefined)).toBe(NO_RATES);
    expect(parseRateFields('5/s', null)).toEqual({ requests: { count: 5, per: 'second' }, tokens: null });
    expect(parseRateFields(null, '100/h')).toEqual({ requests: null, tokens: { count: 100, per: 'hour' } });
    expect(parseRateFields('5/x', null)).toMatch(/^rate: /);
    expect(parseRateFields(null, '0/m')).toMatch(/^token_rate: /);
  });

  it('compares a key rate with its account rate across units', () => {
    expect(withinRate(rate('60/m'), rate('1/s'))).toBe(true);
    expect(withinRate(rate('61/m'), rate('1/s'))).toBe(false);
    expect(withinRate(rate('1/s'), rate('86400/d'))).toBe(true);
    expect(withinRate(rate('2/s'), rate('86400/d'))).toBe(false);
  });

  it('names every rate record with the account hash tag', () => {
    const k = rateKeys(schema('kg'));
    expect(k.requests('acct-1', 'key_0123456789abcdef')).toBe('kg:v1:rate:{acct-1}:key_0123456789abcdef');
    expect(k.requests('acct-1')).toBe('kg:v1:rate:{acct-1}');
    expect(k.tokens('acct-1', 'key_0123456789abcdef')).toBe('kg:v1:tokrate:{acct-1}:key_0123456789abcdef');
    expect(k.tokens('acct-1')).toBe('kg:v1:tokrate:{acct-1}');
  });
});

describe('fixed UTC windows on a fake clock', () => {
  it('a minute starts at second 0; the last millisecond is still in it', () => {
    const w = windowOf('minute', HOUR_START + 5 * MIN + 59_999);
    expect(w).toEqual({ start: HOUR_START + 5 * MIN, end: HOUR_START + 6 * MIN });
    expect(windowOf('minute', HOUR_START + 6 * MIN).start).toBe(HOUR_START + 6 * MIN);
  });

  it('seconds, hours and days are aligned the same way', () => {
    expect(windowOf('second', HOUR_START + 999)).toEqual({ start: HOUR_START, end: HOUR_START + 1000 });
    expect(windowOf('second', HOUR_START + 1000).start).toBe(HOUR_START + 1000);
    expect(windowOf('hour', HOUR_START - 1)).toEqual({ start: HOUR_START - 3_600_000, end: HOUR_START });
    expect(windowOf('hour', HOUR_START).start).toBe(HOUR_START);
    const midnight = Date.UTC(2026, 10, 25);
    expect(windowOf('day', midnight - 1)).toEqual({ start: Date.UTC(2026, 10, 24), end: midnight });
    expect(windowOf('day', midnight).start).toBe(midnight);
  });

  it('retry-after: whole seconds rounded up, at least 1; retry-after-ms the same wait', () => {
    const end = HOUR_START + MIN;
    expect(retryAfter(end, end - 1)).toEqual({ seconds: 1, ms: 1 });
    expect(retryAfter(end, end - 1000)).toEqual({ seconds: 1, ms: 1000 });
    expect(retryAfter(end, end - 1001)).toEqual({ seconds: 2, ms: 1001 });
    expect(retryAfter(end, end - MIN)).toEqual({ seconds: 60, ms: MIN });
    // At or past the instant (a clock moved): still a positive wait.
    expect(retryAfter(end, end)).toEqual({ seconds: 1, ms: 1 });
    expect(retryAfter(end, end + 5)).toEqual({ seconds: 1, ms: 1 });
    expect(retryHeaders(end, end - 2500)).toEqual([
      ['retry-after', '3'],
      ['retry-after-ms', '2500'],
    ]);
  });
});

describe('the pool bound', () => {
  it('exact below 100; 5% of the limit from 100 on', () => {
    expect(leasePool(1)).toBe(0);
    expect(leasePool(99)).toBe(0);
    expect(leasePool(100)).toBe(5);
    expect(leasePool(1000)).toBe(50);
    expect(leasePool(1019)).toBe(50);
    expect(leasePool(MAX_RATE_REQUESTS)).toBe(50_000_000);
    for (const l of [100, 101, 150, 999, 12345]) expect(leasePool(l)).toBeLessThanOrEqual(l * 0.05);
  });
});

describe('which rate refuses', () => {
  const end = HOUR_START + 1000;
  const r = (scope: 'key' | 'account', kind: 'requests' | 'tokens', text = '5/s'): RateRefusal => ({ scope, kind, rate: rate(text), retryAt: end });

  it('key requests, key tokens, account requests, account tokens', () => {
    const all = [r('account', 'tokens'), r('account', 'requests'), r('key', 'tokens'), r('key', 'requests')];
    expect(firstRefusal(all)).toBe(all[3]);
    expect(firstRefusal(all.slice(0, 3))).toBe(all[2]);
    expect(firstRefusal(all.slice(0, 2))).toBe(all[1]);
    expect(firstRefusal([null, undefined, all[0]])).toBe(all[0]);
    expect(firstRefusal([])).toBeNull();
  });

  it('named after the first, waiting for the latest of them to admit the request again', () => {
    const later: RateRefusal = { ...r('account', 'requests', '3/h'), retryAt: end + 3_600_000 };
    const got = firstRefusal([later, r('key', 'requests', '2/s'), r('key', 'tokens')])!;
    expect([got.scope, got.kind, got.retryAt]).toEqual(['key', 'requests', end + 3_600_000]);
    expect(got.rate).toEqual(rate('2/s'));
  });

  it('a token block refuses until its instant, then lifts by itself', () => {
    const keyId = 'key_0123456789abcdef';
    const blocks = parseTokenBlocks({ [`tokrate:${keyId}`]: String(end), tokrate: String(end + MIN), wallet: 'open', 'limit:x': 'never' });
    if (typeof blocks === 'string') throw new Error(blocks);
    const kr = rate('1000/s');
    const ar = rate('50000/m');
    expect(tokenRefusals(blocks, keyId, end - 1, kr, ar).map((x) => `${x.scope} ${x.kind} ${x.retryAt}`)).toEqual([
      `key tokens ${end}`,
      `account tokens ${end + MIN}`,
    ]);
    expect(tokenRefusals(blocks, keyId, end, kr, ar).map((x) => x.scope)).toEqual(['account']);
    expect(tokenRefusals(blocks, keyId, end + MIN, kr, ar)).toEqual([]);
    expect(tokenRefusals(blocks, 'key_ffffffffffffffff', end - 1, kr, ar).map((x) => x.scope)).toEqual(['account']);
    expect(parseTokenBlocks({ wallet: 'open' })).toBe(NO_TOKEN_BLOCKS);
    expect(parseTokenBlocks({ tokrate: 'soon' })).toMatch(/tokrate: not epoch ms/);
    expect(parseTokenBlocks({ 'tokrate:nope': '1' })).toMatch(/not a key id/);
  });

  it('the message names the rate and its value', () => {
    expect(rateMessage(r('key', 'requests'), end - 400)).toBe(
      'The key request rate 5/s of this API key is used up for the current window. Retry after 1 s, or ask for a higher rate in the console.',
    );
    expect(rateMessage(r('account', 'tokens', '100000/m'), end - 1500)).toMatch(/^The account token rate 100000\/m of the account that owns this API key .* Retry after 2 s/);
  });
});

describe('headers and metadata of an allowed answer', () => {
  it('reset durations in the OpenAI form', () => {
    expect(formatResetDuration(0)).toBe('0ms');
    expect(formatResetDuration(20)).toBe('20ms');
    expect(formatResetDuration(999.2)).toBe('1s');
    expect(formatResetDuration(1000)).toBe('1s');
    expect(formatResetDuration(1500)).toBe('1.5s');
    expect(formatResetDuration(1234)).toBe('1.234s');
    expect(formatResetDuration(6 * MIN)).toBe('6m0s');
    expect(formatResetDuration(6 * MIN + 500)).toBe('6m0.5s');
    expect(formatResetDuration(3_600_000)).toBe('1h0m0s');
    expect(formatResetDuration(86_400_000 - 1)).toBe('23h59m59.999s');
  });

  it('x-ratelimit-* for requests and tokens, remaining clamped to [0, limit]', () => {
    const now = HOUR_START + 400;
    expect(rateLimitHeaders({ requests: { limit: 5, remaining: 3, resetAt: HOUR_START + 1000 } }, now)).toEqual([
      ['x-ratelimit-limit-requests', '5'],
      ['x-ratelimit-remaining-requests', '3'],
      ['x-ratelimit-reset-requests', '600ms'],
    ]);
    expect(
      rateLimitHeaders({ requests: null, tokens: { limit: 1000, remaining: -20, resetAt: HOUR_START + 6 * MIN } }, HOUR_START),
    ).toEqual([
      ['x-ratelimit-limit-tokens', '1000'],
      ['x-ratelimit-remaining-tokens', '0'],
      ['x-ratelimit-reset-tokens', '6m0s'],
    ]);
    expect(rateLimitHeaders({}, now)).toEqual([]);
  });

  it('the tighter of the key and the account view', () => {
    const k = { limit: 10, remaining: 4, resetAt: 1 };
    const a = { limit: 100, remaining: 2, resetAt: 2 };
    expect(tighterView(k, a)).toBe(a);
    expect(tighterView(k, { ...a, remaining: 4 })).toBe(k);
    expect(tighterView(null, a)).toBe(a);
    expect(tighterView(k, null)).toBe(k);
    expect(tighterView(null, null)).toBeNull();
  });

  it('total_limit for Envoy Gateway', () => {
    expect(totalLimitMetadata(rate('5/s'))).toEqual({ total_limit: { requests_per_unit: 5, unit: 'SECOND' } });
    expect(totalLimitMetadata(rate('7/m')).total_limit.unit).toBe('MINUTE');
    expect(totalLimitMetadata(rate('7/h')).total_limit.unit).toBe('HOUR');
    expect(totalLimitMetadata(rate('7/d')).total_limit.unit).toBe('DAY');
  });
});
