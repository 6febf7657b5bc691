/**
 * What the sidecar needs of a key, and a key record as the sidecar reads it (absent, a grant, or
 * corrupt). Pure types; the Redis record and its decoder are `src/schema/redis-schema.ts`.
 */
import type { Rates } from './rate.ts';

/** What the sidecar needs of a key. `models: null` = every model; `expiresAt: null` = never. */
export interface KeyGrant {
  readonly id: string;
  readonly account: string;
  readonly models: readonly string[] | null;
  readonly expiresAt: number | null;
  /** The key's request and token rates (`src/schema/rate-fields.ts`, read with the record); absent or `NO_RATES` = none. */
  readonly rates?: Rates;
}

export type ParsedKey =
  | { readonly kind: 'absent' } // no record, or revoked: indistinguishable by design
  | { readonly kind: 'grant'; readonly grant: KeyGrant }
  | { readonly kind: 'corrupt'; readonly reason: string };
