/** The usage summary's bounds, without Redis: group cap, entry cap, exact sums, span rules. */
import { describe, expect, it } from 'vitest';
import { ConsoleError } from '../../src/console/errors.ts';
import { OTHER_GROUP, summarizeUsage, summarySpan, USAGE_SUMMARY_MAX_DAYS, USAGE_SUMMARY_MAX_ENTRIES, USAGE_SUMMARY_MAX_GROUPS } from '../../src/console/usage-summary.ts';
import type { UsageEntry } from '../../src/schema/money.ts';

const T0 = Date.UTC(2026, 10, 1);
function entry(i: number, over: Partial<UsageEntry> = {}): UsageEntry {
  return { id: `${T0 + i}-0`, time: T0 + i, account: 'a', keyId: `key_${i}`, requestId: `r${i}`, amountMicros: 1, model: `m-${i}`, inputTokens: 2, outputTokens: null, ...over } as UsageEntry;
}
async function* gen(n: number, f: (i: number) => UsageEntry = entry) {
  for (let i = 0; i < n; i++) yield f(i);
}
const span = { since: T0, until: T0 + 86_400_000 };

describe('summarizeUsage', () => {
  it('keeps at most USAGE_SUMMARY_MAX_GROUPS groups; the rest are summed under (other)', async () => {
    const s = await summarizeUsage('a', gen(USAGE_SUMMARY_MAX_GROUPS + 5), span, 'model');
    expect(s.groups).toHaveLength(USAGE_SUMMARY_MAX_GROUPS + 1);
    expect(s.groups.find((g) => g.group === OTHER_GROUP)?.requests).toBe(5);
    expect(s.total).toEqual({ requests: USAGE_SUMMARY_MAX_GROUPS + 5, amountMicros: USAGE_SUMMARY_MAX_GROUPS + 5, tokens: { input: 2 * (USAGE_SUMMARY_MAX_GROUPS + 5), cached_input: 0, cache_write: 0, output: 0, reasoning: 0 } });
  });

  it('stops after USAGE_SUMMARY_MAX_ENTRIES entries and says so', async () => {
    const s = await summarizeUsage('a', gen(USAGE_SUMMARY_MAX_ENTRIES + 1, (i) => entry(i, { keyId: 'k', model: 'm' })), span, 'key');
    expect([s.truncated, s.total.requests]).toEqual([true, USAGE_SUMMARY_MAX_ENTRIES]);
  });

  it('sums exactly and refuses a sum beyond the exact integer range', async () => {
    const big = (i: number) => entry(i, { amountMicros: 10 ** 15 });
    expect((await summarizeUsage('a', gen(9, big), span, 'day')).total.amountMicros).toBe(9 * 10 ** 15);
    await expect(summarizeUsage('a', gen(10, big), span, 'day')).rejects.toMatchObject({ code: 'RANGE' });
  });

  it('a span is since < until, at most the maximum of days', () => {
    expect(summarySpan(T0, T0 + USAGE_SUMMARY_MAX_DAYS * 86_400_000)).toEqual({ since: T0, until: T0 + USAGE_SUMMARY_MAX_DAYS * 86_400_000 });
    for (const [a, b] of [[T0, T0], [T0, T0 + USAGE_SUMMARY_MAX_DAYS * 86_400_000 + 1], [Number.NaN, T0]]) expect(() => summarySpan(a!, b!)).toThrow(ConsoleError);
  });
});
