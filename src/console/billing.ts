/**
 * An account's billing (docs/endpoints.md, "Account billing"), one resource of the console service:
 * `metered` (the default: keygate books what the upstream served, and `unbillable` endpoints are
 * refused) or `external` (the account's own router books every request with `POST /v1/usage`, so
 * `unbillable` endpoints are open to it). Stored as the `billing` field of the account record the
 * sidecar already reads (same round trip); `metered` is stored as an absent field.
 */
import { ACCOUNT_BILLINGS, AccountField, type AccountBilling } from '../schema/redis-schema.ts';
import { parseAccountBilling } from '../schema/records.ts';
import { ConsoleError } from './errors.ts';
import type { ConsoleContext } from './context.ts';
import { audit, type Actor } from './management.ts';
import { validateAccountId } from './validate.ts';

export function isAccountBilling(v: unknown): v is AccountBilling {
  return (ACCOUNT_BILLINGS as readonly unknown[]).includes(v);
}

/** The account's billing, read as the sidecar reads it (absent: metered); a stored value outside the two is corrupt. */
export async function accountBilling(ctx: ConsoleContext, account: string): Promise<AccountBilling> {
  validateAccountId(account);
  const v = parseAccountBilling(await ctx.redis.hget(ctx.schema.account(account), AccountField.billing));
  if (v !== 'corrupt') return v;
  throw new ConsoleError('CORRUPT', `account ${account}: billing is neither metered nor external`);
}

/** Sets the account's billing; every sidecar sees it at its next check (the account record is tracked). Audited as `update`. */
export async function setAccountBilling(ctx: ConsoleContext, account: string, billing: AccountBilling, actor?: Actor): Promise<AccountBilling> {
  validateAccountId(account);
  if (!isAccountBilling(billing)) throw new ConsoleError('INVALID_INPUT', `billing must be ${ACCOUNT_BILLINGS.join(' or ')}`);
  const rkey = ctx.schema.account(account);
  if (billing === 'metered') await ctx.redis.hdel(rkey, AccountField.billing);
  else await ctx.redis.hset(rkey, AccountField.billing, billing);
  if (actor) await audit(ctx, actor, 'update', account, null, { billing });
  return billing;
}
