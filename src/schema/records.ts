/**
 * The records a decision reads, one `RecordType` each: where the record lives (its Redis key name,
 * from the schema), how one round trip reads it, and how its answer decodes. Every store answers
 * every record type through one lookup, `RecordSource.lookup(type, id)` (`src/store/record-source.ts`);
 * the cache decorates that one lookup, so a new record type is cached, invalidated and bounded
 * without a line in the store or the cache.
 *
 * A decoder never throws: a record that does not follow the schema decodes to a value the phase
 * denies (fail closed), and `corrupt` names why, for the operator's log (once per record).
 */
import { parsePriceMultiplier, PRICE_MULTIPLIER_FIELD } from './account-price.ts';
import { PriceTable } from './prices.ts';
import { parseGate, type Gate } from './money.ts';
import { NO_RATES, NO_TOKEN_BLOCKS, parseRateFields, parseTokenBlocks, RATE_FIELDS, type Rates, type TokenBlocks } from './rates.ts';
import { FAMILIES } from '../core/families/index.ts';
import { parseCredentialMarker } from '../core/upstream-credential.ts';
import { OWNED_ID_PATTERN, OwnedField } from './owned.ts';
import { AccountField, CredentialField, parseAccountBlocked, type AccountBilling, parseSidecarKey, SIDECAR_KEY_FIELDS, type ParsedKey, type Schema } from './redis-schema.ts';

/** The hash reads a record type may use: one command per lookup (ioredis clients have these). */
export interface HashReads {
  hmget(key: string, ...fields: string[]): Promise<(string | null)[]>;
  hget(key: string, field: string): Promise<string | null>;
  hgetall(key: string): Promise<Record<string, string>>;
}

export interface RecordType<T> {
  /** Short name for logs and metrics (`key`, `account`, `gate`). */
  readonly name: string;
  /** The Redis key name of the record of `id`; its prefix must be one of `Schema.trackedPrefixes` to be cached. */
  key(s: Schema, id: string): string;
  /** One round trip and the decoded answer (never a throw for bad data; a failed command rejects). */
  read(r: HashReads, rkey: string): Promise<T>;
  /** Why the answer is a corrupt record (logged once), or undefined. */
  corrupt(v: T): string | undefined;
  /** How `id` appears in the operator's log (default: as is); a key digest is shortened. */
  readonly logId?: (id: string) => string;
  /** Kept in the cache's negative part (answers a flood of random ids could fill it with). */
  negative(v: T): boolean;
  /**
   * Answered, even from memory, only after the I/O callbacks pending in this loop turn have run, so
   * an invalidation that reached the process before the request did is applied first. Set on the
   * record a decision reads first (the key); later reads of the same decision follow it.
   */
  readonly afterPendingIo?: boolean;
}

const KEY_READ = [...SIDECAR_KEY_FIELDS, ...RATE_FIELDS];
const RATES_AT = SIDECAR_KEY_FIELDS.length;

/** A key's HMGET of its fields and then RATE_FIELDS: the grant with its rates (`NO_RATES` when none). */
export function parseKeyWithRates(values: readonly (string | null)[]): ParsedKey {
  const k = parseSidecarKey(values);
  if (k.kind !== 'grant') return k;
  const rates = parseRateFields(values[RATES_AT], values[RATES_AT + 1]);
  if (typeof rates === 'string') return { kind: 'corrupt', reason: rates };
  return { kind: 'grant', grant: { ...k.grant, rates } };
}

/** The key record by SHA-256 digest of the key: a grant (with its rates), or absent (unknown, revoked), or corrupt. */
export const KEY_RECORD: RecordType<ParsedKey> = {
  name: 'key',
  key: (s, digest) => s.keyRecord(digest),
  read: async (r, rkey) => parseKeyWithRates(await r.hmget(rkey, ...KEY_READ)),
  corrupt: (v) => (v.kind === 'corrupt' ? v.reason : undefined),
  negative: (v) => v.kind !== 'grant',
  logId: (digest) => digest.slice(0, 12),
  afterPendingIo: true,
};

/** The account as the sidecar reads it: blocked or not (or corrupt), its rates, and the providers it has its own credential for. */
export interface AccountState {
  readonly blocked: boolean | 'corrupt';
  readonly rates: Rates;
  /** `PROVIDER_BIT`s of the providers with an own credential (`credentials` field; 0: none). */
  readonly credentials: number;
  /** The account's price multiplier for metering (10^-6 units; absent: 1; 'corrupt': off the schema, priced at 1). */
  readonly priceMultiplier?: bigint | 'corrupt';
  /** How the account's usage is booked (SPEC 15): `external` opens `unbillable` endpoints. */
  readonly billing: AccountBilling;
}
const ACCOUNT_OPEN: AccountState = Object.freeze({ blocked: false, rates: NO_RATES, credentials: 0, billing: 'metered' });
const ACCOUNT_DISABLED: AccountState = Object.freeze({ blocked: true, rates: NO_RATES, credentials: 0, billing: 'metered' });
const ACCOUNT_CORRUPT: AccountState = Object.freeze({ blocked: 'corrupt', rates: NO_RATES, credentials: 0, billing: 'metered' });

/** `billing` as stored: absent is `metered`; anything else than the two values is corrupt. */
export function parseAccountBilling(v: string | null | undefined): AccountBilling | 'corrupt' {
  if (v === null || v === undefined || v === 'metered') return 'metered';
  return v === 'external' ? 'external' : 'corrupt';
}

/**
 * An HMGET of `status`, `rate`, `token_rate`, `credentials`, `price_multiplier`, `billing` (shared
 * objects for a metered account without rates, credentials or multiplier).
 */
export function parseAccountState(values: readonly (string | null)[]): AccountState {
  const blocked = parseAccountBlocked(values[0] ?? null);
  const rates = parseRateFields(values[1], values[2]);
  const credentials = parseCredentialMarker(values[3]);
  const billing = parseAccountBilling(values[5]);
  if (blocked === 'corrupt' || typeof rates === 'string' || credentials === 'corrupt' || billing === 'corrupt') return ACCOUNT_CORRUPT;
  const priceMultiplier = parsePriceMultiplier(values[4]);
  if (priceMultiplier !== undefined) return { blocked, rates, credentials, priceMultiplier, billing };
  if (rates === NO_RATES && credentials === 0 && billing === 'metered') return blocked ? ACCOUNT_DISABLED : ACCOUNT_OPEN;
  return { blocked, rates, credentials, billing };
}

/** The account's state (`blocked`: `true` when disabled, `'corrupt'` when the record does not follow the schema) and its rates. */
export const ACCOUNT_RECORD: RecordType<AccountState> = {
  name: 'account',
  key: (s, accountId) => s.account(accountId),
  read: async (r, rkey) => parseAccountState(await r.hmget(rkey, AccountField.status, ...RATE_FIELDS, AccountField.credentials, PRICE_MULTIPLIER_FIELD, AccountField.billing)),
  corrupt: (v) => (v.blocked === 'corrupt' ? 'status is not active|disabled, a rate is not N/UNIT, credentials names no provider, or billing is not metered|external' : undefined),
  negative: () => false,
};

/** The gate as the sidecar reads it: the money flags and the token-rate blocks (`tokens` absent = none). */
export type RateGate = Gate & { readonly tokens?: TokenBlocks };

/** The account's gate (wallet empty, keys over their spend limit, token rates used up); it changes only on threshold crossings. */
export const GATE_RECORD: RecordType<RateGate | 'corrupt'> = {
  name: 'gate',
  key: (s, accountId) => s.gate(accountId),
  read: async (r, rkey) => {
    const h = await r.hgetall(rkey);
    const g = parseGate(h);
    if (typeof g === 'string') return 'corrupt';
    const t = parseTokenBlocks(h);
    if (typeof t === 'string') return 'corrupt';
    return t === NO_TOKEN_BLOCKS ? g : { ...g, tokens: t };
  },
  corrupt: (v) => (v === 'corrupt' ? 'gate record does not follow the schema' : undefined),
  negative: () => false,
};


/**
 * The price table (one hash, `prices`): read whole, cached and invalidated like every other record
 * (its key is among the tracked prefixes), so a price change reaches every sidecar within the
 * staleness bound. Fields that do not decode are skipped (the model is then unpriced) and named.
 */
export const PRICES_RECORD: RecordType<PriceTable> = {
  name: 'prices',
  key: (s) => s.prices(),
  read: async (r, rkey) => PriceTable.fromHash(await r.hgetall(rkey)),
  corrupt: (t) => (t.corrupt.length > 0 ? t.corrupt.map((c) => `${c.field}: ${c.reason}`).join('; ').slice(0, 500) : undefined),
  negative: () => false,
};

/**
 * The account's own upstream credentials as stored: one envelope per provider, in `FAMILIES` order
 * (null: none for that provider). Read only for an account whose record lists a credential
 * (`AccountState.credentials`), so an account without one costs no lookup. The sidecar opens an
 * envelope once per record version (`src/pipeline/phases/own-credential.ts`).
 */
export interface StoredCredentials {
  readonly envelopes: readonly (string | null)[];
}

const CREDENTIAL_FIELDS = FAMILIES.map((f) => CredentialField.envelope(f));

export const CREDENTIAL_RECORD: RecordType<StoredCredentials> = {
  name: 'credential',
  key: (s, accountId) => s.credentials(accountId),
  read: async (r, rkey) => ({ envelopes: await r.hmget(rkey, ...CREDENTIAL_FIELDS) }),
  corrupt: () => undefined,
  negative: () => false,
};
/** An owned provider object as the Check reads it: the account that created it, or absent/corrupt. */
export type OwnedState = { readonly account: string } | 'absent' | 'corrupt';

/** The id of an owned-record lookup: `provider:objectId` (a provider name has no `:`). */
export function ownedRecordId(provider: string, objectId: string): string {
  return `${provider}:${objectId}`;
}

/**
 * An owned provider object (`src/schema/owned.ts`): who created it. Looked up by `ownedRecordId`;
 * an id outside `OWNED_ID_PATTERN` is never read (absent). Absent answers are negative: a flood of
 * made-up ids fills only the cache's negative part, and the metering write that records an object
 * drops a cached "absent" (the prefix is tracked).
 */
export const OWNED_RECORD: RecordType<OwnedState> = {
  name: 'owned',
  key: (s, id) => {
    const c = id.indexOf(':');
    return s.owned(id.slice(0, c), id.slice(c + 1));
  },
  read: async (r, rkey) => {
    const account = await r.hget(rkey, OwnedField.account);
    if (account === null) return 'absent';
    return account === '' ? 'corrupt' : { account };
  },
  corrupt: (v) => (v === 'corrupt' ? 'owned record has an empty account' : undefined),
  negative: (v) => v === 'absent',
};

/** Whether `objectId` may name an owned record at all (else it is refused like an absent one, without a read). */
export function isOwnedId(objectId: string): boolean {
  return OWNED_ID_PATTERN.test(objectId);
}
