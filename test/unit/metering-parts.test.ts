/** The metering parts on their own: SSE reader, JSON reader, the include_usage splice, prices and cost. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forceIncludeUsage } from '../../src/core/include-usage.ts';
import { count, JsonReader, obj, SEEN, str, TEXT, arr, BAD, type RecordView } from '../../src/metering/json-reader.ts';
import { priceBookingUsage } from '../../src/metering/pricing.ts';
import type { PricedUsage } from '../../src/prices/price.ts';
import { resolvePrice } from '../../src/prices/resolve.ts';
import { SseReader } from '../../src/metering/sse.ts';
import { MAX_AMOUNT_MICROS } from '../../src/schema/money.ts';
import { decodePrice, encodePrice, MAX_PRICE_MICROS, priceOf, pricesKey, PriceTable, type PriceRecord } from '../../src/schema/prices.ts';
import { randomCuts, rng, splitAt } from './metering-helpers.ts';

function events(input: Uint8Array[], max = 1 << 20): { events: string[]; oversized: number } {
  const out: string[] = [];
  let cur: Buffer[] = [];
  let oversized = 0;
  const r = new SseReader(
    {
      begin: () => (cur = []),
      data: (b, s, e) => cur.push(Buffer.from(b.subarray(s, e))),
      end: () => out.push(Buffer.concat(cur).toString('utf8')),
      oversized: () => oversized++,
    },
    max,
  );
  for (const c of input) r.write(c);
  return { events: out, oversized };
}

describe('SSE reader', () => {
  const text = ': a comment\r\nevent: ping\r\ndata: one\r\ndata:two\r\n\r\nid: 3\rdata:  spaced\r\rdata\n\ndata: é🙂\n\n\n\ndata: no end';
  const want = ['one\ntwo', ' spaced', '', 'é🙂'];

  it('CRLF, CR and LF line ends, data lines joined with \\n, one optional space dropped, comments and other fields skipped, an unfinished event not dispatched', () => {
    expect(events([Buffer.from(text)]).events).toEqual(want);
  });

  it('the same events at every split, including inside CRLF and inside a UTF-8 character', () => {
    const b = Buffer.from(text);
    for (let i = 1; i < b.length; i++) for (let j = i; j < b.length; j += 7) expect(events(splitAt(b, i === j ? [i] : [i, j])).events).toEqual(want);
  });

  it('an event larger than the bound is dropped and counted; the next is read', () => {
    const b = Buffer.from(`data: ${'x'.repeat(100)}\ndata: more\n\ndata: ok\n\n`);
    expect(events([b], 50)).toEqual({ events: ['ok'], oversized: 1 });
  });
});

describe('JSON reader', () => {
  const schema = obj({ model: str(0), usage: obj({ a: count(0), b: count(1) }), items: arr(obj({ t: TEXT })) });

  function read(chunks: Uint8Array[]) {
    const recs: { a: number | null; b: number | null; bad: number; model: string | null; text: number }[] = [];
    const r = new JsonReader(schema, (v: RecordView) =>
      recs.push({
        a: v.countState[0] === SEEN ? v.counts[0]! : null,
        b: v.countState[1] === SEEN ? v.counts[1]! : null,
        bad: [0, 1].filter((s) => v.countState[s] === BAD).length,
        model: v.strings[0] ?? null,
        text: v.text,
      }),
    );
    for (const c of chunks) r.write(c);
    return { recs, failed: r.failed };
  }

  it('reads the schema paths of random documents, whatever surrounds them and wherever they are split', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ maxLength: 8 }).filter((k) => !['model', 'usage', 'items'].includes(k)), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }),
        fc.nat({ max: 2 ** 40 }),
        fc.nat({ max: 1000 }),
        fc.string({ maxLength: 30 }),
        fc.array(fc.string({ unit: 'grapheme', maxLength: 10 }), { maxLength: 4 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (noise, a, b, model, texts, cutSeeds) => {
          const doc = { ...noise, model, usage: { x: noise, a, b }, items: texts.map((t) => ({ t, u: t })) };
          const buf = Buffer.from(JSON.stringify(doc));
          const cuts = [...new Set(cutSeeds.map((c) => c % Math.max(1, buf.length)).filter((c) => c > 0))].sort((x, y) => x - y);
          const { recs, failed } = read(splitAt(buf, cuts));
          expect(failed).toBe(false);
          const wantModel = Buffer.byteLength(model) <= 256 ? model : null;
          expect(recs).toEqual([{ a, b, bad: 0, model: wantModel, text: texts.reduce((n, t) => n + [...t].length, 0) }]);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('a member read in one step (its key whole in the chunk) reads as the same member split anywhere: pretty-printed, spaced, escaped keys', () => {
    // the reader takes a member whose key lies whole in a chunk in one step; a key split across
    // chunks, or escaped, goes through the string states. Both must read the same.
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom('model', 'usage', 'items', 'mod\\u0065l', 'a', 'b', 'x', 'usage '), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 }),
        fc.nat({ max: 2 ** 40 }),
        fc.constantFrom(0, 1, 2),
        fc.constantFrom('', ' ', '\n\t '),
        (noise, a, indent, pad) => {
          const doc = { ...noise, usage: { a, ...(typeof noise.x === 'number' ? { b: noise.x } : {}) } };
          let text = JSON.stringify(doc, null, indent).replace(/\\\\u0065/g, '\\u0065');
          if (pad !== '') text = text.replace(/":/g, `"${pad}:${pad}`);
          const buf = Buffer.from(text);
          const whole = read([buf]);
          for (let i = 1; i < buf.length; i++) expect(read(splitAt(buf, [i]))).toEqual(whole);
          expect(whole.failed).toBe(false);
          expect(whole.recs[0]?.a).toBe(a);
        },
      ),
      { numRuns: 150 },
    );
    // an escaped key is never a schema key: whole or split
    const esc = Buffer.from('{"mod\\u0065l":"m","model":"n","usage":{"\\u0061":5,"a":6}}');
    expect(read([esc]).recs).toEqual([{ a: 6, b: null, bad: 0, model: 'n', text: 0 }]);
    expect(read(splitAt(esc, [5])).recs).toEqual([{ a: 6, b: null, bad: 0, model: 'n', text: 0 }]);
  });

  it('escapes: \\n counts one code point, a surrogate pair one; a model with escapes decodes', () => {
    const { recs } = read([Buffer.from('{"model":"gpt\\/4","items":[{"t":"a\\nb\\ud83d\\ude00\\u00e9"}]}')]);
    expect(recs[0]).toMatchObject({ model: 'gpt/4', text: 5 });
  });

  it('a top-level array: each element is a record', () => {
    const { recs } = read([Buffer.from('[{"usage":{"a":1}},\r\n{"usage":{"a":2,"b":3}}]')]);
    expect(recs.map((r) => [r.a, r.b])).toEqual([[1, null], [2, 3]]);
  });

  it('a captured string decoded once per slot is still each record\'s own: repeated, changed to one of the same length, back, multi-byte, escaped, too long', () => {
    const models = ['gpt-4o', 'gpt-4o', 'gpt-4x', 'gpt-4o', 'gpt-4é', 'gpt-4\\/', 'x'.repeat(257), 'gpt-4o', 'gpt-4o'];
    const doc = '[' + models.map((m) => `{"model":"${m}"}`).join(',') + ']';
    const want = ['gpt-4o', 'gpt-4o', 'gpt-4x', 'gpt-4o', 'gpt-4é', 'gpt-4/', null, 'gpt-4o', 'gpt-4o'];
    for (const cuts of [[], [3, 20, 41, 77], Array.from({ length: 40 }, (_, i) => i * 9 + 1)]) {
      const { recs } = read(splitAt(Buffer.from(doc), cuts));
      expect(recs.map((r) => r.model)).toEqual(want);
    }
  });

  it('nesting deeper than the bound stops the reader without throwing', () => {
    const { recs, failed } = read([Buffer.from('['.repeat(100) + ']'.repeat(100))]);
    expect(failed).toBe(true);
    expect(recs).toEqual([]);
  });
});

describe('asking for usage: the body splice', () => {
  const changed = (s: string) => {
    const r = forceIncludeUsage(Buffer.from(s));
    if (r.kind !== 'changed') throw new Error(r.kind);
    return r.body.toString();
  };
  it.each([
    ['{"model":"m","stream":true}', '{"stream_options":{"include_usage":true},"model":"m","stream":true}'],
    [' { "stream" : true , "stream_options" : { } } ', ' { "stream" : true , "stream_options" : {"include_usage":true } } '],
    ['{"stream":true,"stream_options":{"x":1}}', '{"stream":true,"stream_options":{"include_usage":true,"x":1}}'],
    ['{"stream":true,"stream_options":{"include_usage":false}}', '{"stream":true,"stream_options":{"include_usage":true}}'],
    ['{"stream":true,"stream_options":{"include_usage":false,"include_usage":null}}', '{"stream":true,"stream_options":{"include_usage":true,"include_usage":true}}'],
    ['{"stream":true,"stream_options":null}', '{"stream":true,"stream_options":{"include_usage":true}}'],
    ['{"stream":true,"seed":123456789012345678901234567890,"m":"é\\"}"}', '{"stream_options":{"include_usage":true},"stream":true,"seed":123456789012345678901234567890,"m":"é\\"}"}'],
  ])('%s', (input, want) => {
    const out = changed(input);
    expect(out).toBe(want);
    expect(JSON.parse(out).stream_options.include_usage).toBe(true);
  });

  it('left alone: not streamed, already set; refused: not JSON, not an object, stream_options twice', () => {
    expect(forceIncludeUsage(Buffer.from('{"stream":false}'))).toEqual({ kind: 'unchanged', reason: 'not-streamed' });
    expect(forceIncludeUsage(Buffer.from('{"stream":true,"stream_options":{"include_usage":true}}'))).toEqual({ kind: 'unchanged', reason: 'already-set' });
    expect(forceIncludeUsage(Buffer.from('{"stream":true'))).toEqual({ kind: 'refused', reason: 'invalid-json' });
    expect(forceIncludeUsage(Buffer.from([0x7b, 0xff, 0x7d]))).toEqual({ kind: 'refused', reason: 'invalid-json' });
    expect(forceIncludeUsage(Buffer.from('[true]'))).toEqual({ kind: 'refused', reason: 'not-object' });
    expect(forceIncludeUsage(Buffer.from('{"stream":true,"stream_options":{},"stream_options":{}}'))).toEqual({ kind: 'refused', reason: 'duplicate-key', key: 'stream_options' });
  });

  it('random bodies: JSON.parse of the result equals the input with include_usage set', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }), (extra) => {
        const o = JSON.parse(JSON.stringify({ ...extra, stream: true }));
        const r = forceIncludeUsage(Buffer.from(JSON.stringify(o, null, 1)));
        if (r.kind === 'unchanged') return;
        expect(r.kind).toBe('changed');
        const back = JSON.parse((r as { body: Buffer }).body.toString());
        const so = o.stream_options;
        const wantSo = so !== null && typeof so === 'object' && !Array.isArray(so) ? { ...so, include_usage: true } : { include_usage: true };
        expect(back).toEqual({ ...o, stream_options: wantSo });
      }),
      { numRuns: 300 },
    );
  });
});

describe('prices', () => {
  it('the record codec: defaults, bounds, strict fields', () => {
    expect(pricesKey('kg')).toBe('kg:v1:prices');
    const enc = encodePrice({ input: 150000, output: 600000 });
    expect(enc).toBe('{"input":150000,"output":600000}');
    expect(priceOf(decodePrice(enc) as never)).toEqual({ input: 150000, output: 600000, cachedInput: 150000, cacheWrite: 150000 });
    expect(decodePrice('{"input":1,"output":2,"cached_input":0,"cache_write":3,"updated_at":5}')).toEqual({ input: 1, output: 2, cachedInput: 0, cacheWrite: 3, updatedAt: 5 });
    for (const bad of ['x', '{"input":-1,"output":1}', '{"input":1.5,"output":1}', `{"input":${MAX_PRICE_MICROS + 1},"output":1}`, '{"input":1}', '{"input":1,"output":1,"extra":1}', '{"input":"1","output":1}']) {
      expect(typeof decodePrice(bad)).toBe('string');
    }
    expect(() => encodePrice({ input: -1, output: 0 })).toThrow();
  });

  it('the table as named: exact, then provider/name for a bare name, then provider/*, then *; case-insensitive', () => {
    const t = PriceTable.fromHash({ 'gpt-4o-mini': encodePrice({ input: 1, output: 1 }), 'openai/o3': encodePrice({ input: 2, output: 2 }), 'anthropic/*': encodePrice({ input: 3, output: 3 }), '*': encodePrice({ input: 4, output: 4 }), broken: 'nope' });
    const at = (model: string | null, provider: string) => {
      const r = resolvePrice(t, null, provider, model, null, 0);
      return r && { matched: r.model, input: r.spec.base.input };
    };
    expect(at('GPT-4o-Mini', 'openai')).toEqual({ matched: 'gpt-4o-mini', input: 1n });
    expect(at('o3', 'openai')).toEqual({ matched: 'openai/o3', input: 2n });
    expect(at('o3', 'google')).toEqual({ matched: '*', input: 4n });
    expect(at('claude-x', 'anthropic')).toEqual({ matched: 'anthropic/*', input: 3n });
    expect(at(null, 'openai')).toEqual({ matched: '*', input: 4n });
    expect(t.corrupt).toHaveLength(1);
    expect(resolvePrice(new PriceTable(), null, 'openai', 'x', null, 0)).toBeNull();
  });

  /** A booking's cost at one flat price (the table's `*`), through the booking's own pricing. */
  const costMicros = (c: PricedUsage, p: PriceRecord) => {
    const r = priceBookingUsage({ table: PriceTable.fromHash({ '*': encodePrice(p) }), catalog: null }, 'openai', 'm', null, c, 0);
    return { amount: r.amount, clamped: r.clamped };
  };

  it('cost with cache writes and cache reads: each part at its own price, the fresh input without either, rounded up', () => {
    // Anthropic-like prices per million: input 3, cache read 0.3, cache write 3.75, output 15
    const price = { input: 3_000_000, output: 15_000_000, cachedInput: 300_000, cacheWrite: 3_750_000 };
    const c = { input_tokens: 5000, cached_input_tokens: 2048, cache_write_tokens: 1500, output_tokens: 301, reasoning_tokens: 0, estimated: false };
    // ((5000 − 2048 − 1500) × 3M + 2048 × 0.3M + 1500 × 3.75M + 301 × 15M) / 1e6
    // = 4356 + 614.4 + 5625 + 4515 = 15110.4 → 15111
    expect(costMicros(c, price)).toEqual({ amount: 15111, clamped: false });
    // a price without its own cache-write price charges cache writes at the input price
    // ((1452 + 1500) × 3M + 2048 × 0.3M + 301 × 15M) / 1e6 = 8856 + 614.4 + 4515 = 13985.4 → 13986
    expect(costMicros(c, priceOf({ input: 3_000_000, output: 15_000_000, cachedInput: 300_000 }))).toEqual({ amount: 13986, clamped: false });
  });

  it('cost: the documented rounding, exact for large numbers, clamped to the largest amount', () => {
    const price = { input: 2_500_000, output: 10_000_000, cachedInput: 1_250_000, cacheWrite: 3_125_000 };
    const c = { input_tokens: 1117, cached_input_tokens: 1024, cache_write_tokens: 0, output_tokens: 46, reasoning_tokens: 12, estimated: false };
    // (93*2.5M + 1024*1.25M + 46*10M) / 1e6 = 232.5 + 1280 + 460 = 1972.5 → 1973
    expect(costMicros(c, price)).toEqual({ amount: 1973, clamped: false });
    expect(costMicros({ ...c, input_tokens: 1, cached_input_tokens: 0, output_tokens: 0 }, { ...price, input: 1 })).toEqual({ amount: 1, clamped: false });
    expect(costMicros({ ...c, input_tokens: 0, cached_input_tokens: 0, output_tokens: 0 }, price)).toEqual({ amount: 0, clamped: false });
    const big = { input_tokens: 2 ** 40, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 2 ** 40, reasoning_tokens: 0, estimated: false };
    expect(costMicros(big, { input: 1000, output: 1000, cachedInput: 1000, cacheWrite: 1000 })).toEqual({ amount: Number((2n ** 41n * 1000n + 999_999n) / 1_000_000n), clamped: false });
    expect(costMicros(big, { input: MAX_PRICE_MICROS, output: MAX_PRICE_MICROS, cachedInput: 0, cacheWrite: 0 })).toEqual({ amount: MAX_AMOUNT_MICROS, clamped: true });
  });
});
