/**
 * Accounts, one resource of the console service (src/console/service.ts): status (disable, enable),
 * the account view (status, wallet, tokens, rates), account rates and wallet credits. Each operation
 * takes the service's shared context first; given an actor, a change is audited and publishes its
 * event (docs/events.md).
 */
import { AccountField, type AccountBilling, type AccountStatus } from '../schema/redis-schema.ts';
import type { TokenTotals } from '../schema/money.ts';
import type { Rates } from '../schema/rates.ts';
import { ConsoleError } from './errors.ts';
import type { ConsoleContext } from './context.ts';
import { appendAudit, audit, auditWrite, type Actor } from './management.ts';
import { bestEffort, reportUnfinished, type Unfinished } from './best-effort.ts';
import { rateChanges, validateRatesPatch, type RatesPatch, type RatesUse } from './rates.ts';
import * as lua from './scripts.ts';
import { validateAccountId } from './validate.ts';
import { accountBilling } from './billing.ts';
import type { AccountWallet, CreditResult } from './wallet.ts';
import { bareModelReadings, liveSidecars, type BareModels } from '../store/sidecar-settings.ts';

/** An account as the console shows it. */
export interface AccountInfo {
  readonly id: string;
  readonly status: AccountStatus;
  readonly wallet: AccountWallet;
  /** Booked tokens today and this month (UTC), over the account's keys. */
  readonly tokens: TokenTotals;
  readonly rates: Rates;
  /** The current window's use of the account's rates (null: no such rate). */
  readonly rateUse: RatesUse;
  /** How the live sidecars read a model name without a provider, per entry family. */
  readonly bareModels: BareModels;
  /** `external`: the account's router books its usage, and `unbillable` endpoints are open (docs/endpoints.md). */
  readonly billing: AccountBilling;
}

export interface AccountResult {
  readonly account: string;
  readonly status: AccountStatus;
  /** False when the account already had this status. */
  readonly changed: boolean;
  /** Best-effort parts that could not be written (src/console/best-effort.ts); absent when whole. */
  readonly unfinished?: readonly string[];
}

/**
 * Sets the account's status: `disabled` refuses every key of the account (403 USER_BLOCKED) until it
 * is `active` again. Audited as `disable`/`enable` in the same script when an actor is given.
 */
export async function setAccountStatus(ctx: ConsoleContext, account: string, status: AccountStatus, actor?: Actor): Promise<AccountResult> {
  validateAccountId(account);
  const write = auditWrite(ctx, actor, status === 'disabled' ? 'disable' : 'enable');
  const keys = [ctx.schema.account(account)];
  const args: string[] = [status];
  if (write && !ctx.isCluster) {
    keys.push(...write.lists(account));
    args.push(write.event(account, null, { status }));
  }
  const prev = String(await ctx.redis.eval(lua.SET_ACCOUNT_STATUS, keys.length, ...keys, ...args));
  const changed = prev !== status;
  // The account record is the write (a Check reads it); its audit entry (Cluster) and event follow, best-effort.
  const unfinished: Unfinished = [];
  if (ctx.isCluster && write && (prev || 'active') !== status) await bestEffort(unfinished, 'audit log', () => appendAudit(ctx.redis, true, write.lists(account), write.event(account, null, { status })));
  const type = status === 'disabled' ? 'account.disabled' : 'account.enabled';
  if (changed) await bestEffort(unfinished, `${type} event`, () => ctx.events.publish(account, type, { account_id: account, status }));
  return { account, status, changed, ...reportUnfinished(unfinished) };
}

/** The account's status (a missing account record is an enabled account). */
export async function accountStatus(ctx: ConsoleContext, account: string): Promise<AccountStatus> {
  validateAccountId(account);
  const st = await ctx.redis.hget(ctx.schema.account(account), AccountField.status);
  if (st === null || st === 'active') return 'active';
  if (st === 'disabled') return 'disabled';
  throw new ConsoleError('CORRUPT', `account ${account}: status is neither active nor disabled`);
}

/** `{id, status, wallet: {enforced, balance_micros, rule}, tokens, rates, rateUse, bareModels}`; the live sidecars read once for the wallet's rule and the bare-name readings. */
export async function accountInfo(ctx: ConsoleContext, account: string): Promise<AccountInfo> {
  const reading = liveSidecars(ctx.redis, ctx.schema.sidecars());
  const [status, live, wallet, rates, tokens, billing] = await Promise.all([
    accountStatus(ctx, account),
    reading,
    reading.then((l) => ctx.money.wallet(account, l)),
    ctx.rates.accountRates(account),
    ctx.money.accountTokens(account),
    accountBilling(ctx, account),
  ]);
  const rateUse = await ctx.rates.use(account, null, rates);
  return { id: account, status, wallet, rates, tokens, rateUse, bareModels: bareModelReadings(live), billing };
}

/** Sets or (null) removes the account's rates; refused (nothing changed) when a value is bad. Audited as `update`. */
export async function setAccountRates(ctx: ConsoleContext, account: string, patch: RatesPatch, actor?: Actor): Promise<Rates> {
  validateAccountId(account);
  const p = validateRatesPatch(patch);
  if (p.requests === undefined && p.tokens === undefined) throw new ConsoleError('INVALID_INPUT', 'nothing to update: give a rate or a token rate (or remove one)');
  const r = await ctx.rates.setAccountRates(account, p);
  if (actor) await audit(ctx, actor, 'update', account, null, rateChanges(p));
  return r;
}

/** Adds to the account's prepaid wallet; idempotent on `reference`. Audited as `credit` when an actor is given and the balance changed. */
export async function creditAccount(ctx: ConsoleContext, account: string, amountMicros: number | string, reference: string, actor?: Actor): Promise<CreditResult> {
  const r = await ctx.money.credit(account, amountMicros, reference);
  if (actor && r.credited) await audit(ctx, actor, 'credit', account, null, { amount_micros: r.amountMicros, reference: r.reference, balance_micros: r.balanceMicros });
  return r;
}
