/** The reveal envelope: keyring parsing, AES-256-GCM round trip, binding to the key id, rotation, the documented example. */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envelopeKid, kekFingerprint, openSecret, parseKeyring, RevealKeyError, sealSecret } from '../src/keys/crypto.ts';
import { generateKey, isWellFormedKey } from '../src/core/key-format.ts';

const b64 = () => randomBytes(32).toString('base64');

describe('KEYGATE_REVEAL_KEY parsing', () => {
  it('base64:<32 bytes> is one KEK whose id is its fingerprint', () => {
    const kek = randomBytes(32);
    const ring = parseKeyring(`base64:${kek.toString('base64')}`);
    expect(ring.primary).toBe(kekFingerprint(kek));
    expect(ring.primary).toMatch(/^[0-9a-f]{8}$/);
    expect(ring.kids).toEqual([ring.primary]);
  });

  it('a keyring: the first entry encrypts, all decrypt', () => {
    const ring = parseKeyring(`new:${b64()}, old:${b64()}`);
    expect(ring.primary).toBe('new');
    expect(ring.kids).toEqual(['new', 'old']);
  });

  it.each([
    ['unset', undefined, /is not set/],
    ['empty', '  ', /is not set/],
    ['no label', b64(), /base64:<key> or <kid>:<key>/],
    ['short key', `base64:${randomBytes(16).toString('base64')}`, /decodes to 16 bytes/],
    ['not base64', 'base64:****', /not standard base64/],
    ['bad kid', `bad kid!:${b64()}`, /key id/],
    ['duplicate kid', `a:${b64()},a:${b64()}`, /appears twice/],
    ['empty entry', `a:${b64()},`, /entry 2/],
  ])('refuses %s with a message that never echoes the value', (_n, value, msg) => {
    let err: unknown;
    try {
      parseKeyring(value);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RevealKeyError);
    expect((err as Error).message).toMatch(msg);
    if (value) {
      const secret = value.split(':').pop()!.split(',')[0]!.trim();
      if (secret.length > 8) expect((err as Error).message).not.toContain(secret);
    }
  });
});

describe('envelope', () => {
  const ring = parseKeyring(`k1:${b64()}`);
  const key = generateKey();

  it('round-trips and never contains the plaintext', () => {
    const env = sealSecret(ring, 'key_AAAAAAAAAAAAAAAAAAAA', key);
    expect(env).toMatch(/^enc1:k1:[A-Za-z0-9+/]+={0,2}$/);
    expect(env).not.toContain(key.slice(3, 20));
    expect(envelopeKid(env)).toBe('k1');
    expect(openSecret(ring, 'key_AAAAAAAAAAAAAAAAAAAA', env)).toBe(key);
  });

  it('uses a fresh IV each time', () => {
    expect(sealSecret(ring, 'key_AAAAAAAAAAAAAAAAAAAA', key)).not.toBe(sealSecret(ring, 'key_AAAAAAAAAAAAAAAAAAAA', key));
  });

  it('is bound to its key id: moved to another record it does not open', () => {
    const env = sealSecret(ring, 'key_AAAAAAAAAAAAAAAAAAAA', key);
    expect(() => openSecret(ring, 'key_BBBBBBBBBBBBBBBBBBBB', env)).toThrow(/does not decrypt/);
  });

  it('detects tampering with any byte', () => {
    const env = sealSecret(ring, 'key_AAAAAAAAAAAAAAAAAAAA', key);
    const blob = Buffer.from(env.split(':')[2]!, 'base64');
    for (const i of [0, 12, blob.length - 1]) {
      const t = Buffer.from(blob);
      t[i] = t[i]! ^ 1;
      expect(() => openSecret(ring, 'key_AAAAAAAAAAAAAAAAAAAA', `enc1:k1:${t.toString('base64')}`)).toThrow(RevealKeyError);
    }
  });

  it('rotation: a ring with a new primary still opens envelopes of the old KEK; a ring without it says which kid is missing', () => {
    const oldKek = b64();
    const old = parseKeyring(`old:${oldKek}`);
    const env = sealSecret(old, 'key_AAAAAAAAAAAAAAAAAAAA', key);
    const rotated = parseKeyring(`new:${b64()},old:${oldKek}`);
    expect(openSecret(rotated, 'key_AAAAAAAAAAAAAAAAAAAA', env)).toBe(key);
    expect(envelopeKid(sealSecret(rotated, 'key_AAAAAAAAAAAAAAAAAAAA', key))).toBe('new');
    expect(() => openSecret(parseKeyring(`new:${b64()}`), 'key_AAAAAAAAAAAAAAAAAAAA', env)).toThrow(/"old", which KEYGATE_REVEAL_KEY does not hold/);
  });

  it('refuses a value that is not an envelope', () => {
    expect(() => openSecret(ring, 'key_AAAAAAAAAAAAAAAAAAAA', key)).toThrow(/not an enc1 envelope/);
  });
});

describe('the worked example of docs/redis-schema.md', () => {
  // Also checked independently with Python `cryptography` (AESGCM); see the doc.
  const kek = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
  const plaintext = 'kg_0123456789ABCDEFGHIJKLMNOPQRSTUV3E6O7i';
  const keyId = 'key_0123456789abcdefABCDEFGH';
  const iv = Buffer.from('a0a1a2a3a4a5a6a7a8a9aaab', 'hex');
  const expected =
    'enc1:k2026:oKGio6SlpqeoqaqrjX8jHXT5MYtXU7DrPjuCnTTpH1fa/ggn0ENoyS/6J1KGIxHM6hQcCjYAs/Mj0t220zeWV3FkuiUt';

  it('seals to the documented envelope and opens it', () => {
    expect(isWellFormedKey(plaintext, 'kg_')).toBe(true);
    const ring = parseKeyring(`k2026:${kek.toString('base64')}`);
    expect(sealSecret(ring, keyId, plaintext, iv)).toBe(expected);
    expect(openSecret(ring, keyId, expected)).toBe(plaintext);
    expect(kekFingerprint(kek)).toBe('fa8c832a');
  });

  it('the doc shows exactly these values', () => {
    const doc = readFileSync(new URL('../docs/redis-schema.md', import.meta.url), 'utf8');
    for (const s of [expected, plaintext, keyId, kek.toString('base64'), 'fa8c832a', '44d8f1f5bc9162bfe232bab5368965212d2e35b6d2148a74f35751d672547198']) {
      expect(doc).toContain(s);
    }
  });
});
