/**
 * An account's price multiplier (docs/metering.md, "What is priced, and the cost"): the field
 * `price_multiplier` of the account's hash (`{ns}:v1:account:{id}`), decimal text with at most 6
 * decimals from 0 to 1000 (0 allowed: the account's metered usage is free); absent = 1. Metering
 * applies it after everything else. The sidecar reads it with the account record (one HMGET, the
 * same cached and invalidated record as the account's status and rates).
 */
import { multiplierScaled } from './prices.ts';

export const PRICE_MULTIPLIER_FIELD = 'price_multiplier';

/** A stored multiplier as 10^-6 units (1 = 1000000n); undefined when absent (1); 'corrupt' when off the schema. */
export function parsePriceMultiplier(v: string | null | undefined): bigint | 'corrupt' | undefined {
  if (v === null || v === undefined) return undefined;
  return multiplierScaled(v) ?? 'corrupt';
}
