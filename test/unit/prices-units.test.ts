/**
 * The pure parts of src/prices/ on their own: decimal text ↔ integers (no float in money), the
 * catalog's match rules and dated names, tiers, the disjoint parts of a usage and their prices, the
 * one ceiling; and every catalog model converting exactly. Property-tested where a rule is general.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { MatchLogic } from '@pydantic/genai-prices';
import { catalogMicros, dashedDates, matches, PriceCatalog } from '../../src/prices/catalog.ts';
import { decimalToScaled, numberText, scaledToDecimal } from '../../src/prices/decimal.ts';
import { costOf, usageParts, type PriceSpec } from '../../src/prices/price.ts';

const spec = (base: Record<string, bigint>, tiers: PriceSpec['tiers'] = []): PriceSpec => ({ base: { input: 0n, output: 0n, ...base }, tiers, serviceTiers: {} });

describe('decimal text', () => {
  it('decimal → scaled integers exactly, and back; anything that is not an exact decimal is refused', () => {
    expect(decimalToScaled('2.5', 6)).toBe(2_500_000n);
    expect(decimalToScaled('0.000001', 6)).toBe(1n);
    expect(decimalToScaled('3.750000', 6)).toBe(3_750_000n);
    for (const bad of ['0.0000001', '-1', '1e3', '1.', '.5', ' 1', '1,5', '', 'NaN']) expect(decimalToScaled(bad, 6), bad).toBeNull();
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 10n ** 24n }), (v) => decimalToScaled(scaledToDecimal(v, 6), 6) === v));
  });

  it('a catalog number as the decimal text it was written with, exponent forms expanded', () => {
    expect([numberText(2.5), numberText(1e-7), numberText(1.25e-5), numberText(1e21), numberText(0), numberText(0.1)]).toEqual(['2.5', '0.0000001', '0.0000125', '1000000000000000000000', '0', '0.1']);
    expect(catalogMicros(0.075, 'x')).toBe(75_000n);
    expect(() => catalogMicros(1e-7, 'x')).toThrow(/not an exact number of micro-units/);
    // any decimal of at most 6 places written as a JS number converts to exactly its micro-units
    fc.assert(fc.property(fc.integer({ min: 0, max: 10 ** 12 }), (m) => catalogMicros(Number(scaledToDecimal(BigInt(m), 6)), 'p') === BigInt(m)));
  });
});

describe('the catalog', () => {
  const catalog = PriceCatalog.load();

  it('every model of the three providers converts exactly (the load would have thrown), with the classes the meter reads', () => {
    const models = catalog.models();
    expect(models.length).toBeGreaterThan(150);
    expect(catalog.byId('anthropic', 'claude-sonnet-4-5')!.variants[0]!.spec.base).toMatchObject({ cache_write: 3_750_000n, cache_write_1h: 6_000_000n, web_search: 10_000_000n });
    expect(catalog.byId('openai', 'whisper-1')).toBeNull(); // priced by audio hours only: left out
    expect(catalog.byId('openai', 'moderation')?.variants[0]!.spec.base).toEqual({ input: 0n, output: 0n }); // free
  });

  it('match rules: dated snapshots, -latest, models/ and provider/ prefixes, compact dates; cached; an unknown name is null', () => {
    expect(dashedDates('claude-3-5-sonnet-20241022')).toBe('claude-3-5-sonnet-2024-10-22');
    expect(dashedDates('x-20241399')).toBe('x-20241399'); // not a date
    expect(matches({ or: [{ starts_with: 'GPT-4o' }, { regex: '^o[134]' }] }, 'gpt-4o-mini')).toBe(true);
    expect(matches({ and: [{ contains: 'gemini' }, { ends_with: '-tts' }] }, 'gemini-2.5-flash')).toBe(false);
    const id = (p: string, n: string) => catalog.match(p, n)?.id ?? null;
    expect([id('openai', 'gpt-4o-2024-08-06'), id('openai', 'GPT-4o'), id('openai', 'openai/gpt-4o-mini-2024-07-18'), id('anthropic', 'claude-3-5-sonnet-latest'), id('google', 'models/gemini-2.5-pro'), id('google', 'claude-3-5-haiku@20241022')]).toEqual([
      'gpt-4o', 'gpt-4o', 'gpt-4o-mini', 'claude-3-5-sonnet', 'gemini-2.5-pro', 'claude-3-5-haiku',
    ]);
    expect(id('openai', 'no-such-model')).toBeNull();
    // cached per name: a name seen is answered again without its rules (here made to match nothing)
    const fresh = PriceCatalog.load();
    const m = fresh.byId('openai', 'gpt-4o')! as { match: MatchLogic };
    expect(fresh.match('openai', 'gpt-4o-2024-08-06')).toBe(m);
    m.match = { equals: 'nothing' };
    expect(fresh.match('openai', 'gpt-4o-2024-08-06')).toBe(m);
    expect(fresh.match('openai', 'gpt-4o-2024-11-20')).not.toBe(m);
  });
});

describe('the cost', () => {
  it('the parts are disjoint and sum to the usage; a part larger than its whole leaves the whole at 0, never negative', () => {
    expect(usageParts({ input_tokens: 100, cached_input_tokens: 10, cache_write_tokens: 30, cache_write_1h_tokens: 20, output_tokens: 50, input_audio_tokens: 5, output_image_tokens: 7, web_search_requests: 2 })).toEqual({
      input: 55, cached_input: 10, cache_write: 10, cache_write_1h: 20, input_audio: 5, output: 43, output_image: 7, web_search: 2,
    });
    expect(usageParts({ input_tokens: 1, cached_input_tokens: 5, cache_write_tokens: 0, output_tokens: 0 })).toEqual({ cached_input: 5 });
  });

  it('a class without its own price takes its parent\'s; tiers replace what they name, for the whole request, above (not at) the threshold', () => {
    const s = spec({ input: 1_000_000n, output: 2_000_000n, cache_write: 3_000_000n }, [{ above: 100, prices: { input: 10_000_000n } }]);
    const u = { input_tokens: 100, cached_input_tokens: 0, cache_write_tokens: 40, cache_write_1h_tokens: 40, output_tokens: 10, output_audio_tokens: 10 };
    // at 100 (not above): base; 1 h writes at cache_write (3), audio out at output (2): 60×1 + 40×3 + 10×2 = 200
    expect(costOf(s, u)).toMatchObject({ amount: 200n, tier: null, parts: { input: '60', cache_write_1h: '120', output_audio: '20' } });
    expect(costOf(s, { ...u, input_tokens: 101 })).toMatchObject({ amount: 61n * 10n + 120n + 20n, tier: 100 });
  });

  it('one ceiling per booking, exact for any counts and prices, multipliers included', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: 0, max: 2 ** 40 }), fc.bigInt({ min: 0n, max: 10n ** 12n }), fc.bigInt({ min: 0n, max: 10n ** 12n }), fc.bigInt({ min: 0n, max: 1000n * 10n ** 6n }), (i, o, pi, po, m) => {
        const c = costOf(spec({ input: pi, output: po }), { input_tokens: i, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: o }, m);
        const exact = (BigInt(i) * pi + BigInt(o) * po) * m * 10n ** 6n; // × the account's 1 (10^6)
        const want = (exact + 10n ** 18n - 1n) / 10n ** 18n;
        return c.amount === want;
      }),
      { numRuns: 300 },
    );
  });
});
