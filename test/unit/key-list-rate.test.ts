/**
 * The list's "Rate limited" state: a key whose request or token window is used up now, read from the
 * view's rate fields (absent without rate limits: never rate-limited).
 */
import { describe, expect, it } from 'vitest';
import { keyState } from '../../src/core/key-page.ts';
import { rateLimitedNow } from '../../src/console/key-list.ts';

const key = { id: 'key_AAAAAAAAAAAAAAAA', name: 'a', hint: 'kg_…abcd', status: 'active' as const, expiresAt: null, createdAt: 1 };
const use = (used: number) => ({ used, resetsAt: '2026-11-25T00:01:00.000Z' });

describe('rateLimitedNow', () => {
  it('is false without rate fields or without a rate', () => {
    expect(rateLimitedNow(key)).toBe(false);
    expect(rateLimitedNow({ ...key, rates: { requests: null, tokens: null }, rateUse: { requests: null, tokens: null } })).toBe(false);
  });
  it('is true when the request window or the token window is used up, false below', () => {
    const rates = { requests: { count: 10, per: 'minute' }, tokens: { count: 1000, per: 'minute' } };
    expect(rateLimitedNow({ ...key, rates, rateUse: { requests: use(9), tokens: use(999) } })).toBe(false);
    expect(rateLimitedNow({ ...key, rates, rateUse: { requests: use(10), tokens: use(0) } })).toBe(true);
    expect(rateLimitedNow({ ...key, rates, rateUse: { requests: use(0), tokens: use(1000) } })).toBe(true);
  });
  it('makes the state rate_limited after revoked, expired and limit reached', () => {
    const v = { ...key, rates: { requests: { count: 1, per: 'second' }, tokens: null }, rateUse: { requests: use(1), tokens: null } };
    expect(keyState(v, 10, undefined, rateLimitedNow(v)).state).toBe('rate_limited');
    expect(keyState(v, 10, 20, rateLimitedNow(v)).state).toBe('limit_reached');
    expect(keyState({ ...v, status: 'revoked' }, 10, undefined, rateLimitedNow(v)).state).toBe('revoked');
  });
});
