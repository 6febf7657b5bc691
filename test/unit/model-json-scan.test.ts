/**
 * The streaming top-level `model` reader (src/core/model/json-scan.ts): agreement with JSON.parse
 * (property-based), the cases where it must refuse although JSON.parse has an answer, and bodies
 * too large or too deep for a naive reader.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_SCAN_BYTES, scanJsonModel, type JsonModelScan } from '../../src/core/model/json-scan.ts';
import { cleanDocArb, jsonArb, serialize, styleArb, type Json } from '../helpers/json-gen.ts';

/** What JSON.parse makes of the bytes, decoded the standard way (TextDecoder drops one leading BOM). */
function reference(bytes: Uint8Array): { ok: true; doc: unknown } | { ok: false } {
  try {
    return { ok: true, doc: JSON.parse(new TextDecoder().decode(bytes)) };
  } catch {
    return { ok: false };
  }
}

/** The scanner's rule: a model or absence only when JSON.parse says exactly the same. */
function expectAgrees(bytes: Uint8Array, r: JsonModelScan): void {
  if (r.kind === 'refused') return;
  const ref = reference(bytes);
  expect(ref.ok).toBe(true);
  const doc = (ref as { doc: unknown }).doc;
  expect(doc !== null && typeof doc === 'object' && !Array.isArray(doc)).toBe(true);
  if (r.kind === 'model') expect((doc as Record<string, unknown>).model).toBe(r.model);
  else expect(Object.hasOwn(doc as object, 'model')).toBe(false);
}

const scan = (s: string | Uint8Array) => scanJsonModel(s);

describe('reads the top-level model', () => {
  it.each([
    ['plain', '{"model":"gpt-4o","messages":[]}', 'gpt-4o'],
    ['model last', '{"messages":[{"role":"user","content":"hi"}],"stream":true,"model":"openai/gpt-4o"}', 'openai/gpt-4o'],
    ['whitespace everywhere', ' \n\t{ \r\n "model" \t:\n "x" \n} \n', 'x'],
    ['escaped slash (PHP json_encode)', '{"model":"openai\\/gpt-4o"}', 'openai/gpt-4o'],
    ['unicode escape in the value', '{"model":"gpt\\u002d4o"}', 'gpt-4o'],
    ['nested model keys are not top-level', '{"a":{"model":"evil"},"b":[{"model":"evil"}],"model":"good"}', 'good'],
    ['a key containing "model"', '{"model_extra":"x","the model":"y","model":"good"}', 'good'],
    ['a string value containing a fake key', '{"x":"\\",\\"model\\":\\"evil","model":"good"}', 'good'],
    ['UTF-8 BOM (dropped like TextDecoder does)', '\ufeff{"model":"m"}', 'm'],
    ['non-ASCII elsewhere', '{"content":"héllo 😀 \\ud83d\\ude00","model":"m"}', 'm'],
    ['numbers of every shape', '{"n":[0,-0,1.5,-2e10,3E+2,4e-3,123456789012345678901234567890],"model":"m"}', 'm'],
  ])('%s', (_n, body, model) => {
    const r = scan(body);
    expect(r).toEqual({ kind: 'model', model });
    expectAgrees(Buffer.from(body), r);
  });

  it('bytes and text give the same answer', () => {
    const body = '{"x":[1,{"y":"z"}],"model":"claude-3-5-haiku-latest"}';
    expect(scan(Buffer.from(body))).toEqual(scan(body));
    expect(scan(new Uint8Array(Buffer.from(body)))).toEqual(scan(body));
  });

  it('reads a body at an unaligned offset of a larger buffer', () => {
    const big = Buffer.from(`xyz{"pad":"${'a'.repeat(100)}","model":"m"}`);
    for (const off of [1, 2, 3]) {
      const view = new Uint8Array(big.buffer, big.byteOffset + 3, big.length - 3).subarray(0);
      expect(scan(view)).toEqual({ kind: 'model', model: 'm' });
      expect(scan(Buffer.from(`${' '.repeat(off)}{"p":"${'b'.repeat(50 + off)}\\n${'c'.repeat(40)}","model":"m${off}"}`))).toEqual({ kind: 'model', model: `m${off}` });
    }
  });

  it('no model key at all is absent, not refused', () => {
    expect(scan('{}')).toEqual({ kind: 'absent' });
    expect(scan('{"messages":[],"nested":{"model":"x"}}')).toEqual({ kind: 'absent' });
  });
});

describe('refuses whatever is not certain', () => {
  it.each([
    ['duplicate model keys', '{"model":"cheap","model":"expensive"}', 'duplicate-model'],
    ['duplicate far apart', '{"model":"cheap","x":[1,2,3],"model":"cheap"}', 'duplicate-model'],
    ['upper-case key (Go matches case-insensitively)', '{"MODEL":"expensive","model":"cheap"}', 'model-like-key'],
    ['mixed-case key alone', '{"Model":"expensive"}', 'model-like-key'],
    ['key with a NUL (C strings stop there)', '{"model\\u0000":"expensive","model":"cheap"}', 'model-like-key'],
    ['key with a trailing space', '{"model ":"expensive","model":"cheap"}', 'model-like-key'],
    ['full-width key (NFKC folds it)', '{"ｍｏｄｅｌ":"expensive","model":"cheap"}', 'model-like-key'],
    ['escaped key spelling model', '{"mod\\u0065l":"expensive"}', 'escaped-model-key'],
    ['escaped key next to a plain one', '{"model":"cheap","\\u006dodel":"expensive"}', 'escaped-model-key'],
    ['numeric model', '{"model":4}', 'not-string'],
    ['null model', '{"model":null}', 'not-string'],
    ['object model', '{"model":{"name":"x"}}', 'not-string'],
    ['array body', '[{"model":"x"}]', 'not-object'],
    ['string body', '"model"', 'not-object'],
    ['number body', '42', 'not-object'],
    ['empty body', '', 'invalid-json'],
    ['whitespace body', ' \n ', 'invalid-json'],
    ['two documents', '{"model":"cheap"}{"model":"expensive"}', 'invalid-json'],
    ['trailing garbage', '{"model":"cheap"} //', 'invalid-json'],
    ['trailing comma', '{"model":"cheap",}', 'invalid-json'],
    ['single quotes', "{'model':'cheap'}", 'invalid-json'],
    ['unquoted key', '{model:"cheap"}', 'invalid-json'],
    ['leading zero', '{"a":01,"model":"m"}', 'invalid-json'],
    ['bare minus', '{"a":-,"model":"m"}', 'invalid-json'],
    ['dot without digits', '{"a":1.,"model":"m"}', 'invalid-json'],
    ['exponent without digits', '{"a":1e,"model":"m"}', 'invalid-json'],
    ['NaN', '{"a":NaN,"model":"m"}', 'invalid-json'],
    ['short literal', '{"a":tru,"model":"m"}', 'invalid-json'],
    ['bad escape', '{"a":"\\x41","model":"m"}', 'invalid-json'],
    ['short \\u escape', '{"a":"\\u12","model":"m"}', 'invalid-json'],
    ['raw newline in a string', '{"a":"line\nbreak","model":"m"}', 'invalid-json'],
    ['raw tab in a long string', `{"a":"${'x'.repeat(40)}\t${'y'.repeat(40)}","model":"m"}`, 'invalid-json'],
    ['raw control byte in a long string', `{"a":"${'x'.repeat(40)}\u0001${'y'.repeat(40)}","model":"m"}`, 'invalid-json'],
    ['unclosed nesting', '{"a":[[[{"b":1}]],"model":"m"}', 'invalid-json'],
    ['mismatched brackets', '{"a":[1},"model":"m"}', 'invalid-json'],
    ['BOM after whitespace', ' \ufeff{"model":"m"}', 'invalid-json'],
    ['two BOMs', '\ufeff\ufeff{"model":"m"}', 'invalid-json'],
    ['lone surrogate in text form', '{"model":"m","x":"\ud800"}', 'invalid-utf8'],
  ])('%s → %s', (_n, body, refusal) => {
    expect(scan(body)).toEqual({ kind: 'refused', refusal });
  });

  it.each([
    ['invalid UTF-8 in a nested string', Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('","model":"m"}')])],
    ['overlong encoding of a quote', Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xc0, 0xa2]), Buffer.from('","model":"m"}')])],
    ['UTF-8 encoded surrogate', Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('","model":"m"}')])],
    ['UTF-16LE body', Buffer.from('{"model":"m"}', 'utf16le')],
    ['UTF-16LE body with BOM', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{"model":"m"}', 'utf16le')])],
  ])('bytes: %s', (_n, bytes) => {
    expect(scan(bytes).kind).toBe('refused');
  });

  it('a string body with lone surrogates is refused rather than re-encoded', () => {
    expect(scan('{"model":"\ud83d"}')).toEqual({ kind: 'refused', refusal: 'invalid-utf8' });
  });

  it('a lone surrogate escape is returned exactly as JSON.parse reads it (the name check refuses it later)', () => {
    const r = scan('{"model":"m\\ud800"}');
    expect(r).toEqual({ kind: 'model', model: 'm\ud800' });
  });

  it('every proper prefix of a document is refused', () => {
    const body = '{"messages":[{"role":"user","content":"a\\"b\\u00e9"}],"n":-1.5e3,"ok":true,"model":"gpt-4o"}';
    for (let k = 0; k < body.length; k++) expect(scan(body.slice(0, k)).kind).toBe('refused');
    expect(scan(body)).toEqual({ kind: 'model', model: 'gpt-4o' });
  });
});

describe('size and depth', () => {
  it('deep nesting (1,000,000 arrays) is read without recursion', () => {
    const depth = 1_000_000;
    const body = `{"a":${'['.repeat(depth)}${']'.repeat(depth)},"model":"m"}`;
    expect(scan(body)).toEqual({ kind: 'model', model: 'm' });
    expect(scan(`{"a":${'[{"b":'.repeat(200_000)}1${'}]'.repeat(200_000)},"model":"m"}`)).toEqual({ kind: 'model', model: 'm' });
    expect(scan(`{"a":${'['.repeat(depth)}${']'.repeat(depth - 1)},"model":"m"}`).kind).toBe('refused');
  });

  it('an 8 MiB body with the model last is read', () => {
    const chunk = JSON.stringify({ role: 'user', content: `${'lorem ipsum '.repeat(40)}\n"quoted" é 😀`, n: [1.5, -2e3, true, null] });
    const parts: string[] = [];
    let size = 0;
    while (size < 8 * 1024 * 1024 - chunk.length - 64) {
      parts.push(chunk);
      size += chunk.length + 1;
    }
    const image = 'A'.repeat(256 * 1024); // a long plain string, like base64 image data
    const body = Buffer.from(`{"messages":[${parts.join(',')}],"image":"${image}","model":"openai/gpt-4o"}`);
    expect(body.length).toBeGreaterThan(8 * 1024 * 1024);
    expect(scan(body)).toEqual({ kind: 'model', model: 'openai/gpt-4o' });
    expect(scan(Buffer.concat([body, Buffer.from('x')])).kind).toBe('refused');
  });

  it('a body over the scan limit is refused without reading it', () => {
    expect(scan(Buffer.alloc(MAX_SCAN_BYTES + 1, 0x20))).toEqual({ kind: 'refused', refusal: 'too-large' });
  });
});

describe('properties (fast-check)', () => {
  it('for any generated document, the answer is JSON.parse(body).model or a refusal', () => {
    fc.assert(
      fc.property(jsonArb.obj, styleArb, (doc, style) => {
        const bytes = Buffer.from(serialize(doc, style));
        expectAgrees(bytes, scan(bytes));
      }),
      { numRuns: 3000 },
    );
  });

  it('any generated value at the top level, not only objects', () => {
    fc.assert(
      fc.property(jsonArb.value, styleArb, (doc, style) => {
        const bytes = Buffer.from(serialize(doc, style));
        const r = scan(bytes);
        expectAgrees(bytes, r);
        if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) expect(r.kind).toBe('refused');
      }),
      { numRuns: 1000 },
    );
  });

  it('mutated documents (a byte changed, inserted or cut) never yield a different model', () => {
    fc.assert(
      fc.property(
        jsonArb.obj,
        styleArb,
        fc.nat(),
        fc.integer({ min: 0, max: 255 }),
        fc.constantFrom('replace', 'insert', 'cut'),
        (doc, style, at, byte, how) => {
          const b = Buffer.from(serialize(doc, style));
          const k = b.length === 0 ? 0 : at % b.length;
          const mutated =
            how === 'cut'
              ? b.subarray(0, k)
              : how === 'insert'
                ? Buffer.concat([b.subarray(0, k), Buffer.from([byte]), b.subarray(k)])
                : Buffer.concat([b.subarray(0, k), Buffer.from([byte]), b.subarray(k + 1)]);
          expectAgrees(mutated, scan(mutated));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('fast-check JSON texts (with and without a model) agree or refuse', () => {
    fc.assert(
      fc.property(fc.json(), fc.constantFrom(...['', '"gpt-4o"', '1', 'null']), (text, model) => {
        const body = model === '' || !text.startsWith('{') ? text : text.replace(/^\{/, text === '{}' ? `{"model":${model}` : `{"model":${model},`);
        const bytes = Buffer.from(body);
        expectAgrees(bytes, scan(bytes));
      }),
      { numRuns: 2000 },
    );
  });

  it('a clean document (unique keys, one plain "model") is always read, wherever the model is', () => {
    fc.assert(
      fc.property(cleanDocArb, styleArb, ({ doc, model }, style) => {
        const bytes = Buffer.from(serialize(doc as Json, { ...style, escapeKeys: false }));
        expect(scan(bytes)).toEqual({ kind: 'model', model });
      }),
      { numRuns: 2000 },
    );
  });
});
