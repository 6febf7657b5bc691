/**
 * Prebuilt deny frames: for every code and family and request ids of every length, the frame with
 * the id written in is byte for byte the frame encoded directly; ids JSON would escape, and denies
 * with detail or a message seen once, are encoded directly.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CheckOutcome } from '../src/authorizer.ts';
import { DENY_CODES } from '../src/core/codes.ts';
import { deny, type Deny } from '../src/core/decision.ts';
import { FAMILIES } from '../src/core/families/index.ts';
import { checkResponse } from '../src/transport/envoy/check.ts';
import { checkResponseFields, frameMessage } from '../src/transport/grpc/codec.ts';
import { DenyFrames } from '../src/transport/grpc/deny-frames.ts';
import { endpointDeny } from '../src/core/endpoints/decision.ts';

const opts = { accountHeader: 'x-keygate-account-id', keyIdHeader: 'x-keygate-key-id', stripKeyHeaders: true, errorDomain: 'keygate' };
const direct = (o: CheckOutcome) => frameMessage(checkResponseFields(checkResponse(o, opts)));

describe('prebuilt deny frames', () => {
  it('equal the directly encoded frame for every code, family and request id', () => {
    let encodes = 0;
    const frames = new DenyFrames((o) => {
      encodes++;
      return direct(o);
    });
    const idChars = fc.constantFrom(...'abcXYZ019._:@=+/-'.split(''));
    fc.assert(
      fc.property(fc.constantFrom(...DENY_CODES), fc.constantFrom(...FAMILIES), fc.oneof(fc.string({ unit: idChars, minLength: 1, maxLength: 128 }), fc.constant(randomUUID())), (code, family, requestId) => {
        const d = deny(code);
        const o: CheckOutcome = { decision: d, family, requestId };
        expect(frames.frame(o, d).equals(direct(o))).toBe(true);
      }),
      { numRuns: 2000 },
    );
    // templates are reused: far fewer encodings than answers (3 per template: two probes and a check)
    expect(encodes).toBeLessThan(2000);
  });

  it('encode directly what cannot be templated (escaped ids, detail, message)', () => {
    let encodes = 0;
    const frames = new DenyFrames((o) => {
      encodes++;
      return direct(o);
    });
    const cases: [Deny, string][] = [
      [deny('INVALID_API_KEY'), 'r"quoted'],
      [deny('INVALID_API_KEY'), 'ü-non-ascii'],
      [deny('INVALID_API_KEY', 'The Authorization header must use the Bearer scheme.'), 'r-1'],
      [{ ...deny('MODEL_NOT_ALLOWED'), message: 'gateway at fault' }, 'r-2'],
    ];
    for (const [d, requestId] of cases) {
      const o: CheckOutcome = { decision: d, family: 'anthropic', requestId };
      expect(frames.frame(o, d).equals(direct(o))).toBe(true);
    }
    expect(encodes).toBe(cases.length);
  });

  it("a deny with a whole message of its own (the endpoint rule's) is templated from the second use of that message, byte for byte", () => {
    let encodes = 0;
    const frames = new DenyFrames((o) => {
      encodes++;
      return direct(o);
    });
    const d = endpointDeny('unknown', 'key_x');
    for (const family of FAMILIES) {
      for (let i = 0; i < 50; i++) {
        const o: CheckOutcome = { decision: d, family, requestId: `req-${family}-${i.toString().padStart(4, '0')}` };
        expect(frames.frame(o, d).equals(direct(o))).toBe(true);
      }
    }
    // the first answer encoded directly, then 3 encodings per template (two probes and a check) per family
    expect(encodes).toBe(1 + 3 * FAMILIES.length);
    // another message, once: encoded once, no template
    const other = { ...deny('MODEL_NOT_ALLOWED'), message: 'The model "x" is not one this key accepts.' };
    const o: CheckOutcome = { decision: other, family: 'openai', requestId: 'req-once' };
    expect(frames.frame(o, other).equals(direct(o))).toBe(true);
    expect(encodes).toBe(2 + 3 * FAMILIES.length);
  });

  it('each answer is its own buffer (a later answer does not change an earlier one)', () => {
    const frames = new DenyFrames(direct);
    const d = deny('API_KEY_REQUIRED');
    const a = frames.frame({ decision: d, family: 'google', requestId: 'req-aaaa' }, d);
    const copy = Buffer.from(a);
    frames.frame({ decision: d, family: 'google', requestId: 'req-bbbb' }, d);
    expect(a.equals(copy)).toBe(true);
  });
});
