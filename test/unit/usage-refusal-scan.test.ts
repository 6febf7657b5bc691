/**
 * The Check's usage guarantee (`usageRefusal`) reads a chat body with one validating scan instead
 * of `JSON.parse`; its answer must be the one the parse-based rule of `forceIncludeUsage` (metering's,
 * unchanged) gives for the same bytes: the refusal, or none where metering would change or leave the body.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forceIncludeUsage, usageRefusal } from '../../src/core/include-usage.ts';

/** The parse-based rule's answer: its refusal, or null. */
const reference = (b: Buffer) => {
  const r = forceIncludeUsage(b);
  return r.kind === 'refused' ? r : null;
};

const same = (b: Buffer | string) => {
  const buf = typeof b === 'string' ? Buffer.from(b) : b;
  expect(usageRefusal(buf)).toEqual(reference(buf));
  return usageRefusal(buf);
};

describe('usageRefusal: one scan, the answer of the full parse', () => {
  it('hostile bodies: decoys below the top level and in strings, escaped and repeated keys, a BOM, bad UTF-8, trailing bytes', () => {
    expect(same('{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}')).toBeNull();
    // decoys: repeated keys nested or inside strings are not the top level's
    expect(same('{"stream":true,"a":{"stream":1,"stream":2,"stream_options":{},"stream_options":[]}}')).toBeNull();
    expect(same('{"stream":true,"messages":[{"content":"\\"stream\\":true,\\"stream\\":false"}]}')).toBeNull();
    expect(same('{"stream":true,"stream_options":{"include_usage":false,"include_usage":true}}')).toBeNull();
    // repeats at the top level, spelled the same or with escapes (JSON.parse decodes keys before they are compared)
    expect(same('{"stream":true,"stream":false}')).toEqual({ kind: 'refused', reason: 'duplicate-key', key: 'stream' });
    expect(same('{"stream":true,"str\\u0065am":false}')).toEqual({ kind: 'refused', reason: 'duplicate-key', key: 'stream' });
    expect(same('{"stream_options":{},"stream":1,"stream_\\u006fptions":null}')).toEqual({ kind: 'refused', reason: 'duplicate-key', key: 'stream_options' });
    expect(same('{"stream":true,"stream":false,"stream_options":{},"stream_options":{}}')).toEqual({ kind: 'refused', reason: 'duplicate-key', key: 'stream' });
    // not the key: a longer one, an escaped other one, a non-ASCII one of the same byte length
    expect(same('{"stream":true,"streams":1,"stream\\n":2,"strea\u00e9":3}')).toBeNull();
    // a repeat followed by invalid JSON: invalid, as the parse decides first
    expect(same('{"stream":true,"stream":false,}')).toEqual({ kind: 'refused', reason: 'invalid-json' });
    expect(same('{"stream":true} x')).toEqual({ kind: 'refused', reason: 'invalid-json' });
    expect(same(Buffer.from([0xef, 0xbb, 0xbf, ...Buffer.from('{"stream":true}')]))).toEqual({ kind: 'refused', reason: 'invalid-json' });
    expect(same(Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x3a, 0x31, 0x7d]))).toEqual({ kind: 'refused', reason: 'invalid-json' });
    for (const b of ['', '   ', '[1]', '"x"', '1', 'null', 'true', '{"a":01}', '{"a":"\u0001"}', '{"a":"\\x"}', "{'a':1}", '{"a":1,}', '[', '{"a":[1,2}']) same(b);
    // lone surrogates in escapes are valid JSON
    expect(same('{"stream":"\\ud800","x":"\\udc00\\ud800"}')).toBeNull();
    // nesting far deeper than a recursive reader goes
    expect(same(`{"stream":true,"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`)).toBeNull();
  });

  it('random bodies, valid and damaged: the same answer as the parse-based rule', () => {
    const key = fc.constantFrom('stream', 'stream_options', 'str\\u0065am', 'model', 'a', 'include_usage', 'streamx');
    const value = fc.oneof(fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)), fc.constantFrom('{"stream":1,"stream":2}', '"\\"stream\\":1"', 'true'));
    const body = fc.array(fc.tuple(key, value), { maxLength: 6 }).map((m) => `{${m.map(([k, v]) => `"${k}":${v}`).join(',')}}`);
    fc.assert(
      fc.property(body, fc.nat(), fc.integer({ min: 0, max: 3 }), (b, at, damage) => {
        const buf = Buffer.from(b);
        if (damage === 1 && buf.length) buf[at % buf.length] = 0x2c; // a comma somewhere
        if (damage === 2 && buf.length) buf[at % buf.length] = 0xff; // not UTF-8
        same(damage === 3 ? buf.subarray(0, at % (buf.length + 1)) : buf);
      }),
      { numRuns: 2000 },
    );
  });
});
