/**
 * keygate console library: create, list, reveal, update and revoke keys, disable and enable
 * accounts, credit wallets, record and export usage — each atomic in Redis, on the versioned schema of docs/redis-schema.md.
 *
 *   import { KeyConsole } from 'keygate';
 *   const kc = new KeyConsole({ redis: process.env.REDIS_URL! });
 *   const { id, key } = await kc.createKey({ account: 'acct-42', name: 'ci', models: ['openai/*'] });
 */
export { KeyConsole, ConsoleService, type KeyConsoleOptions } from './service.ts';
export {
  generateKeyId,
  type KeyView,
  type ManagedKey,
  type CreatedKey,
  type CreateKeyInput,
  type RollOptions,
  type ExpiryInput,
  type KeyUpdate,
  type RevokeResult,
} from './keys.ts';
export { type AccountInfo, type AccountResult } from './accounts.ts';
export { type BareModels, type BareModelReading, type BareModelRule } from '../store/sidecar-settings.ts';
export { CLI_ACTOR, type Actor } from './management.ts';
export { type AccountWallet, type CreditResult, type KeyUsage, type UsageInput, type UsageResult } from './wallet.ts';
export { MONEY_DEFAULTS } from '../core/money.ts';
export { accountJson, keyJson, keyRecordJson } from './views.ts';
export {
  formatAmount,
  parseAmount,
  LIMIT_PERIODS,
  MAX_AMOUNT_MICROS,
  MAX_BALANCE_MICROS,
  type KeyLimit,
  type LimitPeriod,
  type UsageEntry,
} from '../schema/money.ts';
export { ConsoleError, type ConsoleErrorCode } from './errors.ts';
export { validateModelPattern, validateModels, validateName, parseIsoInstant } from './validate.ts';
export { parseKeyring, sealSecret, openSecret, envelopeAad, kekFingerprint, REVEAL_KEY_ENV, type Keyring } from '../keys/crypto.ts';
export { generateKey, isWellFormedKey, keyDigest, maskKey, DEFAULT_KEY_PREFIX } from '../core/key-format.ts';
export {
  LIMITS,
  SCHEMA_VERSION,
  SCHEMA_REVISION,
  DEFAULT_NAMESPACE,
  KeyField,
  AccountField,
  schema,
  type KeyRecord,
  type KeyStatus,
  type AccountStatus,
  type Schema,
} from '../schema/redis-schema.ts';
