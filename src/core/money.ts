/**
 * Rows 6 and 7 of the decision (pure): the account's prepaid wallet and the key's spend limit, read
 * from the account's gate record (`src/schema/money.ts`). The gate changes only when a wallet or a
 * key crosses its threshold, so a cached gate stays valid while usage is recorded; a limit's block
 * carries the end of its period and lifts by itself at that instant, with no write at midnight.
 */
import { keyLimitReached, type Gate } from '../schema/money.ts';
import { deny, type Deny } from './decision.ts';

/**
 * `requireWallet`: an account without a wallet (never credited) is treated as an empty one
 * (`KEYGATE_REQUIRE_WALLET`); otherwise it is not metered. A corrupt gate is a store fault: 503.
 */
export function moneyDeny(gate: Gate | 'corrupt', keyId: string, nowMs: number, requireWallet: boolean): Deny | null {
  if (gate === 'corrupt') return deny('AUTH_UNAVAILABLE', undefined, keyId);
  if (gate.wallet === 'empty' || (gate.wallet === 'none' && requireWallet)) return deny('INSUFFICIENT_BALANCE', undefined, keyId);
  if (keyLimitReached(gate, keyId, nowMs)) return deny('KEY_LIMIT_EXCEEDED', undefined, keyId);
  return null;
}
