/** The usage ledger's pure parts: an entry's row (src/ledger/row.ts) and a summary from the ledger's sums. */
import { describe, expect, it } from 'vitest';
import { usageRow } from '../../src/ledger/row.ts';
import { OTHER_GROUP, summaryOfSums, USAGE_SUMMARY_MAX_GROUPS } from '../../src/console/usage-summary.ts';

describe('usageRow', () => {
  const base = ['key', 'key_1', 'req', 'req-9', 'amount', '1200'];

  it('maps a metered entry, every field', () => {
    const r = usageRow('acct', '1796527586341-15', [...base, 'model', 'gpt-4o', 'in', '10', 'out', '5', 'cached_in', '2', 'cache_write', '1', 'reasoning', '3', 'src', 'meter', 'est', '1', 'unpriced', '1']);
    expect(r).toEqual({
      booking_id: 'req-9', account: 'acct', key_id: 'key_1', request_id: 'req-9', model: 'gpt-4o', amount_micros: '1200',
      input_tokens: '10', output_tokens: '5', cached_input_tokens: '2', cache_write_tokens: '1', reasoning_tokens: '3',
      source: 'meter', estimated: true, unpriced: true, price: null, entry_id: '1796527586341-15', entry_ms: '1796527586341', entry_seq: '15', extra: null,
    });
  });

  it('takes booking_id and price when present; a record without counts has nulls', () => {
    const r = usageRow('acct', '5-0', [...base, 'booking_id', 'bk_01J', 'price', '{"input": 2500, "output": 10000}']);
    expect(r).toMatchObject({ booking_id: 'bk_01J', request_id: 'req-9', price: '{"input":2500,"output":10000}', input_tokens: null, source: 'record', estimated: false });
    // an empty booking_id falls back to the request id; a price that is not JSON is kept as a JSON string
    expect(usageRow('acct', '5-0', [...base, 'booking_id', '', 'price', 'per-token'])).toMatchObject({ booking_id: 'req-9', price: '"per-token"' });
  });

  it('keeps fields it does not know, and counts that are not digits, in extra', () => {
    expect(usageRow('acct', '5-0', [...base, 'tier', 'gold', 'in', '-4'])).toMatchObject({ input_tokens: null, extra: '{"tier":"gold","in":"-4"}' });
  });

  it('refuses what cannot be a row', () => {
    expect(usageRow('acct', 'x-0', base)).toMatch(/entry id/);
    expect(usageRow('acct', '5-0', ['key', 'k', 'req', 'r', 'amount', '1.5'])).toMatch(/amount/);
    expect(usageRow('acct', '5-0', ['key', 'k', 'req', 'r', 'amount', '99999999999999999999'])).toMatch(/amount/);
    expect(usageRow('acct', '5-0', ['req', 'r', 'amount', '1'])).toMatch(/no key/);
  });
});

describe('summaryOfSums', () => {
  const sums = (group: string, n: number) => ({ group, requests: String(n), amount: String(n * 10), input: '1', cached_input: '0', cache_write: '0', output: '2', reasoning: '0' });
  const span = { since: 0, until: 86_400_000 };

  it('sums exactly, beyond 2^53 refused', () => {
    const s = summaryOfSums('a', [sums('2026-12-01', 3), sums('2026-12-02', 4)], span, 'day');
    expect(s.total).toEqual({ requests: 7, amountMicros: 70, tokens: { input: 2, cached_input: 0, cache_write: 0, output: 4, reasoning: 0 } });
    expect(s.truncated).toBe(false);
    expect(() => summaryOfSums('a', [{ ...sums('x', 1), amount: '9007199254740993' }], span, 'key')).toThrow(/exact integer range/);
  });

  it(`keeps ${USAGE_SUMMARY_MAX_GROUPS} groups; the rest are summed under (other)`, () => {
    const rows = Array.from({ length: USAGE_SUMMARY_MAX_GROUPS + 5 }, (_, i) => sums(`m-${String(i).padStart(5, '0')}`, 1));
    const s = summaryOfSums('a', rows, span, 'model');
    expect(s.groups).toHaveLength(USAGE_SUMMARY_MAX_GROUPS + 1);
    expect(s.groups.find((g) => g.group === OTHER_GROUP)?.requests).toBe(5);
    expect(s.total.requests).toBe(USAGE_SUMMARY_MAX_GROUPS + 5);
  });
});
