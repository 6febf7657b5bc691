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
 *   {ns}:v1:{mgmt}:members:{account}        HASH    the account's members (src/console/members.ts): m:{id} → JSON, e:{email} / s:{subject} → id
 *   {ns}:v1:{mgmt}:memberof:{e|s}:{value}   SET     the accounts an email or a subject is a member of
 *   {ns}:v1:{mgmt}:keyby:{account}          HASH    key id → JSON {iss, sub} of the person who created it (a developer's own keys)
 *   {ns}:v1:{mgmt}:oidcflow:{sha256hex}     STRING  a sign-in in progress (state, nonce, PKCE verifier; 10 minutes, read once)
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
  /** A person's session (OpenID Connect): JSON {iss, sub, email, name}; absent for a token's session. */
  user: 'user',
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
  /** The account's members and their email and subject indexes. */
  members(account: string): string;
  /** The accounts an email (`e`) or a subject (`s`) is a member of. */
  memberOf(kind: 'e' | 's', value: string): string;
  /** Who (a person) created each key of the account. */
  keyCreators(account: string): string;
  /** A sign-in in progress, by the digest of its browser-bound flow id. */
  oidcFlow(digest: string): string;
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
    members: (a) => `${base}members:${a}`,
    memberOf: (k, v) => `${base}memberof:${k}:${v}`,
    keyCreators: (a) => `${base}keyby:${a}`,
    oidcFlow: (d) => `${base}oidcflow:${d}`,
  };
}
