/**
 * The rate fields of a key record and of an account record (docs/rate-limits.md): `rate` and
 * `token_rate`, each a rate's record form `N/U` (`5/s`, `100000/m`), and their codec. Read with the
 * record by the sidecar and by the console's key record decoder (`src/schema/redis-schema.ts`);
 * the rest of the rate side of the schema is `src/schema/rates.ts`.
 */
import { NO_RATES, type Rates } from '../core/rate.ts';
import { formatRate, parseRateText, type Rate } from '../core/rate-text.ts';

export const RateField = { rate: 'rate', tokenRate: 'token_rate' } as const;
/** The fields the sidecar reads in addition to its own, in this order (key record and account record alike). */
export const RATE_FIELDS = [RateField.rate, RateField.tokenRate] as const;

/**
 * The HSET arguments that set both rate fields of a key or account record, and the fields to HDEL
 * (a null rate is removed). `undefined` leaves a field as it is.
 */
export function encodeRateFields(r: { readonly requests?: Rate | null; readonly tokens?: Rate | null }): { set: string[]; del: string[] } {
  const set: string[] = [];
  const del: string[] = [];
  const put = (field: string, v: Rate | null | undefined) => {
    if (v === undefined) return;
    if (v === null) del.push(field);
    else set.push(field, formatRate(v));
  };
  put(RateField.rate, r.requests);
  put(RateField.tokenRate, r.tokens);
  return { set, del };
}

/**
 * Decodes the two rate fields as read (HMGET of RATE_FIELDS). `NO_RATES` (shared, frozen) when
 * neither is set, so the sidecar can tell a key without rates by identity; a string naming the
 * problem when a field does not follow the schema (the caller treats it as a corrupt record).
 */
export function parseRateFields(rate: string | null | undefined, tokenRate: string | null | undefined): Rates | string {
  if ((rate === null || rate === undefined) && (tokenRate === null || tokenRate === undefined)) return NO_RATES;
  let requests: Rate | null = null;
  let tokens: Rate | null = null;
  if (rate !== null && rate !== undefined) {
    const r = parseRateText(rate, 'requests');
    if ('error' in r) return `rate: ${r.error}`;
    requests = r;
  }
  if (tokenRate !== null && tokenRate !== undefined) {
    const r = parseRateText(tokenRate, 'tokens');
    if ('error' in r) return `token_rate: ${r.error}`;
    tokens = r;
  }
  return { requests, tokens };
}
