/**
 * An account's price multiplier from the console (docs/metering.md, "What is priced, and the
 * cost"): `accounts update ID --price-multiplier 1.2`, `PATCH /v1/accounts/{account}`
 * `{price_multiplier}`, shown in `accounts show` and the account view. Stored as the account hash's
 * `price_multiplier` (src/schema/account-price.ts); 1 removes it (the default). Audited as `update`.
 */
import { PRICE_MULTIPLIER_FIELD, parsePriceMultiplier } from '../schema/account-price.ts';
import { multiplierScaled } from '../schema/prices.ts';
import { scaledToDecimal } from '../prices/decimal.ts';
import type { ConsoleContext } from './context.ts';
import { ConsoleError } from './errors.ts';
import { audit, type Actor } from './management.ts';
import { validateAccountId } from './validate.ts';

/** The account's multiplier as decimal text ("1" when none is set). */
export async function accountPriceMultiplier(ctx: ConsoleContext, account: string): Promise<string> {
  validateAccountId(account);
  const v = parsePriceMultiplier(await ctx.redis.hget(ctx.schema.account(account), PRICE_MULTIPLIER_FIELD));
  if (v === 'corrupt') throw new ConsoleError('CORRUPT', `account ${account}: price_multiplier is not a decimal from 0 to 1000`);
  return scaledToDecimal(v ?? 1_000_000n, 6);
}

/** Sets the account's multiplier (decimal text, at most 6 decimals, 0 to 1000; "1" removes it); refused when bad, nothing changed. */
export async function setAccountPriceMultiplier(ctx: ConsoleContext, account: string, multiplier: unknown, actor?: Actor): Promise<string> {
  validateAccountId(account);
  const text = typeof multiplier === 'number' && Number.isFinite(multiplier) ? String(multiplier) : multiplier;
  const v = typeof text === 'string' ? multiplierScaled(text) : null;
  if (v === null) throw new ConsoleError('INVALID_INPUT', 'price multiplier must be a decimal from 0 to 1000 with at most 6 decimals (e.g. 1.2; 0 makes the account\'s metered usage free; 1 is the default)');
  const key = ctx.schema.account(account);
  const shown = scaledToDecimal(v, 6);
  if (v === 1_000_000n) await ctx.redis.hdel(key, PRICE_MULTIPLIER_FIELD);
  else await ctx.redis.hset(key, PRICE_MULTIPLIER_FIELD, shown);
  if (actor) await audit(ctx, actor, 'update', account, null, { price_multiplier: shown });
  return shown;
}
