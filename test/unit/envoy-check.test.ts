/**
 * The shared Envoy mapping: an allow response is made of its parts only, so the h2 server's cache of
 * encoded allows (keyed by `allowKey` of those parts) can never serve one request's answer to another.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CheckOutcome } from '../../src/authorizer.ts';
import { allow as allowOf, type Allow } from '../../src/core/decision.ts';
import { allowKey, allowParts, allowResponse, checkResponse } from '../../src/transport/envoy/check.ts';
import { CheckAnswers } from '../../src/transport/envoy/services/check-answer.ts';
import { checkResponseFields, frameMessage } from '../../src/transport/grpc/codec.ts';
import type { ResponseOptions } from '../../src/transport/response-options.ts';
import { PLACEHOLDER_BOOKING_ID } from '../../src/transport/booking-id.ts';
import { BOOKING_ID_PATTERN } from '../../src/core/booking-id.ts';

const OPTS: ResponseOptions = { accountHeader: 'x-account', keyIdHeader: 'x-key-id', stripKeyHeaders: true, errorDomain: 'keygate' };
const text = fc.oneof(fc.constantFrom('', 'a', 'a;', '1:a;', 'null', '-;', 'acct\n1'), fc.string({ maxLength: 12 }));
const allow = fc.record({
  allow: fc.constant(true as const),
  accountId: text,
  keyId: text,
  model: fc.option(text, { nil: null }),
});

describe('allow responses and their cache key', () => {
  it('equal keys ⇔ equal responses, for any two allows', () => {
    fc.assert(
      fc.property(allow, allow, (a, b) => {
        const same = allowKey(allowParts(a)) === allowKey(allowParts(b));
        expect(same).toBe(JSON.stringify(allowResponse(allowParts(a), OPTS)) === JSON.stringify(allowResponse(allowParts(b), OPTS)));
        expect(same).toBe(a.accountId === b.accountId && a.keyId === b.keyId && a.model === b.model);
      }),
      { numRuns: 5000 },
    );
  });

  it('a field on an allow outside its parts never reaches the response', () => {
    fc.assert(
      fc.property(allow, fc.string(), (a, extra) => {
        const wider = { ...a, requestId: extra, wallet: { balance: extra } } as Allow;
        const outcome = { decision: wider, family: 'openai' as const, requestId: extra };
        expect(checkResponse(outcome, OPTS)).toEqual(allowResponse(allowParts(a), OPTS));
      }),
    );
  });

  it('null and the string "null" are different models', () => {
    const a = { accountId: 'x', keyId: 'k', model: null };
    expect(allowKey(a)).not.toBe(allowKey({ ...a, model: 'null' }));
    expect(allowKey(a)).not.toBe(allowKey({ ...a, model: '' }));
  });

  it('an allow sets the identity headers, strips the key headers and carries the metadata', () => {
    const r = allowResponse({ accountId: 'acct', keyId: 'key_1', model: 'openai/gpt-4o' }, OPTS);
    expect(r).toEqual({
      status: { code: 0 },
      ok_response: {
        headers: [
          { header: { key: 'x-account', value: 'acct' }, append: { value: false } },
          { header: { key: 'x-key-id', value: 'key_1' }, append: { value: false } },
        ],
        headers_to_remove: ['authorization', 'x-api-key', 'x-goog-api-key'],
      },
      dynamic_metadata: {
        fields: { account_id: { stringValue: 'acct' }, key_id: { stringValue: 'key_1' }, model: { stringValue: 'openai/gpt-4o' }, booking_id: { stringValue: PLACEHOLDER_BOOKING_ID } },
      },
    });
    expect(allowResponse({ accountId: 'a', keyId: 'k', model: null }, { ...OPTS, stripKeyHeaders: false }).ok_response!.headers_to_remove).toEqual([]);
  });
});

describe('CheckAnswers: the kept and assembled answers are the bytes the generic encoder writes', () => {
  const header = fc.tuple(fc.constantFrom('x-ratelimit-limit-requests', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-requests'), fc.string({ maxLength: 20 }));
  const rate = fc.record({
    headers: fc.array(header, { maxLength: 6 }),
    limit: fc.option(fc.record({ count: fc.integer({ min: 1, max: 1_000_000_000 }), per: fc.constantFrom('second' as const, 'minute' as const, 'hour' as const, 'day' as const) }), { nil: null }),
  });
  const outcomeOf = (d: Allow): CheckOutcome => ({ decision: d, family: 'openai', requestId: 'req-1' });
  /** The booking id an answer carries (its last bytes). */
  const idOf = (f: Buffer) => f.subarray(f.length - PLACEHOLDER_BOOKING_ID.length).toString('latin1');
  /** What the generic encoder writes for `o` with the booking id `frame` carries. */
  const expected = (o: CheckOutcome, frame: Buffer) => frameMessage(checkResponseFields(checkResponse(o, OPTS, idOf(frame))));

  it('a rated allow (headers change per request), the same grant many times and many grants', () => {
    const answers = new CheckAnswers(OPTS);
    fc.assert(
      fc.property(allow, rate, rate, (a, r1, r2) => {
        // the same parts twice with different headers: the second is assembled from what the first kept
        for (const r of [r1, r2]) {
          const o = outcomeOf({ ...a, rate: r });
          const f = answers.frame(o);
          expect(f.equals(expected(o, f))).toBe(true);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('a plain allow, by its parts and by its identity (one object per grant)', () => {
    const answers = new CheckAnswers(OPTS);
    const grant = { id: 'key_0123456789abcdef', account: 'acct-1', models: null, expiresAt: null };
    const d = allowOf(grant, null);
    expect(allowOf(grant, null)).toBe(d);
    expect(Object.isFrozen(d)).toBe(true);
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const f = answers.frame(outcomeOf(d));
      expect(f.equals(expected(outcomeOf(d), f))).toBe(true);
      expect(idOf(f)).toMatch(BOOKING_ID_PATTERN);
      ids.add(idOf(f));
    }
    expect(ids.size).toBe(3); // every allow its own booking id, the kept answer never changed
    const m = allowOf(grant, 'openai/gpt-4o');
    expect(m).not.toBe(allowOf(grant, 'openai/gpt-4o'));
    const fm = answers.frame(outcomeOf(m));
    expect(fm.equals(expected(outcomeOf(m), fm))).toBe(true);
    expect(answers.ratedBuilt).toBe(0);
  });
});
