/**
 * The management records in Redis (docs/redis-schema.md, "Management records"): management tokens,
 * the audit log, idempotency slots and the web page's sessions. They share the hash tag `{mgmt}`:
 * one slot on Redis Cluster, so their scripts run there too.
 *
 *   {ns}:v1:{mgmt}:mtoken:{sha256hex}       HASH    a management token (TokenField), found by the digest of the token
 *   {ns}:v1:{mgmt}:mtokenid:{tokenId}       STRING  → sha256hex
 *   {ns}:v1:{mgmt}:mtokens                  SET     every token id
 *   {ns}:v1:{mgmt}:audit                    LIST    audit events (JSON), newest first
 *   {ns}:v1:{mgmt}:auditacct:{account|*}    LIST    the account's audit events (`*`: events of no account)
 *   {ns}:v1:{mgmt}:idem:{actor}:{sha256}    STRING  an idempotent creation's fingerprint and result (IdempotencyField)
 *   {ns}:v1:{mgmt}:websession:{sha256hex}   HASH    a web page session (SessionField)
 */
import { SCHEMA_VERSION } from './redis-schema.ts';

/** Fields of a management token record. */
export const TokenField = {
  version: 'v',
  id: 'id',
  name: 'name',
  /** The account id, or `*` for every account. */
  scope: 'scope',
  status: 'status',
  hint: 'hint',
  createdAt: 'created_at',
  revokedAt: 'revoked_at',
} as const;

/** The `scope` of an all-accounts token, and the audit list of events of no account. */
export const ALL_ACCOUNTS = '*';

/** Fields of an idempotency slot's JSON: the request's fingerprint digest and the key it created (null: in progress). */
export const IdempotencyField = { fingerprint: 'f', keyId: 'key_id' } as const;

/** Fields of a web session record. */
export const SessionField = {
  tokenId: 'token_id',
  account: 'account',
  tokenName: 'token_name',
  csrf: 'csrf',
  createdAt: 'created_at',
  expiresAt: 'expires_at',
} as const;

export interface ManagementSchema {
  token(digest: string): string;
  tokenIdIndex(tokenId: string): string;
  tokens(): string;
  audit(): string;
  /** The account's audit list; `null`: events of no account. */
  auditOfAccount(account: string | null): string;
  idempotency(actor: string, digest: string): string;
  /** The prefix of web session keys (the session id's digest follows). */
  sessionPrefix(): string;
}

export function managementSchema(ns: string): ManagementSchema {
  const base = `${ns}:v${SCHEMA_VERSION}:{mgmt}:`;
  return {
    token: (d) => `${base}mtoken:${d}`,
    tokenIdIndex: (id) => `${base}mtokenid:${id}`,
    tokens: () => `${base}mtokens`,
    audit: () => `${base}audit`,
    auditOfAccount: (a) => `${base}auditacct:${a ?? ALL_ACCOUNTS}`,
    idempotency: (actor, d) => `${base}idem:${actor}:${d}`,
    sessionPrefix: () => `${base}websession:`,
  };
}
