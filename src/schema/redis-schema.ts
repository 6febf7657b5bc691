/**
 * The Redis data schema, key generation v1 (docs/redis-schema.md) — the single definition used by the sidecar (reads), the
 * console library (writes), the tests and the benchmark: every record is encoded and decoded here. `docs/redis-schema.md` is the prose form of this file; change both together.
 *
 *   {ns}:v1:key:{sha256hex}       HASH  the key record, found by the digest of the plaintext key
 *   {ns}:v1:keyid:{keyId}         STRING  → sha256hex (console index: key id → record)
 *   {ns}:v1:acct:{accountId}      HASH  account state (absent = enabled)
 *   {ns}:v1:acctkeys:{accountId}  SET   key ids of the account, active and revoked (console index)
 *   {ns}:v1:acctactive:{accountId} SET  key ids of the account's active keys (console: the per-account limit)
 *   {ns}:v1:dataset               STRING  random marker of the dataset (sidecar: created if absent, checked on heartbeats)
 *
 * Money records (`src/schema/money.ts`), every one carrying the hash tag `{accountId}` so that one
 * account's records share a Cluster slot:
 *   {ns}:v1:gate:{acct}              HASH  blocked flags: wallet empty, keys over their limit (sidecar)
 *   {ns}:v1:wallet:{acct}            HASH  balance in micro-units (console)
 *   {ns}:v1:credits:{acct}           HASH  reference → credit (idempotency of credits)
 *   {ns}:v1:spend:{acct}:{keyId}     HASH  the key's limit and spend per period
 *   {ns}:v1:keyuse:{acct}:{keyId}    HASH  last used, request counts (flushed by the sidecars)
 *   {ns}:v1:usagereq:{acct}:{reqId}  STRING idempotency of one usage record (expires)
 *   {ns}:v1:usage:{acct}             STREAM the usage log (capped)
 *   {ns}:v1:usageaccts               SET   accounts with a usage log (export)
 *   {ns}:v1:tokens:{acct}:{keyId}    HASH  the key's booked tokens today and this month (TokenCounterField)
 *   {ns}:v1:tokens:{acct}            HASH  the account's (same fields)
 *   {ns}:v1:prices                   HASH  the price table (src/schema/prices.ts; read and cached by the sidecar)
 *   {ns}:v1:keyorder:{acct}          ZSET  every key id of the account by created_at (console: list pages)
 *   {ns}:v1:keycur:{acct}            ZSET  the ids of keys not revoked, by created_at (console: list pages)
 *   {ns}:v1:keyinfo:{acct}           HASH  key id → the small fields a list filters and sorts on (console)
 *   {ns}:v1:keydays:{acct}:{keyId}   HASH  UTC day → the key's spend, requests and tokens that day (35 days)
 *   {ns}:v1:sidecars                 HASH  instance id → a live sidecar's require-wallet setting, bare-name mapping and expiry (console reads)
 *   {ns}:v1:cred:{acct}              HASH  the account's own upstream credentials, encrypted (CredentialField; tracked)
 *
 * The sidecar reads only `key:`, `acct:`, `gate:` records and the `prices` table (one key each), so it
 * works unchanged on Cluster; invalidation tracks exactly those four prefixes.
 */
import { z } from 'zod';
import { KEY_LIMITS } from '../core/key-rules.ts';
import type { KeyGrant, ParsedKey } from '../core/key-grant.ts';
import type { Rates } from '../core/rate.ts';
import { parseRateFields } from './rate-fields.ts';

// What the sidecar needs of a key, and a key record as read: pure types of the floor (src/core/key-grant.ts).
export type { KeyGrant, ParsedKey };

/** The key generation: in every key name (`v1`) and in the key record's `v` field. */
export const SCHEMA_VERSION = '1';
/**
 * The revision of docs/redis-schema.md this code implements (2: wallets, spend limits, usage; 3: a
 * revoked key's models moved to `revoked_models`; 4: the per-account key list index and per-key
 * daily usage).
 */
export const SCHEMA_REVISION = 4;
export const DEFAULT_NAMESPACE = 'kg';
export const NAMESPACE_PATTERN = /^[A-Za-z0-9_.-]{1,32}$/;

export const KEY_ID_PATTERN = /^key_[0-9A-Za-z]{16,32}$/;
/** KEY_ID_PATTERN in words, for error messages. */
export const KEY_ID_RULE = 'key_ followed by 16-32 letters and digits';
export const ACCOUNT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;
/** ACCOUNT_ID_PATTERN in words, for error messages. */
export const ACCOUNT_ID_RULE = '1-128 of [A-Za-z0-9._:@-], starting with a letter or digit';

/** Field names of the key record hash. */
export const KeyField = {
  version: 'v',
  id: 'id',
  account: 'account',
  name: 'name',
  status: 'status',
  models: 'models',
  /** Where a revoked key's model list is kept (the revoke moves it out of `models`); never read by the sidecar. */
  revokedModels: 'revoked_models',
  expiresAt: 'expires_at',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
  revokedAt: 'revoked_at',
  /** Display form of the key (`maskKey`: prefix…last4), for lists. */
  hint: 'hint',
  /** Write counter: 1 at create, +1 on every later write of the record. */
  rev: 'rev',
  /** The reveal envelope (`src/keys/crypto.ts`); deleted on revoke. */
  secret: 'secret',
  /** A rolled key: the id of the key that replaced it (console only; never read by the sidecar). */
  rolledTo: 'rolled_to',
  /** A roll's new key: the id of the key it replaced (console only). */
  rolledFrom: 'rolled_from',
} as const;

/** Limits the console enforces (docs/redis-schema.md §Limits). The sidecar accepts up to 1000 models. */
export const LIMITS = KEY_LIMITS;

/** The fields the sidecar reads, in HMGET order. */
export const SIDECAR_KEY_FIELDS = [
  KeyField.version,
  KeyField.id,
  KeyField.account,
  KeyField.status,
  KeyField.models,
  KeyField.expiresAt,
] as const;

export const AccountField = {
  status: 'status',
  updatedAt: 'updated_at',
  /** The providers the account has its own credential for, comma-separated (absent: none); read with the status. */
  credentials: 'credentials',
  /** `metered` (absent: the default) or `external` (the account's router books its usage; SPEC 15 `unbillable`). */
  billing: 'billing',
} as const;

export const ACCOUNT_BILLINGS = ['metered', 'external'] as const;
export type AccountBilling = (typeof ACCOUNT_BILLINGS)[number];

/**
 * Fields of the account's credential record (`cred:{acct}`), per provider: the envelope
 * (`src/keys/credential-crypto.ts`) under the provider's name, its last four characters and when it
 * was set (epoch ms). The sidecar reads the envelopes only.
 */
export const CredentialField = {
  envelope: (provider: string) => provider,
  hint: (provider: string) => `${provider}:hint`,
  setAt: (provider: string) => `${provider}:set_at`,
} as const;

export type KeyStatus = 'active' | 'revoked';
export type AccountStatus = 'active' | 'disabled';

export interface Schema {
  readonly ns: string;
  /** Prefixes the sidecar's cache is invalidated on (CLIENT TRACKING BCAST PREFIX). */
  readonly trackedPrefixes: readonly string[];
  /** Random value the sidecar creates if absent and compares on each heartbeat (detects SWAPDB). */
  readonly datasetMarker: string;
  keyRecord(digest: string): string;
  keyIdIndex(keyId: string): string;
  account(accountId: string): string;
  accountKeys(accountId: string): string;
  accountActiveKeys(accountId: string): string;
  /** Money records of one account (hash tag `{accountId}`: one Cluster slot per account). */
  gate(accountId: string): string;
  wallet(accountId: string): string;
  credits(accountId: string): string;
  keySpend(accountId: string, keyId: string): string;
  keyUse(accountId: string, keyId: string): string;
  usageRequest(accountId: string, requestId: string): string;
  usageLog(accountId: string): string;
  usageAccounts(): string;
  /** Usage-log entries the cap dropped before the ledger acknowledged them (a counter; src/ledger). */
  usageDropped(accountId: string): string;
  /** Booked token counters of a key (`keyId` given) or of the account. */
  tokens(accountId: string, keyId?: string): string;
  /** The price table (one hash; tracked, so the sidecar's cached copy is invalidated). */
  prices(): string;
  /** The key list index of one account (hash tag `{accountId}`): written by the key scripts. */
  keyOrder(accountId: string): string;
  keyCurrent(accountId: string): string;
  keyInfo(accountId: string): string;
  /** A key's daily usage (UTC days), written by the usage-record script. */
  keyDays(accountId: string, keyId: string): string;
  /** The live sidecars' settings (src/store/sidecar-settings.ts), read by the console. */
  sidecars(): string;
  /** A provider object keygate saw an account create (SPEC 15 `owned`; `src/schema/owned.ts`); tracked. */
  owned(provider: string, objectId: string): string;
  /** The account's own upstream credentials (SPEC 18; hash tag `{accountId}`); tracked. */
  credentials(accountId: string): string;
}

export function schema(namespace: string = DEFAULT_NAMESPACE): Schema {
  if (!NAMESPACE_PATTERN.test(namespace)) throw new Error(`invalid Redis namespace ${JSON.stringify(namespace)}`);
  const base = `${namespace}:v${SCHEMA_VERSION}:`;
  const keyPrefix = `${base}key:`;
  const acctPrefix = `${base}acct:`;
  const gatePrefix = `${base}gate:`;
  return {
    ns: namespace,
    trackedPrefixes: [keyPrefix, acctPrefix, gatePrefix, `${base}prices`, `${base}owned:`, `${base}cred:`],
    datasetMarker: `${base}dataset`,
    keyRecord: (digest) => keyPrefix + digest,
    keyIdIndex: (keyId) => `${base}keyid:${keyId}`,
    account: (accountId) => acctPrefix + accountId,
    accountKeys: (accountId) => `${base}acctkeys:${accountId}`,
    accountActiveKeys: (accountId) => `${base}acctactive:${accountId}`,
    gate: (a) => `${gatePrefix}{${a}}`,
    wallet: (a) => `${base}wallet:{${a}}`,
    credits: (a) => `${base}credits:{${a}}`,
    keySpend: (a, keyId) => `${base}spend:{${a}}:${keyId}`,
    keyUse: (a, keyId) => `${base}keyuse:{${a}}:${keyId}`,
    usageRequest: (a, requestId) => `${base}usagereq:{${a}}:${requestId}`,
    usageLog: (a) => `${base}usage:{${a}}`,
    usageAccounts: () => `${base}usageaccts`,
    usageDropped: (a) => `${base}usagedrop:{${a}}`,
    tokens: (a, keyId) => (keyId === undefined ? `${base}tokens:{${a}}` : `${base}tokens:{${a}}:${keyId}`),
    prices: () => `${base}prices`,
    keyOrder: (a) => `${base}keyorder:{${a}}`,
    keyCurrent: (a) => `${base}keycur:{${a}}`,
    keyInfo: (a) => `${base}keyinfo:{${a}}`,
    keyDays: (a, keyId) => `${base}keydays:{${a}}:${keyId}`,
    sidecars: () => `${base}sidecars`,
    owned: (provider, objectId) => `${base}owned:${provider}:${objectId}`,
    credentials: (a) => `${base}cred:{${a}}`,
  };
}

const epochMs = z
  .string()
  .regex(/^\d{1,16}$/)
  .transform(Number);

const sidecarRecord = z.object({
  v: z.literal(SCHEMA_VERSION),
  id: z.string().regex(KEY_ID_PATTERN),
  account: z.string().regex(ACCOUNT_ID_PATTERN),
  status: z.enum(['active', 'revoked']),
  models: z.string().max(65536).nullable(),
  expires_at: epochMs.nullable(),
});

const modelList = z.array(z.string().min(1).max(256)).max(1000);

/** The `models` field: a JSON array of patterns. Decodes to the list, or a string naming the problem. */
export function decodeModels(text: string): string[] | { readonly corrupt: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { corrupt: 'models: not JSON' };
  }
  const m = modelList.safeParse(parsed);
  return m.success ? m.data : { corrupt: 'models: not an array of model patterns' };
}

export function encodeModels(models: readonly string[]): string {
  return JSON.stringify(models);
}

/** A new key record, as written (the console's scripts add `created_at`, `updated_at` and `rev` from the store's clock). */
export interface NewKeyRecord {
  readonly id: string;
  readonly account: string;
  readonly name: string;
  readonly status?: KeyStatus;
  readonly models: readonly string[] | null;
  readonly expiresAt: number | null;
  readonly hint?: string;
  /** The reveal envelope (`src/keys/crypto.ts`). */
  readonly secret?: string;
  /** Written by seeding that bypasses the console's scripts. */
  readonly createdAt?: number;
  readonly updatedAt?: number;
}

/** A key record as a flat field/value list (HSET arguments); absent optional fields are not written. */
export function encodeKeyRecord(r: NewKeyRecord): string[] {
  const out: string[] = [
    KeyField.version, SCHEMA_VERSION,
    KeyField.id, r.id,
    KeyField.account, r.account,
    KeyField.name, r.name,
    KeyField.status, r.status ?? 'active',
  ];
  if (r.hint !== undefined) out.push(KeyField.hint, r.hint);
  if (r.secret !== undefined) out.push(KeyField.secret, r.secret);
  if (r.models !== null) out.push(KeyField.models, encodeModels(r.models));
  if (r.expiresAt !== null) out.push(KeyField.expiresAt, String(r.expiresAt));
  if (r.createdAt !== undefined) out.push(KeyField.createdAt, String(r.createdAt));
  if (r.updatedAt !== undefined) out.push(KeyField.updatedAt, String(r.updatedAt));
  return out;
}

const ABSENT: ParsedKey = { kind: 'absent' };

const STATUS_AT = SIDECAR_KEY_FIELDS.indexOf(KeyField.status);

/**
 * Parses an HMGET of SIDECAR_KEY_FIELDS. A record that does not follow the schema is `corrupt`
 * (the caller denies it as an invalid key and logs it once) — never a grant.
 * The status is looked at first: a revoked record is absent without reading any other field (its
 * model list can be large), so a revoked key and a never-issued one cost the same work.
 */
export function parseSidecarKey(values: readonly (string | null)[]): ParsedKey {
  const status = values[STATUS_AT];
  if (status === 'revoked') return ABSENT;
  if (status === null && values.every((v) => v === null)) return ABSENT;
  const r = sidecarRecord.safeParse({
    v: values[0] ?? undefined,
    id: values[1] ?? undefined,
    account: values[2] ?? undefined,
    status: values[3] ?? undefined,
    models: values[4] ?? null,
    expires_at: values[5] ?? null,
  });
  if (!r.success) {
    return { kind: 'corrupt', reason: r.error.issues.map((i) => `${i.path.join('.') || 'record'}: ${i.message}`).join('; ') };
  }
  let models: string[] | null = null;
  if (r.data.models !== null) {
    const m = decodeModels(r.data.models);
    if (!Array.isArray(m)) return { kind: 'corrupt', reason: m.corrupt };
    models = m;
  }
  return {
    kind: 'grant',
    grant: { id: r.data.id, account: r.data.account, models, expiresAt: r.data.expires_at },
  };
}

/** An account is blocked only when its record says so; a missing record is an enabled account. */
export function parseAccountBlocked(status: string | null): boolean | 'corrupt' {
  if (status === null || status === 'active') return false;
  if (status === 'disabled') return true;
  return 'corrupt';
}

/** A key record as the console sees it (never the plaintext, never the envelope). */
export interface KeyRecord {
  readonly id: string;
  readonly account: string;
  readonly name: string;
  readonly status: KeyStatus;
  /** Lower-case patterns; null = every model. */
  readonly models: readonly string[] | null;
  readonly expiresAt: number | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly revokedAt: number | null;
  readonly hint: string;
  readonly rev: number;
  /** True when the reveal envelope is present (false after revoke). */
  readonly revealable: boolean;
  /** The key's request and token rates (`NO_RATES` when none). */
  readonly rates: Rates;
}

const consoleRecord = z.object({
  v: z.literal(SCHEMA_VERSION),
  id: z.string().regex(KEY_ID_PATTERN),
  account: z.string().regex(ACCOUNT_ID_PATTERN),
  name: z.string().max(4 * LIMITS.nameMaxChars),
  status: z.enum(['active', 'revoked']),
  models: z.string().max(65536).optional(),
  revoked_models: z.string().max(65536).optional(),
  expires_at: epochMs.optional(),
  created_at: epochMs,
  updated_at: epochMs,
  revoked_at: epochMs.optional(),
  hint: z.string().max(64).default(''),
  rev: z.string().regex(/^\d{1,15}$/).transform(Number).default(0),
  secret: z.string().optional(),
});

/** Parses an HGETALL of a key record for the console; a string naming the problem when it is corrupt, null when absent. */
export function parseKeyRecord(hash: Record<string, string>): KeyRecord | null | string {
  if (Object.keys(hash).length === 0) return null;
  const r = consoleRecord.safeParse(hash);
  if (!r.success) return r.error.issues.map((i) => `${i.path.join('.') || 'record'}: ${i.message}`).join('; ');
  const d = r.data;
  let models: string[] | null = null;
  // A revoked key's list is in `revoked_models` (records revoked before revision 3 keep it in `models`).
  const modelsText = d.status === 'revoked' ? (d.revoked_models ?? d.models) : d.models;
  if (modelsText !== undefined) {
    const m = decodeModels(modelsText);
    if (!Array.isArray(m)) return m.corrupt;
    models = m;
  }
  const rates = parseRateFields(hash.rate, hash.token_rate);
  if (typeof rates === 'string') return rates;
  return {
    id: d.id,
    account: d.account,
    name: d.name,
    status: d.status,
    models,
    expiresAt: d.expires_at ?? null,
    createdAt: d.created_at,
    updatedAt: d.updated_at,
    revokedAt: d.revoked_at ?? null,
    hint: d.hint,
    rev: d.rev,
    revealable: d.secret !== undefined,
    rates,
  };
}

/**
 * The key list index (`keyinfo:{acct}`): one field per key id, a JSON array of strings
 * `[rev, created_at, expires_at ('' = never), 'a' | 'r' (active | revoked), hint, name]`, written
 * only when the record's `rev` is newer than the one held. The field `~built` marks an index built
 * from the records (its value: how many ids of `acctkeys` had no record then).
 */
export const KEY_INFO_BUILT = '~built';

export interface KeyInfo {
  readonly id: string;
  readonly rev: number;
  readonly createdAt: number;
  readonly expiresAt: number | null;
  readonly status: KeyStatus;
  readonly hint: string;
  readonly name: string;
}

const DIGITS = /^\d{1,16}$/;

/** Decodes one `keyinfo` field; a string naming the problem when it does not follow the schema. (Hand-checked: a search reads one per key.) */
export function parseKeyInfo(id: string, value: string): KeyInfo | string {
  let v: unknown;
  try {
    v = JSON.parse(value);
  } catch {
    return `keyinfo ${id}: not JSON`;
  }
  const bad = `keyinfo ${id}: not [rev, created_at, expires_at, status, hint, name]`;
  if (!Array.isArray(v) || v.length !== 6 || !v.every((x) => typeof x === 'string')) return bad;
  const [rev, created, expires, st, hint, name] = v as string[];
  if (!DIGITS.test(rev!) || !DIGITS.test(created!) || (expires !== '' && !DIGITS.test(expires!)) || (st !== 'a' && st !== 'r')) return bad;
  if (hint!.length > 64 || name!.length > 4 * LIMITS.nameMaxChars) return bad;
  return { id, rev: Number(rev), createdAt: Number(created), expiresAt: expires === '' ? null : Number(expires), status: st === 'r' ? 'revoked' : 'active', hint: hint!, name: name! };
}

/**
 * A key's daily usage (`keydays:{acct}:{keyId}`): one field per UTC day (days since 1970-01-01),
 * the value `amount_micros requests input_tokens output_tokens` (decimal integers, space-separated);
 * days older than `KEY_DAYS_KEPT` are dropped when a new day starts, and the hash expires
 * `KEY_DAYS_KEPT` days after its last write.
 */
export const KEY_DAYS_KEPT = 35;
