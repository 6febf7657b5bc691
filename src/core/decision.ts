/**
 * The decision core: pure phase functions, each returning a deny or null. They are composed in the
 * decision order (README "What it does") in one place only, the authorizer (`src/authorizer.ts`), around its store lookups.
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
  /** The whole client message, replacing the code's (the gateway is at fault, not the client). */
  readonly message?: string;
  /** A gateway configuration problem behind this deny, for the operator's log (rate-limited). */
  readonly gatewayProblem?: string;
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

/** Row 8. Only a restricted key needs the model; it passes only when the model is provably allowed. */
export function modelDeny(grant: KeyGrant, read: () => ModelRead, family: Family): Deny | { model: string | null } {
  if (grant.models === null) return { model: null };
  const r = read();
  if (r.kind === 'uncertain') {
    const g = r.gatewayCannotCheck;
    if (g !== undefined) {
      return { allow: false, code: 'MODEL_NOT_ALLOWED', status: DENY_STATUS.MODEL_NOT_ALLOWED, keyId: grant.id, message: g.message, gatewayProblem: g.log };
    }
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
