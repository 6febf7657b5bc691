/**
 * For a restricted key, the Check's usage guarantee reads the body's model in its own pass
 * (`usageScan(..., readModel)`), and the model rule uses that answer instead of scanning again.
 * Differential: wherever the guarantee lets the body through, the answer it carries is exactly
 * `scanJsonModel`'s for the same bytes; and asking for it changes nothing else.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { usageScan } from '../../src/core/include-usage.ts';
import { REFERENCE_KEYS } from '../../src/core/endpoints/references.ts';
import { scanJsonModel } from '../../src/core/model/json-scan.ts';

/** Returns the model answer carried, or null when the guarantee refused the body. */
function check(b: Buffer | string): unknown {
  const buf = typeof b === 'string' ? Buffer.from(b) : b;
  const withModel = usageScan(buf, REFERENCE_KEYS, true);
  const without = usageScan(buf, REFERENCE_KEYS);
  if (withModel.kind !== 'object') {
    expect(without).toEqual(withModel);
    return null;
  }
  const { model, ...rest } = withModel;
  expect(rest).toEqual(without);
  expect(model).toEqual(scanJsonModel(buf));
  return model;
}

describe('the model read in the usage scan', () => {
  it('every answer of scanJsonModel: a model, none, a repeat, a look-alike, an escaped key, a non-string', () => {
    expect(check('{"model":"gpt-4o","stream":true}')).toEqual({ kind: 'model', model: 'gpt-4o' });
    expect(check('{"model":"gpt-\\u0034o"}')).toEqual({ kind: 'model', model: 'gpt-4o' });
    expect(check('{"messages":[{"model":"x"}]}')).toEqual({ kind: 'absent' });
    expect(check('{}')).toEqual({ kind: 'absent' });
    expect(check('{"model":"a","model":"a"}')).toEqual({ kind: 'refused', refusal: 'duplicate-model' });
    expect(check('{"model":1}')).toEqual({ kind: 'refused', refusal: 'not-string' });
    expect(check('{"model":null,"model":"a"}')).toEqual({ kind: 'refused', refusal: 'not-string' });
    expect(check('{"m\\u006fdel":"a"}')).toEqual({ kind: 'refused', refusal: 'escaped-model-key' });
    expect(check('{"Model":"a"}')).toMatchObject({ kind: 'refused' });
    expect(check('{"model ":"a","model":"b"}')).toMatchObject({ kind: 'refused' });
    // the first refusal in key order, as scanJsonModel answers
    expect(check('{"model":"a","Model":"b","model":"c"}')).toEqual(scanJsonModel('{"model":"a","Model":"b","model":"c"}'));
    // refused by the guarantee: nothing carried
    expect(check('{"model":"a","stream":1,"stream":2}')).toBeNull();
    expect(check('\ufeff{"model":"a"}')).toBeNull();
  });

  it('random bodies, valid and damaged: the same model answer as scanJsonModel wherever the guarantee passes', () => {
    const key = fc.constantFrom('model', 'Model', 'MODEL', 'm\\u006fdel', 'model_name', 'models', 'mode', 'stream', 'messages', 'a', 'model ', 'model\\u0000', 'mod\u00e9l', 'file_id');
    const value = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
      fc.constantFrom('"gpt-4o"', '"gpt-\\u0034o"', '"a\\"b"', '""', '"\\ud800"', '{"model":"x"}', '[1,"model"]', 'null', '1e5'),
    );
    const body = fc.array(fc.tuple(key, value), { maxLength: 6 }).map((m) => `{${m.map(([k, v]) => `"${k}":${v}`).join(' , ')}}`);
    let carried = 0;
    fc.assert(
      fc.property(body, fc.nat(), fc.integer({ min: 0, max: 3 }), (b, at, damage) => {
        const buf = Buffer.from(b);
        if (damage === 1 && buf.length) buf[at % buf.length] = 0x2c;
        if (damage === 2 && buf.length) buf[at % buf.length] = 0x5c;
        if (check(damage === 3 ? buf.subarray(0, at % (buf.length + 1)) : buf) !== null) carried++;
      }),
      { numRuns: 5000 },
    );
    expect(carried).toBeGreaterThan(1000);
  });
});
