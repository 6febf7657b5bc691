/**
 * The reveal envelope: a key's plaintext, encrypted with AES-256-GCM under a
 * key-encryption key (KEK) from `KEYGATE_REVEAL_KEY`, tagged with the KEK's id so the KEK can be
 * rotated, and bound to the key's id and the schema version through the GCM additional data, so a
 * ciphertext copied onto another key record does not decrypt. Console side only: the sidecar never
 * loads this module's secrets. Byte layout and a worked example: docs/redis-schema.md.
 *
 *   KEYGATE_REVEAL_KEY = base64:<32 bytes, base64>                      one KEK, id = fingerprint
 *                      | <kid>:<32 bytes, base64>[,<kid>:<base64>…]      keyring: first encrypts, all decrypt
 *   envelope           = "enc1:" kid ":" base64( iv[12] ‖ ciphertext ‖ tag[16] )
 *   AAD                = "keygate:v" SCHEMA_VERSION ":secret:" keyId        (UTF-8)
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { SCHEMA_VERSION } from '../schema/redis-schema.ts';

export const REVEAL_KEY_ENV = 'KEYGATE_REVEAL_KEY';
export const ENVELOPE_PREFIX = 'enc1';
export const KID_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEK_BYTES = 32;
const STANDARD_BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const ENVELOPE = /^enc1:([A-Za-z0-9_-]{1,32}):([A-Za-z0-9+/]+={0,2})$/;

/** A problem with `KEYGATE_REVEAL_KEY` (missing, malformed) or with an envelope it cannot open. */
export class RevealKeyError extends Error {
  override name = 'RevealKeyError';
}

export interface Keyring {
  /** The kid new envelopes are written with. */
  readonly primary: string;
  readonly kids: readonly string[];
  /** @internal */
  readonly keys: ReadonlyMap<string, Buffer>;
}

/** Id of a KEK given without one (`base64:…`): the first 8 hex digits of SHA-256("keygate-kek" ‖ KEK). */
export function kekFingerprint(kek: Buffer): string {
  return createHash('sha256').update('keygate-kek').update(kek).digest('hex').slice(0, 8);
}

function decodeKek(b64: string, where: string, env: string): Buffer {
  const raw = b64.trim();
  if (!STANDARD_BASE64.test(raw) || raw.length % 4 !== 0) {
    throw new RevealKeyError(`${env}: ${where} is not standard base64`);
  }
  const kek = Buffer.from(raw, 'base64');
  if (kek.length !== KEK_BYTES) {
    throw new RevealKeyError(`${env}: ${where} decodes to ${kek.length} bytes; it must be 32 (e.g. \`openssl rand -base64 32\`)`);
  }
  return kek;
}

/**
 * Parses `KEYGATE_REVEAL_KEY` (or, given `env`, another keyring in the same format: the credential
 * key, `src/keys/credential-crypto.ts`). Errors name the position of a bad entry, never its value.
 */
export function parseKeyring(value: string | undefined, env: string = REVEAL_KEY_ENV): Keyring {
  if (value === undefined || value.trim() === '') {
    throw new RevealKeyError(`${env} is not set; ${env === REVEAL_KEY_ENV ? 'creating and revealing keys need' : 'this needs'} the key-encryption key (32 random bytes, e.g. base64:$(openssl rand -base64 32))`);
  }
  const keys = new Map<string, Buffer>();
  const kids: string[] = [];
  const entries = value.split(',');
  entries.forEach((entry, i) => {
    const where = entries.length === 1 ? 'the value' : `entry ${i + 1}`;
    const colon = entry.indexOf(':');
    if (colon <= 0) throw new RevealKeyError(`${env}: ${where} is not base64:<key> or <kid>:<key>`);
    const label = entry.slice(0, colon).trim();
    const kek = decodeKek(entry.slice(colon + 1), where, env);
    const kid = label === 'base64' ? kekFingerprint(kek) : label;
    if (!KID_PATTERN.test(kid)) throw new RevealKeyError(`${env}: ${where} has a key id that is not 1-32 of [A-Za-z0-9_-]`);
    if (keys.has(kid)) throw new RevealKeyError(`${env}: key id "${kid}" appears twice`);
    keys.set(kid, kek);
    kids.push(kid);
  });
  return { primary: kids[0]!, kids, keys };
}

/** The GCM additional data: binds an envelope to one key id under one schema version. */
export function envelopeAad(keyId: string): Buffer {
  return Buffer.from(`keygate:v${SCHEMA_VERSION}:secret:${keyId}`, 'utf8');
}

/** Encrypts a key's plaintext for the record of `keyId`. `iv` is for the documented worked example only. */
export function sealSecret(ring: Keyring, keyId: string, plaintext: string, iv: Buffer = randomBytes(IV_BYTES)): string {
  return sealWithAad(ring, envelopeAad(keyId), plaintext, iv);
}

/** The enc1 envelope of `plaintext` under the ring's primary KEK, bound to `aad`. */
export function sealWithAad(ring: Keyring, aad: Buffer, plaintext: string, iv: Buffer = randomBytes(IV_BYTES)): string {
  if (iv.length !== IV_BYTES) throw new Error('iv must be 12 bytes');
  const kek = ring.keys.get(ring.primary)!;
  const cipher = createCipheriv('aes-256-gcm', kek, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  const blob = Buffer.concat([iv, ct, cipher.getAuthTag()]);
  return `${ENVELOPE_PREFIX}:${ring.primary}:${blob.toString('base64')}`;
}

/** The kid an envelope was sealed with, or null when it is not an envelope. */
export function envelopeKid(envelope: string): string | null {
  return ENVELOPE.exec(envelope)?.[1] ?? null;
}

/**
 * Opens an envelope sealed for `keyId`. Fails when the kid is not in the ring, or the envelope was
 * altered or belongs to another key id.
 */
export function openSecret(ring: Keyring, keyId: string, envelope: string): string {
  return openWithAad(ring, envelopeAad(keyId), envelope, REVEAL_KEY_ENV, 'this key');
}

/** Opens an enc1 envelope bound to `aad`; errors name the kid and `env`, never the plaintext. */
export function openWithAad(ring: Keyring, aad: Buffer, envelope: string, env: string, what: string): string {
  const m = ENVELOPE.exec(envelope);
  if (!m) throw new RevealKeyError('the stored secret is not an enc1 envelope');
  const kid = m[1]!;
  const kek = ring.keys.get(kid);
  if (!kek) throw new RevealKeyError(`the secret is sealed with key id "${kid}", which ${env} does not hold (has: ${ring.kids.join(', ')})`);
  const blob = Buffer.from(m[2]!, 'base64');
  if (blob.length < IV_BYTES + TAG_BYTES + 1) throw new RevealKeyError('the stored secret is truncated');
  const decipher = createDecipheriv('aes-256-gcm', kek, blob.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(blob.subarray(blob.length - TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(blob.subarray(IV_BYTES, blob.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new RevealKeyError(`the stored secret does not decrypt under key id "${kid}" for ${what} (wrong key-encryption key, or the record was altered)`);
  }
}
