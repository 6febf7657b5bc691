/**
 * The booking's pricing shortcuts (#39: a booking priced per metered stream) give exactly what the
 * long way gives: the cost at multipliers 1 in safe integers (the BigInt form checked through
 * multipliers 2 × 0.5, which take it), and a resolution remembered per table and name (forgotten
 * when the table changes; never for a catalog price that depends on the time).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PriceCatalog } from '../../src/prices/catalog.ts';
import { costOf, type PriceSpec } from '../../src/prices/price.ts';
import { resolvePrice } from '../../src/prices/resolve.ts';
import { PriceTable } from '../../src/schema/prices.ts';

describe('the cost at multipliers 1', () => {
  it('is the BigInt form exactly: every part, the amount, its one ceiling; past the safe integers too', () => {
    const price = fc.oneof(fc.bigInt({ min: 0n, max: 100_000_000n }), fc.bigInt({ min: 0n, max: 10n ** 15n }));
    const count = fc.oneof(fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 0, max: 2 ** 31 }));
    fc.assert(
      fc.property(price, price, price, price, count, count, count, count, count, (pi, po, pc, pw, i, o, c, w, ws) => {
        const spec: PriceSpec = { base: { input: pi, output: po, cached_input: pc, web_search: pw }, tiers: [{ above: 1000, prices: { input: pi + 1n } }], serviceTiers: {} };
        const u = { input_tokens: i + c, cached_input_tokens: c, cache_write_tokens: 0, output_tokens: o, web_search_requests: ws, output_audio_tokens: Math.min(w, o) };
        const fast = costOf(spec, u);
        const long = costOf(spec, u, 2_000_000n, 500_000n);
        expect({ ...fast, serviceMultiplier: 0n, accountMultiplier: 0n }).toEqual({ ...long, serviceMultiplier: 0n, accountMultiplier: 0n });
        expect(JSON.stringify(fast.parts)).toBe(JSON.stringify(long.parts)); // the basis's key order too
      }),
      { numRuns: 2000 },
    );
  });

  it('rounds up once, from the exact sum', () => {
    const spec: PriceSpec = { base: { input: 1n, output: 3n }, tiers: [], serviceTiers: {} };
    expect(costOf(spec, { input_tokens: 1, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 1 })).toMatchObject({ amount: 1n, parts: { input: '0.000001', output: '0.000003' } });
    expect(costOf(spec, { input_tokens: 1_000_000, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 0 })).toMatchObject({ amount: 1n, parts: { input: '1' } });
    expect(costOf(spec, { input_tokens: 1_000_001, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 0 })).toMatchObject({ amount: 2n, parts: { input: '1.000001' } });
  });
});

describe('a resolution remembered', () => {
  const catalog = PriceCatalog.load();

  it('answers the same as the first time, and anew once the table changes', () => {
    const table = PriceTable.fromHash({ '*': JSON.stringify({ input: 1, output: 1 }) });
    const first = resolvePrice(table, catalog, 'openai', 'gpt-4o-2024-08-06', 'gpt-4o', 0);
    expect(first).toMatchObject({ rule: 'catalog', model: 'openai/gpt-4o' });
    expect(resolvePrice(table, catalog, 'openai', 'gpt-4o-2024-08-06', 'gpt-4o', 0)).toBe(first);
    expect(resolvePrice(table, null, 'openai', 'gpt-4o-2024-08-06', 'gpt-4o', 0)).toMatchObject({ rule: 'wildcard' }); // the catalog off: not the catalog's answer
    table.set('gpt-4o', { input: 5, output: 7 });
    expect(resolvePrice(table, catalog, 'openai', 'gpt-4o-2024-08-06', 'gpt-4o', 0)).toMatchObject({ rule: 'table-catalog-model', model: 'gpt-4o', spec: { base: { input: 5n, output: 7n } } });
    // null and '' and names that would run together are told apart
    expect(resolvePrice(table, catalog, 'openai', null, 'gpt-4o', 0)).toMatchObject({ rule: 'wildcard' });
    expect(resolvePrice(table, catalog, 'openai', 'gpt-4o', null, 0)).toMatchObject({ rule: 'table' });
  });

  it('never for a catalog price of dated variants: each booking time takes its own', () => {
    const match = { equals: 'm' };
    const c = new PriceCatalog('test', [
      {
        id: 'openai',
        name: 'OpenAI',
        api_pattern: '',
        pricing_urls: [],
        models: [{ id: 'm', match, prices: [{ prices: { input_mtok: 1, output_mtok: 1 } }, { constraint: { type: 'start_date', start_date: '2025-01-01' }, prices: { input_mtok: 2, output_mtok: 2 } }] }],
      } as never,
    ]);
    const table = PriceTable.fromHash({});
    expect(resolvePrice(table, c, 'openai', 'm', null, Date.parse('2024-06-01'))!.spec.base.input).toBe(1_000_000n);
    expect(resolvePrice(table, c, 'openai', 'm', null, Date.parse('2025-06-01'))!.spec.base.input).toBe(2_000_000n);
    expect(resolvePrice(table, c, 'openai', 'm', null, Date.parse('2024-06-01'))!.spec.base.input).toBe(1_000_000n);
  });
});
