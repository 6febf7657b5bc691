/**
 * What the route modules of the management API share: the security requirement, the error answers
 * for the OpenAPI document, instants, and rates as the API takes them.
 */
import type { FastifyRequest } from 'fastify';
import type { RateUnit } from '../schema/rates.ts';
import type { RatesPatch } from '../console/rates.ts';
import * as S from './schemas.ts';

export const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Rates as the API takes them, in the library's form (`null` removes; absent = unchanged). */
export function ratesOf(b: { rate?: { requests: number; per: RateUnit } | null; token_rate?: { tokens: number; per: RateUnit } | null }): RatesPatch {
  return {
    ...(b.rate !== undefined && { requests: b.rate === null ? null : { count: b.rate.requests, per: b.rate.per } }),
    ...(b.token_rate !== undefined && { tokens: b.token_rate === null ? null : { count: b.token_rate.tokens, per: b.token_rate.per } }),
  };
}

/**
 * Error answers a route may give, for the OpenAPI document. Every route: 401 (no or a bad token),
 * 429 (rate limit), 500 (a stored record off the schema), 503 (the store is unavailable).
 */
export function errors(...codes: (400 | 403 | 404 | 409 | 413 | 415 | 422)[]) {
  const out: Record<number, typeof S.ErrorBody> = { 401: S.ErrorBody, 429: S.ErrorBody, 500: S.ErrorBody, 503: S.ErrorBody };
  for (const c of codes) out[c] = S.ErrorBody;
  return out;
}

/** A change (any method but GET) may also answer 403 (a web session without its CSRF token), 413 and 415 (its body). */
export const changeErrors = (...codes: (400 | 403 | 404 | 409 | 413 | 415 | 422)[]) => errors(403, 413, 415, ...codes);

export const SECURITY = [{ managementToken: [] }];

/** Book-keeping writes (crediting, recording usage): a bucket per token of their own, apart from the token's other requests. */
export function bookingLimit(perMinute: number) {
  return { rateLimit: { max: perMinute, timeWindow: 60_000, keyGenerator: (req: FastifyRequest) => `booking:${req.principal?.token.id ?? req.ip}` } };
}

/** The `config` of a book-keeping route (one value for all of them, built once per server). */
export type BookingLimit = ReturnType<typeof bookingLimit>;
