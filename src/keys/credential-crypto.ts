/**
 * The credential envelope: an account's own upstream credential (SPEC 18, docs/credentials.md),
 * encrypted with AES-256-GCM under `KEYGATE_CREDENTIAL_KEY` and bound through the GCM additional
 * data to the account and the provider, so an envelope copied onto another account or provider does
 * not open. The same envelope format and keyring format as the reveal key (`crypto.ts`): a key id on
 * each envelope; the first KEK of the ring encrypts, every KEK of it decrypts (a rotation keeps the
 * old one listed until every credential is sealed again). Unlike the reveal key, the sidecars hold
 * this key: they open the envelope to put the credential on the upstream request.
 *
 *   KEYGATE_CREDENTIAL_KEY = base64:<32 bytes>  |  <kid>:<32 bytes>[,<kid>:<32 bytes>…]
 *   AAD                    = "keygate:v" SCHEMA_VERSION ":credential:" provider ":" accountId   (UTF-8)
 */
import { openWithAad, parseKeyring, sealWithAad, type Keyring } from './crypto.ts';
import { SCHEMA_VERSION } from '../schema/redis-schema.ts';

export const CREDENTIAL_KEY_ENV = 'KEYGATE_CREDENTIAL_KEY';

/** Parses `KEYGATE_CREDENTIAL_KEY` (RevealKeyError naming the variable, never its value). */
export function parseCredentialKeyring(value: string | undefined): Keyring {
  return parseKeyring(value, CREDENTIAL_KEY_ENV);
}

export function credentialAad(account: string, provider: string): Buffer {
  return Buffer.from(`keygate:v${SCHEMA_VERSION}:credential:${provider}:${account}`, 'utf8');
}

export function sealCredential(ring: Keyring, account: string, provider: string, secret: string): string {
  return sealWithAad(ring, credentialAad(account, provider), secret);
}

/** The plaintext; throws RevealKeyError (naming the kid, never the secret) when it does not open. */
export function openCredential(ring: Keyring, account: string, provider: string, envelope: string): string {
  return openWithAad(ring, credentialAad(account, provider), envelope, CREDENTIAL_KEY_ENV, `this account's ${provider} credential`);
}
