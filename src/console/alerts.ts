/**
 * Alert settings, one resource of the console service (src/console/service.ts; docs/events.md
 * "Alerts"): the account's wallet-low threshold and a key's limit thresholds. The events' Lua
 * fragments (src/schema/event-scripts.ts) read them from the account's alerts hash. Each change is audited as
 * `alert` in its own script on standalone and Sentinel (after it on Cluster: src/console/webhooks.ts
 * `evalChange`).
 */
import { AlertField as A } from '../schema/events.ts';
import { WalletField } from '../schema/money.ts';
import type { ConsoleContext } from './context.ts';
import { ConsoleError } from './errors.ts';
import { getKey } from './keys.ts';
import type { Actor } from './management.ts';
import { NOW, AUDIT_WRITE } from './scripts.ts';
import { evalChange } from './webhooks.ts';

/**
 * Setting a wallet-low threshold. KEYS: alerts, wallet [, audit, audit of the account]. ARGV:
 * threshold micros ('' = none) [, audit event]. The fired flag is cleared when the balance is at or
 * above the new threshold (so the next crossing fires), kept when the balance is already below (no
 * event for a threshold moved under it).
 */
export const SET_WALLET_LOW = `${NOW}
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], '${A.walletLow}', '${A.walletLowFired}')
else
  redis.call('HSET', KEYS[1], '${A.walletLow}', ARGV[1])
  local bal = redis.call('HGET', KEYS[2], '${WalletField.balance}')
  if bal and tonumber(bal) < tonumber(ARGV[1]) then
    redis.call('HSET', KEYS[1], '${A.walletLowFired}', '1')
  else
    redis.call('HDEL', KEYS[1], '${A.walletLowFired}')
  end
end
local audit_ev = false
if #KEYS == 4 then audit_ev = ARGV[2] end
${AUDIT_WRITE(3)}
return 'OK'`;

/** A key's limit thresholds. KEYS: alerts [, audit, audit of the account]. ARGV: field, "50,80,100" [, audit event]. */
export const SET_KEY_THRESHOLDS = `${NOW}
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local audit_ev = false
if #KEYS == 3 then audit_ev = ARGV[3] end
${AUDIT_WRITE(2)}
return 'OK'`;

/** The account's wallet-low threshold in micro-units (null removes it). */
export async function setWalletLow(ctx: ConsoleContext, account: string, micros: number | null, actor?: Actor): Promise<void> {
  if (micros !== null && (!Number.isSafeInteger(micros) || micros <= 0)) throw new ConsoleError('INVALID_INPUT', 'the wallet-low threshold must be a positive amount');
  const audit = actor && { actor, action: 'alert' as const, account, keyId: null, changes: { wallet_low_micros: micros } };
  await evalChange(ctx, SET_WALLET_LOW, [ctx.events.s.alerts(account), ctx.schema.wallet(account)], [micros === null ? '' : String(micros)], audit);
}

/** Sets a key's limit thresholds in percent (1-100, ascending, at most 10; [] = none); → the thresholds set. */
export async function setKeyAlertThresholds(ctx: ConsoleContext, keyId: string, thresholds: readonly number[], actor?: Actor): Promise<number[]> {
  const key = await getKey(ctx, keyId);
  const t = validateThresholds(thresholds);
  const audit = actor && { actor, action: 'alert' as const, account: key.account, keyId: key.id, changes: { alert_thresholds: t } };
  await evalChange(ctx, SET_KEY_THRESHOLDS, [ctx.events.s.alerts(key.account)], [A.keyThresholds(key.id), t.join(',')], audit);
  return t;
}

export function validateThresholds(thresholds: unknown): number[] {
  if (!Array.isArray(thresholds) || thresholds.length > 10 || !thresholds.every((t) => Number.isSafeInteger(t) && t >= 1 && t <= 100)) {
    throw new ConsoleError('INVALID_INPUT', 'alert thresholds must be at most 10 whole percentages from 1 to 100, e.g. 50,80,100');
  }
  return [...new Set(thresholds as number[])].sort((a, b) => a - b);
}

/** "50,80,100" → [50, 80, 100] (CLI). */
export function parseThresholdList(text: string): number[] {
  const parts = text.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (!parts.every((p) => /^\d{1,3}$/.test(p))) throw new ConsoleError('INVALID_INPUT', `--alert-at ${JSON.stringify(text.slice(0, 40))}: give whole percentages, e.g. 50,80,100`);
  return validateThresholds(parts.map(Number));
}
