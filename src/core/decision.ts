/**
 * The decision core (SPEC §1): pure phase functions, each returning a deny or null, composed in
 * the contract's order. The authorizer calls the same phases around its store lookups; `decide`
 * composes them over facts already gathered, for exhaustive tests.
 */
import { DENY_STATUS, type DenyCode } from './codes.ts';
import type { Credential } from './credentials.ts';
import type { Family } from './family.ts';
import { modelAllowed, qualifyModel, type ModelRead } from './model/index.ts';
import type { KeyGrant, ParsedKey } from '../schema/redis-schema.ts';

export interface Allow {
  readonly allow: true;
  readonly keyId: string;
  readonly accountId: string;
  /** The resolved model (provider-qualified, lower-case, as matched) when it was read (restricted keys), else null. */
  readonly model: string | null;
}

export interface Deny {
  readonly allow: false;
  readonly code: DenyCode;
  readonly status: number;
  /** Safe extra text for the message (never key material). */
  readonly detail?: string;
  /** For logs: the key id once known. */
  readonly keyId?: string;
}

export type Decision = Allow | Deny;

const DENIES = new Map<DenyCode, Deny>();
/** A deny without detail; shared frozen instances, no allocation on the hot path. */
export function deny(code: DenyCode, detail?: string, keyId?: string): Deny {
  if (detail === undefined && keyId === undefined) {
    let d = DENIES.get(code);
    if (d === undefined) {
      d = Object.freeze({ allow: false, code, status: DENY_STATUS[code] });
      DENIES.set(code, d);
    }
    return d;
  }
  return { allow: false, code, status: DENY_STATUS[code], detail, keyId };
}

/** Rows 1-3 (header part): missing, ambiguous, non-Bearer scheme, malformed key. */
export function credentialDeny(cred: Credential, wellFormed: boolean): Deny | null {
  switch (cred.kind) {
    case 'missing':
      return deny('API_KEY_REQUIRED');
    case 'ambiguous':
      return deny('AMBIGUOUS_API_KEY');
    case 'bad-scheme':
      return deny('INVALID_API_KEY', 'The Authorization header must use the Bearer scheme.');
    case 'key':
      return wellFormed ? null : deny('INVALID_API_KEY');
  }
}

/** Rows 3-4 (store part): unknown, revoked or corrupt → invalid; expiry instant inclusive. */
export function keyDeny(parsed: ParsedKey, nowMs: number): Deny | null {
  if (parsed.kind !== 'grant') return deny('INVALID_API_KEY');
  const { expiresAt, id } = parsed.grant;
  if (expiresAt !== null && nowMs >= expiresAt) return deny('API_KEY_EXPIRED', undefined, id);
  return null;
}

/** Row 5. A corrupt account record is a store fault: fail closed with 503. */
export function accountDeny(blocked: boolean | 'corrupt', keyId: string): Deny | null {
  if (blocked === false) return null;
  if (blocked === 'corrupt') return deny('AUTH_UNAVAILABLE', undefined, keyId);
  return deny('USER_BLOCKED', undefined, keyId);
}

const MAX_ECHOED_MODEL = 128;
function quoteModel(model: string): string {
  const shown = model.length > MAX_ECHOED_MODEL ? `${model.slice(0, MAX_ECHOED_MODEL)}…` : model;
  return JSON.stringify(shown);
}

/** Row 6. Only a restricted key needs the model; it passes only when the model is provably allowed. */
export function modelDeny(grant: KeyGrant, read: () => ModelRead, family: Family): Deny | { model: string | null } {
  if (grant.models === null) return { model: null };
  const r = read();
  if (r.kind === 'uncertain') {
    return deny('MODEL_NOT_ALLOWED', `This key is limited to certain models and ${r.reason}.`, grant.id);
  }
  if (!modelAllowed(grant.models, r.model, family)) {
    return deny('MODEL_NOT_ALLOWED', `The model ${quoteModel(r.model)} is not among this key's allowed models.`, grant.id);
  }
  return { model: qualifyModel(r.model, family) };
}

export function allow(grant: KeyGrant, model: string | null): Allow {
  return { allow: true, keyId: grant.id, accountId: grant.account, model };
}

/** Facts about one request, as gathered; `'unavailable'` marks a store lookup that failed. */
export interface Facts {
  readonly credential: Credential;
  readonly wellFormed: boolean;
  readonly key?: ParsedKey | 'unavailable';
  readonly accountBlocked?: boolean | 'corrupt' | 'unavailable';
  readonly family: Family;
  readonly model: () => ModelRead;
  readonly nowMs: number;
}

/** The whole decision over gathered facts, in contract order (row 7 wherever a needed fact is missing). */
export function decide(f: Facts): Decision {
  const c = credentialDeny(f.credential, f.wellFormed);
  if (c) return c;
  if (f.key === undefined || f.key === 'unavailable') return deny('AUTH_UNAVAILABLE');
  const k = keyDeny(f.key, f.nowMs);
  if (k) return k;
  const grant = (f.key as Extract<ParsedKey, { kind: 'grant' }>).grant;
  if (f.accountBlocked === undefined || f.accountBlocked === 'unavailable') return deny('AUTH_UNAVAILABLE', undefined, grant.id);
  const a = accountDeny(f.accountBlocked, grant.id);
  if (a) return a;
  const m = modelDeny(grant, f.model, f.family);
  if ('allow' in m) return m;
  return allow(grant, m.model);
}
