/**
 * An account's own upstream credential (SPEC 18, docs/credentials.md): which providers an account has
 * one for (a bit per provider, read from the account record's `credentials` field in the same round
 * trip as its status), which header each provider's credential travels in, and what a credential may
 * contain (a header value: visible ASCII, no separators a proxy would split on). Pure.
 */
import { FAMILIES, isFamily, type Family } from './families/names.ts';

/** One bit per provider; an account's set of providers is their OR (0: none). */
export const PROVIDER_BIT: Readonly<Record<Family, number>> = Object.freeze({ openai: 1, anthropic: 2, google: 4 });

/** The account record's `credentials` field → the providers' bits, or 'corrupt' for a name that is not a provider. */
export function parseCredentialMarker(value: string | null | undefined): number | 'corrupt' {
  if (value === null || value === undefined || value === '') return 0;
  let bits = 0;
  for (const p of value.split(',')) {
    if (!isFamily(p)) return 'corrupt';
    bits |= PROVIDER_BIT[p];
  }
  return bits;
}

/** The `credentials` field for a set of providers ('' = none: the field is removed). */
export function encodeCredentialMarker(providers: Iterable<string>): string {
  const set = new Set(providers);
  return FAMILIES.filter((f) => set.has(f)).join(',');
}

/** The header each provider's credential is set in, upstream (`KEYGATE_CREDENTIAL_HEADERS` changes it per family). */
export type CredentialHeaders = Readonly<Record<Family, string>>;
export const DEFAULT_CREDENTIAL_HEADERS: CredentialHeaders = Object.freeze({ openai: 'authorization', anthropic: 'x-api-key', google: 'x-goog-api-key' });

const HEADER_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/**
 * `openai=api-key,google=authorization`: the header per family (others keep the default). Throws an
 * Error naming the bad item.
 */
export function parseCredentialHeaders(s: string): CredentialHeaders {
  const out: Record<Family, string> = { ...DEFAULT_CREDENTIAL_HEADERS };
  for (const item of s.split(',').map((x) => x.trim()).filter(Boolean)) {
    const eq = item.indexOf('=');
    const family = item.slice(0, eq);
    const header = item.slice(eq + 1).toLowerCase();
    if (eq <= 0 || !isFamily(family) || !HEADER_NAME.test(header) || header.startsWith('x-envoy-') || header === 'host') {
      throw new Error(`"${item}" is not openai|anthropic|google=<lower-case header name>`);
    }
    out[family] = header;
  }
  return Object.freeze(out);
}

/** The header and value the allow sets upstream; one frozen object per decrypted credential version. */
export interface UpstreamCredential {
  readonly header: string;
  readonly value: string;
}

/** `authorization` carries `Bearer <secret>`; any other header the secret as it is. */
export function upstreamCredential(header: string, secret: string): UpstreamCredential {
  return Object.freeze({ header, value: header === 'authorization' ? `Bearer ${secret}` : secret });
}

export const CREDENTIAL_MIN_CHARS = 8;
export const CREDENTIAL_MAX_CHARS = 4096;
/** Visible ASCII but `,` (a proxy joins repeated headers with it): what an API key is, and what a header value may safely carry. */
export const CREDENTIAL_PATTERN = /^[\x21-\x2b\x2d-\x7e]+$/;

/** Why `secret` cannot be a credential (never echoing it), or null. */
export function credentialProblem(secret: unknown): string | null {
  if (typeof secret !== 'string') return 'the credential must be a string';
  if (secret.length < CREDENTIAL_MIN_CHARS || secret.length > CREDENTIAL_MAX_CHARS) return `the credential must have ${CREDENTIAL_MIN_CHARS}-${CREDENTIAL_MAX_CHARS} characters`;
  if (!CREDENTIAL_PATTERN.test(secret)) return 'the credential must be visible ASCII without spaces, commas or line breaks';
  return null;
}

/** The hint shown for a credential: its last four characters. */
export function credentialHint(secret: string): string {
  return secret.slice(-4);
}
