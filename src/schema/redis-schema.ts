/**
 * The Redis data contract, version 1 — the single definition used by the sidecar (reads) and the
 * console library (writes). `docs/redis-schema.md` is the prose form of this file; change both together.
 *
 *   {ns}:v1:key:{sha256hex}       HASH  the key record, found by the digest of the plaintext key
 *   {ns}:v1:keyid:{keyId}         STRING  → sha256hex (console index: key id → record)
 *   {ns}:v1:acct:{accountId}      HASH  account state (absent = enabled)
 *   {ns}:v1:acctkeys:{accountId}  SET   key ids of the account, active and revoked (console index)
 *   {ns}:v1:acctactive:{accountId} SET  key ids of the account's active keys (console: the per-account limit)
 *
 * The sidecar reads only `key:` and `acct:` records (one key each), so it works unchanged on Cluster;
 * invalidation tracks exactly those two prefixes.
 */
import { z } from 'zod';

export const SCHEMA_VERSION = '1';
export const DEFAULT_NAMESPACE = 'kg';
export const NAMESPACE_PATTERN = /^[A-Za-z0-9_.-]{1,32}$/;

export const KEY_ID_PATTERN = /^key_[0-9A-Za-z]{16,32}$/;
export const ACCOUNT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

/** Field names of the key record hash. */
export const KeyField = {
  version: 'v',
  id: 'id',
  account: 'account',
  name: 'name',
  status: 'status',
  models: 'models',
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
} as const;

/** Limits the console enforces (docs/redis-schema.md §Limits). The sidecar accepts up to 1000 models. */
export const LIMITS = {
  nameMaxChars: 128,
  activeKeysPerAccount: 100,
  modelsPerKey: 100,
  modelPatternMaxChars: 256,
} as const;

/** The fields the sidecar reads, in HMGET order. */
export const SIDECAR_KEY_FIELDS = [
  KeyField.version,
  KeyField.id,
  KeyField.account,
  KeyField.status,
  KeyField.models,
  KeyField.expiresAt,
] as const;

export const AccountField = { status: 'status', updatedAt: 'updated_at' } as const;

export type KeyStatus = 'active' | 'revoked';
export type AccountStatus = 'active' | 'disabled';

export interface Schema {
  readonly ns: string;
  /** Prefixes the sidecar's cache is invalidated on (CLIENT TRACKING BCAST PREFIX). */
  readonly trackedPrefixes: readonly [string, string];
  keyRecord(digest: string): string;
  keyIdIndex(keyId: string): string;
  account(accountId: string): string;
  accountKeys(accountId: string): string;
  accountActiveKeys(accountId: string): string;
}

export function schema(namespace: string = DEFAULT_NAMESPACE): Schema {
  if (!NAMESPACE_PATTERN.test(namespace)) throw new Error(`invalid Redis namespace ${JSON.stringify(namespace)}`);
  const base = `${namespace}:v${SCHEMA_VERSION}:`;
  const keyPrefix = `${base}key:`;
  const acctPrefix = `${base}acct:`;
  return {
    ns: namespace,
    trackedPrefixes: [keyPrefix, acctPrefix],
    keyRecord: (digest) => keyPrefix + digest,
    keyIdIndex: (keyId) => `${base}keyid:${keyId}`,
    account: (accountId) => acctPrefix + accountId,
    accountKeys: (accountId) => `${base}acctkeys:${accountId}`,
    accountActiveKeys: (accountId) => `${base}acctactive:${accountId}`,
  };
}

/** What the sidecar needs of a key. `models: null` = every model; `expiresAt: null` = never. */
export interface KeyGrant {
  readonly id: string;
  readonly account: string;
  readonly models: readonly string[] | null;
  readonly expiresAt: number | null;
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

export type ParsedKey =
  | { readonly kind: 'absent' } // no record, or revoked: indistinguishable by design
  | { readonly kind: 'grant'; readonly grant: KeyGrant }
  | { readonly kind: 'corrupt'; readonly reason: string };

const ABSENT: ParsedKey = { kind: 'absent' };

/**
 * Parses an HMGET of SIDECAR_KEY_FIELDS. A record that does not follow the schema is `corrupt`
 * (the caller denies it as an invalid key and logs it once) — never a grant.
 */
export function parseSidecarKey(values: readonly (string | null)[]): ParsedKey {
  if (values.every((v) => v === null)) return ABSENT;
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
  if (r.data.status === 'revoked') return ABSENT;
  let models: string[] | null = null;
  if (r.data.models !== null) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(r.data.models);
    } catch {
      return { kind: 'corrupt', reason: 'models: not JSON' };
    }
    const m = modelList.safeParse(parsed);
    if (!m.success) return { kind: 'corrupt', reason: 'models: not an array of model patterns' };
    models = m.data;
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
}

const consoleRecord = z.object({
  v: z.literal(SCHEMA_VERSION),
  id: z.string().regex(KEY_ID_PATTERN),
  account: z.string().regex(ACCOUNT_ID_PATTERN),
  name: z.string().max(4 * LIMITS.nameMaxChars),
  status: z.enum(['active', 'revoked']),
  models: z.string().max(65536).optional(),
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
  if (d.models !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(d.models);
    } catch {
      return 'models: not JSON';
    }
    const m = modelList.safeParse(parsed);
    if (!m.success) return 'models: not an array of model patterns';
    models = m.data;
  }
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
  };
}
