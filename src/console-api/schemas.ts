/**
 * The management API's request and response schemas (zod). They validate every request and
 * generate the OpenAPI document at `/openapi.json`: one source of truth. Strict objects: an
 * unknown field is bad input, not silently ignored.
 */
import { z } from 'zod';
import { AUDIT_ACTIONS, TOKEN_ID_PATTERN } from '../console/management.ts';
import { BOOK_ID_PATTERN, BOOK_ID_RULE, LIMIT_PERIODS, MAX_AMOUNT_MICROS } from '../schema/money.ts';
import { ACCOUNT_ID_PATTERN, KEY_ID_PATTERN, LIMITS } from '../schema/redis-schema.ts';

const isoTime = z.iso.datetime({ offset: true }).describe('ISO-8601 instant');
/** An expiry: a date (midnight UTC) or a date-time with a zone. The console library checks it is in the future. */
const expiry = z
  .string()
  .max(40)
  .regex(/^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:\d{2}))?$/, 'must be an ISO-8601 date or date-time with a zone')
  .describe('ISO-8601 date (midnight UTC) or date-time with a zone');

export const AccountId = z.string().regex(ACCOUNT_ID_PATTERN, 'must be 1-128 of [A-Za-z0-9._:@-], starting with a letter or digit');
export const KeyId = z.string().regex(KEY_ID_PATTERN, 'must be key_ followed by 16-32 letters and digits');
export const TokenId = z.string().regex(TOKEN_ID_PATTERN, 'must be tok_ followed by 16-32 letters and digits');

const name = z.string().min(1).max(4 * LIMITS.nameMaxChars).describe(`display name, 1-${LIMITS.nameMaxChars} characters`);
const models = z
  .array(z.string().min(1).max(LIMITS.modelPatternMaxChars))
  .min(1)
  .max(LIMITS.modelsPerKey)
  .describe('allowed model patterns: provider/model, provider/* or *');
const period = z.enum(LIMIT_PERIODS);
const amountMicros = z.number().int().positive().max(MAX_AMOUNT_MICROS).describe(`a positive integer number of micro-units (1 = 0.000001), at most ${MAX_AMOUNT_MICROS}`);
const Limit = z.strictObject({
  amount_micros: amountMicros,
  period: period.describe('day, week (Monday to Sunday), month (calendar) or total; periods reset at 00:00 UTC'),
});
const bookRef = (what: string) => z.string().regex(BOOK_ID_PATTERN, `must be ${BOOK_ID_RULE} (${what})`);
const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const AccountParams = z.strictObject({ account: AccountId });
export const KeyParams = z.strictObject({ id: KeyId });
export const TokenParams = z.strictObject({ id: TokenId });

export const CreateKeyBody = z.strictObject({
  name,
  models: models.nullable().optional().describe('allowed model patterns; absent or null = every model'),
  expires_at: expiry.nullable().optional().describe('absent or null = never'),
  limit: Limit.nullable().optional().describe('spend limit per period; absent or null = none'),
});

export const UpdateKeyBody = z
  .strictObject({
    name: name.optional(),
    models: models.nullable().optional().describe('null = every model'),
    expires_at: expiry.nullable().optional().describe('null = never'),
    limit: Limit.nullable().optional().describe('spend limit per period; null = none'),
  })
  .refine((b) => b.name !== undefined || b.models !== undefined || b.expires_at !== undefined || b.limit !== undefined, {
    message: 'give at least one of name, models, expires_at, limit',
  });

export const CreditBody = z.strictObject({
  amount_micros: amountMicros,
  reference: bookRef('the payment reference; the same reference is credited once'),
});

export const UsageBody = z.strictObject({
  key_id: KeyId.describe('the key the request was allowed with (x-keygate-key-id)'),
  amount_micros: amountMicros.describe("the request's cost in micro-units"),
  request_id: bookRef("the request's id; recording it again changes nothing"),
  model: z.string().min(1).max(256).nullable().optional().describe('the model that ran'),
  input_tokens: count.nullable().optional(),
  output_tokens: count.nullable().optional(),
});

export const UsageQuery = z.strictObject({
  account: AccountId.optional().describe("one account; an account-scoped token sees its own account's only"),
  since: isoTime.describe('first instant (inclusive)'),
  until: isoTime.optional().describe('last instant (exclusive)'),
  limit: z.coerce.number().int().min(1).max(10_000).default(1000).describe('most entries to return (1-10000, default 1000)'),
});

export const RollKeyBody = z
  .strictObject({ grace_seconds: z.number().int().min(0).max(30 * 86400).optional().describe('seconds the old key keeps working; default 0 (revoked at once)') })
  .describe('may be empty or left out');

export const CreateTokenBody = z.strictObject({
  name,
  account: AccountId.nullable().describe('the one account the token may manage; null = every account'),
});

export const AuditQuery = z.strictObject({
  account: AccountId.optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

export const IdempotencyHeaders = z.object({ 'idempotency-key': z.string().min(1).max(255).optional() });

export const Key = z.object({
  id: z.string(),
  name: z.string(),
  account: z.string(),
  status: z.enum(['active', 'revoked']),
  hint: z.string().describe('prefix and last four characters of the key'),
  models: z.array(z.string()).nullable(),
  expires_at: isoTime.nullable(),
  limit: Limit.nullable(),
  created_at: isoTime,
  updated_at: isoTime,
  revoked_at: isoTime.nullable(),
  last_used_at: isoTime.nullable(),
  requests: z.object({ today: z.number().int(), month: z.number().int() }),
  spend: z.object({
    period: period.describe("the limit's period (month when the key has no limit)"),
    period_micros: z.number().int().describe('spend in the current period'),
    total_micros: z.number().int(),
  }),
  rolled_to: z.string().nullable().describe('the key this one was rolled to'),
  rolled_from: z.string().nullable().describe('the key this one replaced'),
});

export const CreatedKey = Key.extend({ key: z.string().describe('the plaintext key') });
export const RolledKey = CreatedKey.extend({ old: Key });
export const KeyList = z.object({ keys: z.array(Key) });
export const Revealed = z.object({ id: z.string(), key: z.string() });
export const Account = z.object({
  id: z.string(),
  status: z.enum(['active', 'disabled']),
  wallet: z.object({
    enforced: z.boolean().describe('requests are refused (402) at a balance of zero or below: the account was credited, or the deployment requires wallets'),
    balance_micros: z.number().int(),
  }),
});
export const Credited = z.object({
  account: z.string(),
  reference: z.string(),
  amount_micros: z.number().int().describe("the credit's amount (on a repeated reference, the first credit's)"),
  credited: z.boolean().describe('false: this reference was already credited and nothing changed'),
  balance_micros: z.number().int(),
});
export const UsageBooked = z.object({
  booked: z.boolean().describe('false: this request id was already recorded and nothing changed'),
  key_id: z.string(),
  account: z.string(),
  request_id: z.string(),
  amount_micros: z.number().int(),
  balance_micros: z.number().int().nullable().describe('the balance after the record; null when the account has no wallet, or on a repeat'),
});
export const UsageEntry = z.object({
  id: z.string().describe('the usage-log entry id'),
  time: isoTime,
  account: z.string(),
  key_id: z.string(),
  request_id: z.string(),
  amount_micros: z.number().int(),
  model: z.string().nullable(),
  input_tokens: z.number().int().nullable(),
  output_tokens: z.number().int().nullable(),
});
export const UsageList = z.object({
  entries: z.array(UsageEntry).describe('oldest first'),
  more: z.boolean().describe('true: there are more entries; ask again with since = the last time shown (entries at that instant repeat)'),
});

export const Token = z.object({
  id: z.string(),
  name: z.string(),
  scope: z.string().describe('"all" or the account id'),
  status: z.enum(['active', 'revoked']),
  hint: z.string(),
  created_at: isoTime,
  revoked_at: isoTime.nullable(),
});
export const CreatedToken = Token.extend({ token: z.string().describe('the plaintext token, shown once') });
export const TokenList = z.object({ tokens: z.array(Token) });

export const AuditEvent = z.object({
  time: isoTime,
  action: z.enum(AUDIT_ACTIONS),
  actor: z.object({ type: z.enum(['token', 'cli']), id: z.string().nullable(), name: z.string().nullable() }),
  account: z.string().nullable(),
  key_id: z.string().nullable(),
  changes: z.record(z.string(), z.unknown()),
});
export const AuditList = z.object({ events: z.array(AuditEvent) });

export const ErrorBody = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
export const Health = z.object({ status: z.string() });
