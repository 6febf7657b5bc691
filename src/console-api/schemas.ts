/**
 * The management API's request and response schemas (zod). They validate every request and
 * generate the OpenAPI document at `/openapi.json`: one source of truth. Strict objects: an
 * unknown field is bad input, not silently ignored.
 */
import { z } from 'zod';
import { AUDIT_ACTIONS, TOKEN_ID_PATTERN, TOKEN_ID_RULE } from '../console/management.ts';
import { ISO_INSTANT_PATTERN, parseIsoInstant } from '../console/validate.ts';
import { WALLET_RULES } from '../console/wallet.ts';
import { BARE_MODEL_RULES } from '../store/sidecar-settings.ts';
import { BOOK_ID_PATTERN, BOOK_ID_RULE, LIMIT_PERIODS, MAX_AMOUNT_MICROS, MAX_TOKEN_COUNT, MAX_TOKEN_TOTAL } from '../schema/money.ts';
import { ACCOUNT_ID_PATTERN, ACCOUNT_ID_RULE, KEY_ID_PATTERN, KEY_ID_RULE, LIMITS } from '../schema/redis-schema.ts';
import { MAX_RATE_REQUESTS, MAX_RATE_TOKENS, RATE_UNITS } from '../schema/rates.ts';
import { KEY_SORTS, KEY_STATES, KEY_STATUS_FILTERS, PAGE_DEFAULT, PAGE_MAX } from '../core/key-page.ts';

function isRealInstant(s: string): boolean {
  try {
    parseIsoInstant(s);
    return true;
  } catch {
    return false;
  }
}

const isoTime = z.iso.datetime({ offset: true }).describe('ISO-8601 instant');
/** An expiry: a date (midnight UTC) or a date-time with a zone. The console library checks it is in the future. */
const expiry = z
  .string()
  .max(40)
  .regex(ISO_INSTANT_PATTERN, 'must be an ISO-8601 date or date-time with a zone')
  .refine(isRealInstant, 'is not a real calendar date and time')
  .describe('ISO-8601 date (midnight UTC) or date-time with a zone');

export const AccountId = z.string().regex(ACCOUNT_ID_PATTERN, `must be ${ACCOUNT_ID_RULE}`);
export const KeyId = z.string().regex(KEY_ID_PATTERN, `must be ${KEY_ID_RULE}`);
export const TokenId = z.string().regex(TOKEN_ID_PATTERN, `must be ${TOKEN_ID_RULE}`);

/** The library's own rule (validateName): at most nameMaxChars characters (code points, as JSON Schema's maxLength counts). */
const name = z
  .string()
  .min(1)
  .refine((s) => [...s].length <= LIMITS.nameMaxChars, `must be at most ${LIMITS.nameMaxChars} characters`)
  .meta({ maxLength: LIMITS.nameMaxChars })
  .describe(`display name, 1-${LIMITS.nameMaxChars} characters`);
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
const count = z.number().int().min(0).max(MAX_TOKEN_COUNT).describe(`a token count, 0-${MAX_TOKEN_COUNT}; a record that would take a token total (input plus output, today, this month or a token-rate window; key or account) above ${MAX_TOKEN_TOTAL} is refused with 422 OUT_OF_RANGE`);

const per = z.enum(RATE_UNITS, { error: `the window must be one of ${RATE_UNITS.join(', ')}` }).describe('the window: second, minute, hour or day (fixed, aligned to UTC)');
/** A count per window: one message for every way it can be wrong (not a number, a fraction, out of range). */
const perWindow = (what: string, max: number) => {
  const error = `${what} per window must be a whole number from 1 to ${max}`;
  return z.number({ error }).int({ error }).min(1, { error }).max(max, { error });
};
const RequestRate = z
  .strictObject({ requests: perWindow('requests', MAX_RATE_REQUESTS).describe(`requests per window, 1-${MAX_RATE_REQUESTS}`), per })
  .describe('request rate: every sidecar counts against the same window');
const TokenRate = z
  .strictObject({ tokens: perWindow('tokens', MAX_RATE_TOKENS).describe(`input plus output tokens per window, 1-${MAX_RATE_TOKENS}`), per })
  .describe('token rate: booked tokens (usage records, metered answers) count against it');
const RequestRateUse = z
  .object({
    used: z.number().int().describe('requests counted in the window: allowed, plus units sidecars reserved ahead in leases'),
    held: z
      .number()
      .int()
      .describe('units of `used` in leases sidecars still hold (at most 5% of the rate); the requests really allowed are between used - held and used, exactly used when held is 0'),
    resets_at: isoTime,
  })
  .nullable();
const TokenRateUse = z.object({ used: z.number().int().describe('tokens booked in the window'), resets_at: isoTime }).nullable();
const RateUses = z.object({ requests: RequestRateUse, tokens: TokenRateUse }).describe("the current window's use of each rate (null: no such rate)");

export const AccountParams = z.strictObject({ account: AccountId });
export const KeyParams = z.strictObject({ id: KeyId });
export const TokenParams = z.strictObject({ id: TokenId });

export const CreateKeyBody = z.strictObject({
  name,
  models: models.nullable().optional().describe('allowed model patterns; absent or null = every model'),
  expires_at: expiry.nullable().optional().describe('absent or null = never'),
  limit: Limit.nullable().optional().describe('spend limit per period; absent or null = none'),
  rate: RequestRate.nullable().optional().describe('request rate; absent or null = none'),
  token_rate: TokenRate.nullable().optional().describe('token rate; absent or null = none'),
});

export const UpdateAccountBody = z
  .strictObject({
    rate: RequestRate.nullable().optional().describe('request rate of the whole account; null removes it'),
    token_rate: TokenRate.nullable().optional().describe('token rate of the whole account; null removes it'),
    price_multiplier: z.union([z.string().max(16), z.number()]).optional().describe('the account\'s price multiplier for metered usage, applied after everything else: a decimal from 0 to 1000 with at most 6 decimals ("1.2"; 0 = free; 1 = the default)'),
    billing: z.enum(['metered', 'external']).optional().describe("metered: keygate books the account's usage; external: its router books every request with POST /v1/usage, and unbillable endpoints open (docs/endpoints.md)"),
  })
  .refine((b) => b.rate !== undefined || b.token_rate !== undefined || b.price_multiplier !== undefined || b.billing !== undefined, { message: 'give at least one of rate, token_rate, price_multiplier, billing' });

export const UpdateKeyBody = z
  .strictObject({
    name: name.optional(),
    models: models.nullable().optional().describe('null = every model'),
    expires_at: expiry.nullable().optional().describe('null = never'),
    limit: Limit.nullable().optional().describe('spend limit per period; null = none'),
    rate: RequestRate.nullable().optional().describe('request rate; null = none'),
    token_rate: TokenRate.nullable().optional().describe('token rate; null = none'),
    alert_thresholds: z.array(z.number().int().min(1).max(100)).max(10).optional().describe('key.limit.threshold events at these percentages of the limit (default 50, 80, 100; [] = none)'), // events
  })
  .refine((b) => b.name !== undefined || b.models !== undefined || b.expires_at !== undefined || b.limit !== undefined || b.rate !== undefined || b.token_rate !== undefined || b.alert_thresholds !== undefined, {
    message: 'give at least one of name, models, expires_at, limit, rate, token_rate, alert_thresholds',
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
  .strictObject({
    grace_seconds: z.number().int().min(0).max(30 * 86400).optional().describe('seconds the old key keeps working; default 0 (revoked at once)'),
    name: name
      .optional()
      .describe(`the new key's name (1-${LIMITS.nameMaxChars} characters); default the old name with " (rolled)", or " (rolled 2)", " (rolled 3)"… when it already ends so, cut to fit`),
  })
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

const inOut = z.object({ input: z.number().int(), output: z.number().int() });
/** Booked tokens (metered bookings and usage records with counts) today and this month, UTC. */
const Tokens = z.object({ today: inOut, month: inOut }).describe('booked input and output tokens today and this month (UTC)');

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
  refused: z.object({ endpoint: z.number().int().describe('requests the endpoint rule refused (all time): unknown, stateful or unbillable endpoints, objects of another account, unreadable bodies') }),
  spend: z.object({
    period: period.describe("the limit's period (month when the key has no limit)"),
    period_micros: z.number().int().describe('spend in the current period'),
    total_micros: z.number().int(),
  }),
  tokens: Tokens,
  rate: RequestRate.nullable(),
  token_rate: TokenRate.nullable(),
  rate_use: RateUses,
  rolled_to: z.string().nullable().describe('the key this one was rolled to'),
  rolled_from: z.string().nullable().describe('the key this one replaced'),
});

export const CreatedKey = Key.extend({ key: z.string().describe('the plaintext key') });
export const RolledKey = CreatedKey.extend({ old: Key });
export const KeyListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(PAGE_MAX).default(PAGE_DEFAULT).describe(`keys per page (1-${PAGE_MAX}, default ${PAGE_DEFAULT})`),
  cursor: z.string().min(1).max(1024).optional().describe('next_cursor of the page before'),
  status: z
    .enum(KEY_STATUS_FILTERS)
    .default('all')
    .describe('current = every key not revoked; all (default); or one state: active, expired, limit_reached, rate_limited, revoked'),
  q: z.string().max(256).optional().describe('search: a case-insensitive substring of the name, or the exact key id or hint'),
  sort: z.enum(KEY_SORTS).default('created').describe('created (default, oldest first), name or expires; a leading - reverses'),
});
export const ListedKey = Key.extend({
  state: z.enum(KEY_STATES).describe("the key's status now: revoked, expired, limit_reached (its spend limit is reached), rate_limited, or active"),
  limit_reached_until: isoTime.nullable().describe('limit_reached: when the spend limit lifts (null: a total limit, never)'),
});
export const KeyList = z.object({
  keys: z.array(ListedKey),
  next_cursor: z.string().nullable().describe('the cursor of the next page; null on the last page'),
  total: z.number().int().describe('keys matching the search and status, over every page'),
  active_keys: z.number().int().describe("the account's active keys (revoked ones do not count)"),
  max_active_keys: z.number().int().describe('the most active keys an account may have'),
});
export const Revealed = z.object({ id: z.string(), key: z.string() });
const BareModelReading = z.object({
  rule: z
    .enum(BARE_MODEL_RULES)
    .describe(
      'provider (every live sidecar reads a plain name as that provider\'s: gpt-4o-mini counts as {provider}/gpt-4o-mini), none (none does), mixed (they differ, or some publish no reading: it depends on the sidecar that checks the request), unreported (no live sidecar published a reading)',
    ),
  provider: z.string().nullable().describe('the provider of rule provider; otherwise null'),
});
const BareModels = z.object({ openai: BareModelReading, anthropic: BareModelReading, google: BareModelReading });
export const Account = z.object({
  id: z.string(),
  status: z.enum(['active', 'disabled']),
  wallet: z.object({
    enforced: z
      .boolean()
      .describe(
        "a request of this account can be refused (402) at a balance of zero or below: the account was credited (every sidecar enforces it), or it never was and at least one live sidecar runs with KEYGATE_REQUIRE_WALLET=true (see rule)",
      ),
    balance_micros: z.number().int(),
    exists: z.boolean().describe('false: the account has no wallet (it was never credited)'),
    rule: z
      .enum(WALLET_RULES)
      .describe(
        "why: credited (a wallet exists: every sidecar enforces it); otherwise what the live sidecars publish of their KEYGATE_REQUIRE_WALLET: required (every one refuses), not-required (none does), mixed (they differ: a request is refused or not depending on the sidecar that checks it), unreported (no live sidecar published a setting: enforced is this console's own KEYGATE_REQUIRE_WALLET)",
      ),
  }),
  tokens: Tokens,
  rate: RequestRate.nullable(),
  token_rate: TokenRate.nullable(),
  rate_use: RateUses,
  currency: z.string().describe("the deployment's currency code (ISO 4217, KEYGATE_CURRENCY; default USD): what micro-units count"),
  price_multiplier: z.string().optional().describe('the price multiplier of the account\'s metered usage (decimal), present when set (absent: 1)'),
  bare_models: BareModels.describe(
    "how the live sidecars read a model name without a provider at each entry family (what they publish of their KEYGATE_BARE_MODEL_PROVIDER): at the openai entry, a key listing openai/gpt-4o-mini accepts a plain gpt-4o-mini only where the rule is provider with provider openai (at the anthropic and google entries a plain name counts as anthropic's or google's in any case)",
  ),
  billing: z.enum(['metered', 'external']).describe("how the account's usage is booked: metered (by keygate) or external (its router books every request; unbillable endpoints open)"),
});
export const LedgerQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(PAGE_MAX).default(PAGE_DEFAULT).describe(`entries per page (1-${PAGE_MAX}, default ${PAGE_DEFAULT})`),
  cursor: z.string().min(1).max(512).optional().describe('next_cursor of the page before'),
});
export const LedgerEntry = z.object({
  id: z.string().describe('c:{reference} for a credit; the usage-log id for a charge'),
  time: isoTime,
  type: z.enum(['credit', 'charge']),
  amount_micros: z.number().int().describe('signed: positive for a credit, negative for a charge'),
  reference: z.string().nullable().describe("a credit's payment reference"),
  request_id: z.string().nullable().describe("a charge's request id"),
  key_id: z.string().nullable().describe('the key a charge was booked to'),
  model: z.string().nullable(),
  price_rule: z.string().optional().describe("a metered charge's price rule (table, table-catalog-model, catalog, …, unpriced; docs/metering.md \"Which price\")"),
  priced_by: z.string().nullable().optional().describe('the name that priced a metered charge: the table field or provider/id of the catalog model'),
});
export const Ledger = z.object({
  currency: z.string(),
  entries: z.array(LedgerEntry).describe('newest first'),
  next_cursor: z.string().nullable().describe('the cursor of the next (older) page; null on the last page'),
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
export const PriceBasis = z
  .object({
    rule: z.string().describe('which rule priced it: table, table-catalog-model, catalog, provider-wildcard, wildcard, requested-…, unpriced, recorded'),
    model: z.string().nullable().describe('the name that priced it: the table field or provider/id of the catalog model'),
    source: z.enum(['table', 'catalog', 'record']).nullable(),
    catalog_version: z.string().nullable(),
    tier: z.number().int().nullable().describe('the whole-request tier applied: input tokens above this many; null: the base price'),
    service_tier: z.string().nullable(),
    multiplier: z.string().describe('service tier × account multiplier (decimal)'),
    parts: z.record(z.string(), z.string()).describe('class → micro-units (exact decimal); they sum to the amount before its one ceiling'),
    service_tier_multiplier: z.string().optional(),
    account_multiplier: z.string().optional(),
    catalog_model: z.string().nullable().optional().describe('the catalog model the name resolved to (provider/id)'),
    counts: z.record(z.string(), z.number()).optional().describe('class → tokens (web_search: calls)'),
    prices: z.record(z.string(), z.number()).optional().describe('class → micro-units per million tokens (web_search: per thousand calls)'),
    unknown_service_tier: z.literal(true).optional().describe('the response named a service tier without a multiplier: priced at the standard rate'),
  });
export const UsageEntry = z.object({
  id: z.string().describe('the usage-log entry id'),
  time: isoTime,
  account: z.string(),
  key_id: z.string(),
  request_id: z.string().describe('the request id: a usage record\'s own; for a metered booking Envoy\'s x-request-id, a label only'),
  booking_id: z.string().describe('the id the entry is booked (idempotent) under: a metered booking\'s is minted by keygate; a usage record\'s is its request id'),
  amount_micros: z.number().int(),
  model: z.string().nullable(),
  input_tokens: z.number().int().nullable(),
  output_tokens: z.number().int().nullable(),
  cached_input_tokens: z.number().int().optional().describe('present when the entry has it (metered bookings)'),
  cache_write_tokens: z.number().int().optional().describe('present when the entry has it (metered bookings)'),
  reasoning_tokens: z.number().int().optional().describe('present when the entry has it (metered bookings)'),
  source: z.enum(['meter', 'record']).describe('meter: read from a response by metering; record: a usage record (POST /v1/usage, `keygate usage record`)'),
  estimated: z.boolean().describe('true: a token count was estimated, not reported (e.g. a stream cut before its usage); metered bookings only'),
  unpriced: z.boolean().describe('true: no price matched the model, so it was booked at 0 with its tokens; metered bookings only'),
  price: PriceBasis.optional().describe('why this price (docs/metering.md, "Why this price"); absent on entries written before it existed'),
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
  actor: z.object({ type: z.enum(['token', 'cli', 'user']), id: z.string().nullable(), name: z.string().nullable() }),
  account: z.string().nullable(),
  key_id: z.string().nullable(),
  changes: z.record(z.string(), z.unknown()),
});
export const AuditList = z.object({ events: z.array(AuditEvent) });

export const ErrorBody = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
export const UsageConflictBody = ErrorBody.extend({
  booked: z
    .object(UsageEntry.pick({ key_id: true, account: true, request_id: true, amount_micros: true, model: true, input_tokens: true, output_tokens: true }).shape)
    .describe('the record booked first under this request id (it stands; nothing was changed); a repeat differing in any of these fields is this conflict'),
});
export const Health = z.object({ status: z.string() });
