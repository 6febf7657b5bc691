/**
 * Rows 6 and 7 of the decision (pure): the account's prepaid wallet and the key's spend limit, read
 * from the account's gate record (decoded by `src/schema/money.ts`). The gate changes only when a wallet or a
 * key crosses its threshold, so a cached gate stays valid while usage is recorded; a limit's block
 * carries the end of its period and lifts by itself at that instant, with no write at midnight.
 */
import { deny, type Deny } from './decision.ts';

/** What the sidecar needs of an account's money state. `limits`: key id → epoch ms the block ends (Infinity = until the limit changes). */
export interface Gate {
  /** `none`: the account has no wallet (never credited). */
  readonly wallet: 'none' | 'open' | 'empty';
  readonly limits: ReadonlyMap<string, number> | null;
}

export const NO_GATE: Gate = Object.freeze({ wallet: 'none', limits: null });

/** Whether a key is over its spend limit at `nowMs` (the block lifts by itself at the period's end). */
export function keyLimitReached(gate: Gate, keyId: string, nowMs: number): boolean {
  if (gate.limits === null) return false;
  const until = gate.limits.get(keyId);
  return until !== undefined && nowMs < until;
}

/**
 * Row 6. `requireWallet`: an account without a wallet (never credited) is treated as an empty one
 * (`KEYGATE_REQUIRE_WALLET`); otherwise it is not metered. A corrupt gate is a store fault: 503.
 */
export function walletDeny(gate: Gate | 'corrupt', keyId: string, requireWallet: boolean): Deny | null {
  if (gate === NO_GATE && !requireWallet) return null;
  if (gate === 'corrupt') return deny('AUTH_UNAVAILABLE', undefined, keyId);
  if (gate.wallet === 'empty' || (gate.wallet === 'none' && requireWallet)) return deny('INSUFFICIENT_BALANCE', undefined, keyId);
  return null;
}

/** Row 7: the key is over its spend limit until the end of the period it was reached in (a gate the wallet rule let pass). */
export function spendLimitDeny(gate: Gate, keyId: string, nowMs: number): Deny | null {
  return gate.limits !== null && keyLimitReached(gate, keyId, nowMs) ? deny('KEY_LIMIT_EXCEEDED', undefined, keyId) : null;
}

/** Rows 6 and 7 in order. */
export function moneyDeny(gate: Gate | 'corrupt', keyId: string, nowMs: number, requireWallet: boolean): Deny | null {
  return walletDeny(gate, keyId, requireWallet) ?? (gate === 'corrupt' ? null : spendLimitDeny(gate, keyId, nowMs));
}

/** Defaults of the money options (library options of `KeyConsole`; the sidecar's metering books with them too). */
export const MONEY_DEFAULTS = {
  /** How long a usage record's request id is remembered (a retry within it changes nothing): 7 days. */
  usageIdempotencySeconds: 7 * 24 * 3600,
  /** Usage-log entries kept per account (approximately; older ones are trimmed): 100,000. */
  usageLogMaxEntries: 100_000,
} as const;
