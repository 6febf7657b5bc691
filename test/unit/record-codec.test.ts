/** The key record codec: what the console, the tests and the bench write is what both readers read. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodeKeyRecord,
  parseKeyRecord,
  parseSidecarKey,
  SIDECAR_KEY_FIELDS,
  type NewKeyRecord,
} from '../../src/schema/redis-schema.ts';
import { hashOf } from './memory-store.ts';

const record: fc.Arbitrary<NewKeyRecord> = fc.record({
  id: fc.stringMatching(/^key_[0-9A-Za-z]{16,32}$/),
  account: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,20}$/),
  name: fc.string({ maxLength: 40 }),
  status: fc.constantFrom('active' as const, 'revoked' as const),
  models: fc.option(fc.array(fc.constantFrom('*', 'openai/*', 'openai/gpt-4o', 'gpt-4o', 'google/gemini-2.0'), { maxLength: 4 }), { nil: null }),
  expiresAt: fc.option(fc.integer({ min: 0, max: 4_102_444_800_000 }), { nil: null }),
  hint: fc.constant('kg_…abcd'),
  createdAt: fc.integer({ min: 0, max: 4_102_444_800_000 }),
  updatedAt: fc.integer({ min: 0, max: 4_102_444_800_000 }),
});

describe('key record codec', () => {
  it('round-trips through the console reader and the sidecar reader', () => {
    fc.assert(
      fc.property(record, (r) => {
        const hash = hashOf(encodeKeyRecord(r));
        expect(parseKeyRecord(hash)).toMatchObject({
          id: r.id,
          account: r.account,
          name: r.name,
          status: r.status,
          models: r.models,
          expiresAt: r.expiresAt,
          createdAt: r.createdAt,
          updatedAt: r.updatedAt,
          revealable: false,
        });
        const side = parseSidecarKey(SIDECAR_KEY_FIELDS.map((f) => hash[f] ?? null));
        if (r.status === 'revoked') expect(side).toEqual({ kind: 'absent' });
        else expect(side).toEqual({ kind: 'grant', grant: { id: r.id, account: r.account, models: r.models, expiresAt: r.expiresAt } });
      }),
    );
  });

  it('writes no field for an absent option, and the envelope only when given', () => {
    const base = { id: 'key_0123456789abcdef', account: 'a', name: 'n', models: null, expiresAt: null };
    expect(hashOf(encodeKeyRecord(base))).toEqual({ v: '1', id: base.id, account: 'a', name: 'n', status: 'active' });
    expect(hashOf(encodeKeyRecord({ ...base, secret: 'env' })).secret).toBe('env');
  });
});
