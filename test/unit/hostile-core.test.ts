/**
 * Property tests on the pure decision core: random header maps, look-alikes and
 * hostile text. The core never throws, allows only when every rule passes, and every deny body is
 * valid JSON in the entry's shape with a contract code.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DENY_CODES, DENY_STATUS, type DenyCode } from '../../src/core/codes.ts';
import { findCredential, KEY_HEADERS, trimOws, type HeaderValue } from '../../src/core/credentials.ts';
import { deny } from '../../src/core/decision.ts';
import { denyResponse } from '../../src/core/deny-response.ts';
import { FAMILIES, resolveFamily, type Family } from '../../src/core/families/index.ts';
import { generateKey, isWellFormedKey, maskKey } from '../../src/core/key-format.ts';

const KEY = generateKey();

/** Hostile strings: control chars, unicode, look-alikes of "Bearer", commas, huge values. */
const hostile = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.string({ unit: 'grapheme', maxLength: 32 }),
  fc.constantFrom(
    KEY,
    ` ${KEY}\t`,
    `Bearer ${KEY}`,
    `bEaReR ${KEY}`,
    `Веarer ${KEY}`, // Cyrillic В, е
    `Ｂearer ${KEY}`, // fullwidth B
    `Bearer\u00a0${KEY}`, // NBSP is not OWS
    `Bearer ${KEY}\u200b`, // zero-width space
    `Bearer ${KEY},`,
    `Bearer ${KEY}, Bearer ${KEY}`,
    `${KEY},${KEY}`,
    `Basic ${KEY}`,
    'Bearer',
    '',
    ' ',
    ',',
    KEY.toUpperCase(),
    KEY.slice(0, -1),
  ),
  fc.string({ maxLength: 20_000 }).map((s) => s.repeat(3)),
);

const headerValue: fc.Arbitrary<HeaderValue> = fc.oneof(
  fc.constant(undefined),
  hostile,
  fc.array(hostile, { minLength: 0, maxLength: 3 }),
  fc.constant(['Bearer', `Bearer ${KEY}`]),
);

/** The decision table's oracle (README "What it does"), written independently of the implementation: the key the request carries. */
function oracleKey(h: Record<string, HeaderValue>): string | null {
  let values: { name: string; v: string }[] = [];
  for (const name of KEY_HEADERS) {
    const raw = h[name];
    const list = raw === undefined ? [] : typeof raw === 'string' ? [raw] : raw;
    for (const item of list) for (const part of item.split(',')) {
      const v = part.replace(/^[ \t]+|[ \t]+$/g, '');
      if (v !== '') values.push({ name, v });
    }
  }
  // A lone "Bearer" with no token is an empty credential (docs/decisions.md); with other values it counts.
  const auth = values.filter((x) => x.name === 'authorization');
  if (auth.length === 1 && /^bearer$/i.test(auth[0]!.v)) values = values.filter((x) => x.name !== 'authorization');
  if (values.length !== 1) return null;
  const { name, v } = values[0]!;
  if (name !== 'authorization') return v;
  const m = /^bearer[ \t]+(.+)$/is.exec(v);
  return m && /^bearer$/i.test(v.split(/[ \t]/)[0]!) ? m[1]!.replace(/^[ \t]+/, '') : null;
}

describe('credentials over random header maps', () => {
  it('never throws and finds a key only when exactly one header carries exactly one value', () => {
    fc.assert(
      fc.property(headerValue, headerValue, headerValue, (a, x, g) => {
        const h: Record<string, HeaderValue> = { authorization: a, 'x-api-key': x, 'x-goog-api-key': g };
        const c = findCredential((n) => h[n]);
        const expected = oracleKey(h);
        if (c.kind === 'key') {
          expect(c.key).toBe(expected);
          expect(c.key).toBe(trimOws(c.key));
          expect(c.key.length).toBeGreaterThan(0);
        } else {
          expect(expected === null || c.kind === 'bad-scheme' || c.kind === 'missing').toBe(true);
        }
      }),
      { numRuns: Number(process.env.KG_RUNS ?? 3000) },
    );
  });

  it('look-alikes of Bearer are never accepted as the Bearer scheme', () => {
    for (const v of [`Веarer ${KEY}`, `Ｂearer ${KEY}`, `Bearer\u00a0${KEY}`]) {
      const c = findCredential((n) => (n === 'authorization' ? v : undefined));
      expect(c.kind === 'key' && c.key === KEY).toBe(false);
    }
  });
});

describe('deny bodies', () => {
  it('are valid JSON in the family shape with the deny code, for any request id and detail', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...FAMILIES),
        fc.constantFrom(...DENY_CODES),
        fc.string({ unit: 'binary', maxLength: 300 }),
        fc.option(fc.string({ unit: 'binary', maxLength: 300 }), { nil: undefined }),
        (family: Family, code: DenyCode, requestId: string, detail: string | undefined) => {
          const r = denyResponse(family, deny(code, detail), requestId, { errorDomain: 'keygate' });
          const body = JSON.parse(r.body);
          expect(r.status).toBe(DENY_STATUS[code]);
          if (family === 'openai') expect(body.error.code).toBe(code);
          if (family === 'anthropic') {
            expect(body.type).toBe('error');
            expect(body.error.code).toBe(code);
            expect(body.request_id).toBe(requestId);
          }
          if (family === 'google') {
            expect(body.error.code).toBe(DENY_STATUS[code]);
            expect(body.error.details[0].reason).toBe(code);
          }
          expect(r.headers.find(([k]) => k === 'content-type')?.[1]).toBe('application/json');
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('families and key format', () => {
  it('resolveFamily never throws and always yields a family', () => {
    fc.assert(
      fc.property(fc.option(fc.string(), { nil: undefined }), fc.string({ unit: 'binary', maxLength: 500 }), (proto, path) => {
        expect(FAMILIES).toContain(resolveFamily(proto, path, [{ prefix: '/a/', family: 'anthropic' }]));
      }),
    );
  });

  it('random strings are almost never well-formed, and masking never reveals the random part', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 80 }), (s) => {
        expect(isWellFormedKey(s, 'kg_')).toBe(false);
        const m = maskKey(s);
        expect(m.length).toBeLessThanOrEqual(24);
      }),
    );
    for (let i = 0; i < 200; i++) {
      const k = generateKey();
      expect(isWellFormedKey(k, 'kg_')).toBe(true);
      expect(maskKey(k)).not.toContain(k.slice(3, -4));
      // any single-character change is caught by length, alphabet or checksum
      const pos = 3 + (i % 38);
      const c = k[pos] === 'a' ? 'b' : 'a';
      expect(isWellFormedKey(k.slice(0, pos) + c + k.slice(pos + 1), 'kg_')).toBe(false);
    }
  });
});
