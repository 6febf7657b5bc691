/**
 * The decision core: pure rule functions, each returning a deny or null. The decision phases
 * (`src/pipeline/phases/`) apply them in the decision order (README "What it does").
 */
import { DENY_STATUS, type DenyCode } from './codes.ts';
import type { Credential } from './credentials.ts';
import type { Family } from './families/index.ts';
import { modelAllowed, qualifyModel, type ModelRead } from './model/index.ts';
import type { Rate } from './rate-text.ts';
import type { UpstreamCredential } from './upstream-credential.ts';
import type { KeyGrant, ParsedKey } from './key-grant.ts';

export interface Allow {
  readonly allow: true;
  readonly keyId: string;
  readonly accountId: string;
  /** The resolved model (provider-qualified, lower-case, as matched) when it was read (restricted keys), else null. */
  readonly model: string | null;
  /**
   * A key or account with rates: the `x-ratelimit-*` headers for the client and the request rate for
   * the metadata (`total_limit`); they change with every request. null (no rates): the allow is the
   * same for every request of the key.
   */
  readonly rate?: AllowRate | null;
  /**
   * The account's own credential for the request's provider (SPEC 18): the header the answer sets
   * upstream in place of the gateway's. Absent: the gateway's own credential applies. Never logged.
   */
  readonly upstream?: UpstreamCredential;
}

/** What an allow of a rate-limited key adds to its answer (docs/rate-limits.md). */
export interface AllowRate {
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** The request rate for `total_limit` in the dynamic metadata (the key's, else the account's), or null. */
  readonly limit: Rate | null;
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
  /** An endpoint-rule refusal (ENDPOINT_NOT_ALLOWED, USAGE_NOT_GUARANTEED): which class refused, for metrics and the key's counts. */
  readonly refusal?: 'unknown' | 'stateful' | 'unbillable' | 'owned' | 'unreadable';
  /** A rate refusal (429): the wait in ms until a window admits the request (`retry-after`, `retry-after-ms`). */
  readonly retryAfterMs?: number;
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

/** Rows 1-3 (header part): missing, ambiguous, non-Bearer scheme (a malformed key is the `format` phase's). */
export function credentialDeny(cred: Credential): Deny | null {
  switch (cred.kind) {
    case 'missing':
      return deny('API_KEY_REQUIRED');
    case 'ambiguous':
      return deny('AMBIGUOUS_API_KEY');
    case 'bad-scheme':
      return deny('INVALID_API_KEY', 'The Authorization header must use the Bearer scheme.');
    case 'key':
      return null;
  }
}

/** Row 3 (store part): unknown, revoked or corrupt → invalid. */
export function keyRecordDeny(parsed: ParsedKey): Deny | null {
  return parsed.kind === 'grant' ? null : deny('INVALID_API_KEY');
}

/** Row 4: the expiry instant is inclusive. */
export function expiryDeny(grant: KeyGrant, nowMs: number): Deny | null {
  const { expiresAt, id } = grant;
  return expiresAt !== null && nowMs >= expiresAt ? deny('API_KEY_EXPIRED', undefined, id) : null;
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

/** Row 8, for a restricted key (`grant.models` not null): it passes only when the model read is provably allowed. */
export function modelDeny(keyId: string, models: readonly string[], r: ModelRead, family: Family): Deny | { model: string } {
  if (r.kind === 'uncertain') {
    const g = r.gatewayCannotCheck;
    if (g !== undefined) {
      return { allow: false, code: 'MODEL_NOT_ALLOWED', status: DENY_STATUS.MODEL_NOT_ALLOWED, keyId, message: g.message, gatewayProblem: g.log };
    }
    return deny('MODEL_NOT_ALLOWED', `This key is limited to certain models and ${r.reason}.`, keyId);
  }
  if (modelAllowed(models, r.model, family)) return { model: qualifyModel(r.model, family) };
  if (r.alias !== undefined && modelAllowed(models, r.alias, family)) return { model: r.alias.toLowerCase() };
  // The whole message: what was asked, what the key accepts, what to do (the generic text would repeat the first part).
  return { allow: false, code: 'MODEL_NOT_ALLOWED', status: DENY_STATUS.MODEL_NOT_ALLOWED, keyId, message: modelNotAllowedMessage(models, r.model) };
}

const MAX_LISTED_MODELS = 10;

/** Which names the key accepts, and for a bare name that the key lists with a provider, the name to send. */
function modelNotAllowedMessage(models: readonly string[], model: string): string {
  const listed = models.slice(0, MAX_LISTED_MODELS).map((m) => quoteModel(m)).join(', ');
  const more = models.length > MAX_LISTED_MODELS ? ` and ${models.length - MAX_LISTED_MODELS} more` : '';
  let msg = `The model ${quoteModel(model)} is not among this key's allowed models; it accepts ${listed}${more}.`;
  const lower = model.toLowerCase();
  const qualified = lower.includes('/') ? undefined : models.find((m) => m.toLowerCase().endsWith(`/${lower}`));
  if (qualified !== undefined) msg += ` A name without a provider is not read as ${quoteModel(qualified)} here: send ${quoteModel(qualified)}.`;
  return `${msg} To use another model, change the key's allowed models in the console.`;
}

/**
 * The allow of a grant without a model read or a rate, one object per grant (frozen): a cached key's
 * allow allocates nothing, and a transport may keep the allow's encoded answer by its identity
 * (`CheckAnswers`). Dropped with the grant (a changed record is a new grant).
 */
const plainAllows = new WeakMap<KeyGrant, Allow>();

/** Plain allows that carry an account's own credential: one per (credential version, grant), dropped with either. */
const credentialAllows = new WeakMap<UpstreamCredential, WeakMap<KeyGrant, Allow>>();

export function allow(grant: KeyGrant, model: string | null, rate: AllowRate | null = null, upstream: UpstreamCredential | null = null): Allow {
  if (upstream !== null) {
    if (rate !== null || model !== null) return { allow: true, keyId: grant.id, accountId: grant.account, model, ...(rate !== null && { rate }), upstream };
    let byGrant = credentialAllows.get(upstream);
    if (byGrant === undefined) credentialAllows.set(upstream, (byGrant = new WeakMap()));
    let a = byGrant.get(grant);
    if (a === undefined) {
      a = Object.freeze({ allow: true, keyId: grant.id, accountId: grant.account, model: null, upstream });
      byGrant.set(grant, a);
    }
    return a;
  }
  if (rate === null && model === null) {
    let a = plainAllows.get(grant);
    if (a === undefined) {
      a = Object.freeze({ allow: true, keyId: grant.id, accountId: grant.account, model: null });
      plainAllows.set(grant, a);
    }
    return a;
  }
  if (rate === null) return { allow: true, keyId: grant.id, accountId: grant.account, model };
  return { allow: true, keyId: grant.id, accountId: grant.account, model, rate };
}
