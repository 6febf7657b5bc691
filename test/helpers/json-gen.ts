/**
 * fast-check generators of JSON documents written the many ways a client (or an attacker) can
 * write them: escapes in keys and values (`\uXXXX` in either hex case, `\/`, short escapes),
 * duplicate and look-alike keys, nesting, and whitespace between every token.
 */
import fc from 'fast-check';

export type Json = null | boolean | number | string | Json[] | { readonly entries: ReadonlyArray<readonly [string, Json]> };

/** How each string's code units are written: 0 plain, 1 `\u` lower hex, 2 `\u` upper hex, 3 short escape when one exists. */
export interface Style {
  readonly escapes: readonly number[];
  readonly spaces: readonly string[];
  readonly escapeKeys: boolean;
}

export const MODEL_NAMES = ['gpt-4o', 'openai/gpt-4o-mini', 'claude-3-5-haiku-latest', 'models/gemini-2.0-flash', 'a/b:c@d'];
export const LOOK_ALIKE_KEYS = ['Model', 'MODEL', 'mOdel', 'model ', ' model', 'model\u0000', 'ｍｏｄｅｌ', 'models', 'mode', 'modeL'];

const SHORT: Record<string, string> = { '"': '\\"', '\\': '\\\\', '/': '\\/', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

export function encodeString(s: string, style: Style, escape: boolean): string {
  let out = '"';
  for (let k = 0; k < s.length; k++) {
    const ch = s[k]!;
    const c = s.charCodeAt(k);
    const mode = escape ? (style.escapes[k % style.escapes.length] ?? 0) : 0;
    const hex = c.toString(16).padStart(4, '0');
    const lone = (c >= 0xd800 && c <= 0xdfff) && !(c <= 0xdbff && (s.charCodeAt(k + 1) & 0xfc00) === 0xdc00) && !(c >= 0xdc00 && k > 0 && (s.charCodeAt(k - 1) & 0xfc00) === 0xd800);
    if (mode === 1 || lone) out += `\\u${hex}`;
    else if (mode === 2) out += `\\u${hex.toUpperCase()}`;
    else if (mode === 3 && SHORT[ch] !== undefined) out += SHORT[ch];
    else if (ch === '"' || ch === '\\') out += SHORT[ch];
    else if (c < 0x20) out += SHORT[ch] ?? `\\u${hex}`;
    else out += ch;
  }
  return out + '"';
}

/** Serialises `v` with the given style; `ws()` supplies the whitespace between tokens. */
export function serialize(v: Json, style: Style, escapeValues = true): string {
  let n = 0;
  const ws = () => style.spaces[n++ % style.spaces.length] ?? '';
  const go = (x: Json): string => {
    if (x === null || typeof x === 'boolean' || typeof x === 'number') return JSON.stringify(x);
    if (typeof x === 'string') return encodeString(x, style, escapeValues);
    if (Array.isArray(x)) return `[${ws()}${x.map((e) => go(e)).join(`${ws()},${ws()}`)}${ws()}]`;
    const members = (x as { entries: ReadonlyArray<readonly [string, Json]> }).entries.map(
      ([k, e]) => `${encodeString(k, style, style.escapeKeys)}${ws()}:${ws()}${go(e)}`,
    );
    return `{${ws()}${members.join(`${ws()},${ws()}`)}${ws()}}`;
  };
  return `${ws()}${go(v)}${ws()}`;
}

export const styleArb: fc.Arbitrary<Style> = fc.record({
  escapes: fc.array(fc.constantFrom(0, 0, 0, 1, 2, 3), { minLength: 1, maxLength: 12 }),
  spaces: fc.array(fc.constantFrom('', '', ' ', '\n', '\t', '\r\n  '), { minLength: 1, maxLength: 8 }),
  escapeKeys: fc.boolean(),
});

const keyArb = fc.oneof(
  { weight: 2, arbitrary: fc.constant('model') },
  { weight: 2, arbitrary: fc.constantFrom(...LOOK_ALIKE_KEYS) },
  { weight: 4, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
);

const leafArb: fc.Arbitrary<Json> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom(...MODEL_NAMES),
);

export const jsonArb = fc.letrec<{ value: Json; obj: Json }>((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, leafArb, fc.array(tie('value'), { maxLength: 4 }), tie('obj')),
  obj: fc.record({ entries: fc.array(fc.tuple(keyArb, tie('value')), { maxLength: 6 }) }),
}));

/** A document that every parser reads the same way: unique plain keys, one `model` of a normal name. */
export const cleanDocArb = fc
  .record({
    model: fc.constantFrom(...MODEL_NAMES),
    others: fc.uniqueArray(fc.tuple(fc.stringMatching(/^[a-z_]{1,10}$/), jsonArb.value), { selector: ([k]) => k, maxLength: 6 }),
    at: fc.nat(),
  })
  .map(({ model, others, at }) => {
    const entries: Array<readonly [string, Json]> = others.filter(([k]) => k !== 'model' && k !== 'models' && k !== 'mode');
    entries.splice(at % (entries.length + 1), 0, ['model', model]);
    return { doc: { entries } as Json, model };
  });
