/**
 * The Check skips the body-reference scan of a chat body when the usage guarantee's validating scan
 * (`usageScan` with `REFERENCE_KEYS`) saw no key a reference hangs on and the body is within the
 * reference scan's bounds (`mayNameReferences`). Differential: wherever the skip is taken,
 * `scanReferences` of the same bytes reads no reference and refuses nothing; and the validating
 * scan's own answer (refusal, top-level counts) is the one it gives without the deep names.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { usageRefusal, usageScan } from '../../src/core/include-usage.ts';
import { mayNameReferences, REFERENCE_KEYS, scanReferences } from '../../src/core/endpoints/references.ts';
import { scanTopLevelKeys } from '../../src/core/model/json-scan.ts';

const NONE = { kind: 'read', responses: [], stateful: null };

/** Whether the Check skips the reference scan for `buf` (after the guarantee let it through). */
function skipped(buf: Buffer): boolean {
  const u = usageScan(buf, REFERENCE_KEYS);
  return u.kind === 'object' && !mayNameReferences(u);
}

/** The property: a skip only where the full scan finds nothing; the guarantee's answer unchanged. Returns whether skipped. */
function check(b: Buffer | string): boolean {
  const buf = typeof b === 'string' ? Buffer.from(b) : b;
  const u = usageScan(buf, REFERENCE_KEYS);
  expect(u.kind === 'object' ? null : u).toEqual(usageRefusal(buf));
  if (u.kind === 'object') {
    const plain = scanTopLevelKeys(buf, ['stream', 'stream_options']);
    expect(plain.kind === 'object' && plain.counts).toEqual(u.counts);
  }
  const skip = skipped(buf);
  if (skip) expect(scanReferences(buf)).toEqual(NONE);
  return skip;
}

describe('skipping the reference scan after the usage scan', () => {
  it('every reference key, at any depth, spelled plainly or escaped, is seen; decoys are not', () => {
    const keys = ['previous_response_id', 'conversation', 'conversation_id', 'file_id', 'input_file_id', 'training_file', 'validation_file', 'container', 'cachedContent', 'cached_content', 'prompt', 'file_ids', 'vector_store_ids', 'fileUri', 'file_uri'];
    for (const k of keys) {
      const esc = k.replace('_', '\\u005f').replace(/^(.)/, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
      for (const spelled of [k, esc]) {
        for (const body of [`{"${spelled}":"x"}`, `{"messages":[{"content":[{"${spelled}":"x"}]}]}`, `{"a":{"b":[[{"${spelled}":{"id":"y"}}]]}}`]) {
          expect(skipped(Buffer.from(body)), body).toBe(false);
          check(body);
        }
      }
    }
    // decoys: in values, longer or shorter keys, other escapes that decode to other names
    for (const body of [
      '{"model":"m","messages":[{"role":"user","content":"file_id previous_response_id \\"conversation\\":1"}]}',
      '{"file_idx":"a","xfile_id":"b","file_i":"c","prompts":[],"containers":{},"fileuri":"gs://x"}',
      '{"file\\/id":"a","file\\nid":"b","id":"c","conversation\\t":{"id":"d"}}',
    ]) {
      expect(skipped(Buffer.from(body)), body).toBe(true);
      check(body);
    }
  });

  it('bodies past the reference scan\'s bounds are not skipped: nesting 512 deep, a number of 400 bytes', () => {
    for (const deep of [509, 510, 511, 512, 513]) {
      for (const inner of ['', '1', '{}', '{"a":1}']) {
        const body = `{"a":${'['.repeat(deep - 1)}${inner}${']'.repeat(deep - 1)}}`;
        const refs = scanReferences(Buffer.from(body));
        // skipped exactly where the full scan reads it (and then it finds nothing)
        expect(check(body), `${deep} ${inner}`).toBe(refs.kind === 'read');
      }
    }
    for (const len of [399, 400, 401, 402]) {
      for (const num of ['1'.repeat(len), `-${'1'.repeat(len - 1)}`, `0.${'5'.repeat(len - 2)}`, `1e${'1'.repeat(len - 2)}`]) {
        for (const body of [`{"a":${num}}`, `{"a":[${num}]}`, `{"a":{"b":${num}}}`]) {
          const refs = scanReferences(Buffer.from(body));
          expect(check(body), `${len} ${body.slice(0, 20)}`).toBe(refs.kind === 'read');
        }
      }
    }
  });

  it('random bodies with reference keys, decoys and escapes, valid and damaged: a skip only where the scan finds nothing', () => {
    const key = fc.constantFrom(
      'model', 'messages', 'content', 'stream', 'id', 'type', 'text',
      'file_id', 'file\\u005fid', 'fil\\u0065_ids', 'conversation', 'prompt', 'previous_response_id', 'fileUri', 'cachedContent', 'container', 'vector_store_ids',
      'file_idx', 'file\\/id', 'promp', 'file\\u0020id', 'caf\u00e9', '\\n',
    );
    const scalar = fc.oneof(
      fc.constantFrom('"resp_1"', '"file-abc"', '"gs://b/o"', '"files/x"', '"file_id"', '"\\u0066ile_id"', '"\\\\u0041"', '1', '-0.5e3', 'true', 'null', '""'),
      fc.jsonValue({ maxDepth: 1 }).map((v) => JSON.stringify(v)),
    );
    const value = fc.letrec<{ v: string }>((tie) => ({
      v: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        scalar,
        fc.array(tie('v'), { maxLength: 3 }).map((a) => `[${a.join(',')}]`),
        fc.array(fc.tuple(key, tie('v')), { maxLength: 3 }).map((m) => `{${m.map(([k, v]) => `"${k}":${v}`).join(',')}}`),
      ),
    })).v;
    const body = fc.array(fc.tuple(key, value), { maxLength: 5 }).map((m) => `{${m.map(([k, v]) => ` "${k}" : ${v}`).join(',')}}`);
    let skips = 0;
    let found = 0;
    fc.assert(
      fc.property(body, fc.nat(), fc.integer({ min: 0, max: 4 }), (b, at, damage) => {
        const buf = Buffer.from(b);
        if (damage === 1 && buf.length) buf[at % buf.length] = 0x2c; // a comma somewhere
        if (damage === 2 && buf.length) buf[at % buf.length] = 0xff; // not UTF-8
        if (damage === 3 && buf.length) buf[at % buf.length] = 0x5c; // a backslash somewhere
        const x = damage === 4 ? buf.subarray(0, at % (buf.length + 1)) : buf;
        if (check(x)) skips++;
        const r = scanReferences(x);
        if (r.kind === 'read' && (r.stateful !== null || r.responses.length > 0)) found++;
      }),
      { numRuns: 5000 },
    );
    // neither side vacuous
    expect(skips).toBeGreaterThan(100);
    expect(found).toBeGreaterThan(100);
  });
});
