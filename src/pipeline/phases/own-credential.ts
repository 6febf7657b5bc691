/**
 * 5a. The account's own upstream credential for the request's provider (SPEC 18, docs/credentials.md),
 * right after `account`. An account whose record lists no credential for this provider (the
 * `credentials` field, read with its status: `d.accountCredentials`) passes at once: no lookup, no
 * allocation. Otherwise the credential record is read through the record lookup (cached and
 * invalidated like every record, so a change or a removal is seen on the next request) and the
 * provider's envelope opened once per record version: the plaintext lives only in this memo, which
 * is dropped with the cached record. Sets `upstream` (the header the allow sets; null: none of its own).
 *
 * Fail closed: an account that has its own credential for the provider is never sent upstream with
 * the gateway's instead. A sidecar without `KEYGATE_CREDENTIAL_KEY`, or an envelope that does not open
 * under it, answers 503 AUTH_UNAVAILABLE and names the problem in the operator's log (never the secret).
 */
import { deny, type Deny } from '../../core/decision.ts';
import { DENY_STATUS } from '../../core/codes.ts';
import { FAMILIES, type Family } from '../../core/families/index.ts';
import { PROVIDER_BIT, upstreamCredential, type CredentialHeaders, type UpstreamCredential } from '../../core/upstream-credential.ts';
import type { Keyring } from '../../keys/crypto.ts';
import { openCredential } from '../../keys/credential-crypto.ts';
import { CREDENTIAL_RECORD, type StoredCredentials } from '../../schema/records.ts';
import { isPending } from '../../store/record-source.ts';
import type { DecisionState, Phase, PhaseAnswer } from '../phase.ts';

export interface OwnCredentialDeps {
  /** The keyring of `KEYGATE_CREDENTIAL_KEY`; null when this sidecar has none (it then never injects). */
  readonly ring: Keyring | null;
  /** The header each provider's credential is set in (`KEYGATE_CREDENTIAL_HEADERS`). */
  readonly headers: CredentialHeaders;
  /** `KEYGATE_REQUIRE_OWN_CREDENTIAL`: an account without one for the provider is refused (`requireOwnCredential`). */
  readonly requireOwn?: boolean;
}

/** What one provider's envelope of one record version opened to: the header, no credential, or why it cannot be used. */
type Opened = UpstreamCredential | null | { readonly problem: string };

const UNUSABLE_MESSAGE =
  "The gateway cannot use this account's own upstream credential for this provider right now. Retry shortly; if it persists, contact the gateway's operator.";

export function ownCredential(deps: OwnCredentialDeps): Phase {
  /** Per record version (the cached object): what each provider's envelope opened to. Dropped with the record. */
  const opened = new WeakMap<StoredCredentials, Opened[]>();

  const found = (d: DecisionState, rec: StoredCredentials): PhaseAnswer => {
    const i = FAMILIES.indexOf(d.family);
    let memo = opened.get(rec);
    if (memo === undefined) opened.set(rec, (memo = []));
    let o = memo[i];
    if (o === undefined) memo[i] = o = open(deps, d.grant!.account, d.family, rec.envelopes[i] ?? null);
    if (o === null) return null; // listed on the account, gone from the record (a removal under way): none
    if ('problem' in o) return unusable(o.problem, d.grant!.id);
    d.upstream = o;
    return null;
  };

  return {
    name: 'own-credential',
    run: (d) => {
      if ((d.accountCredentials & PROVIDER_BIT[d.family]) === 0) return null;
      const rec = d.env.records.lookup(CREDENTIAL_RECORD, d.grant!.account);
      return isPending(rec) ? rec.then((r) => found(d, r)) : found(d, rec);
    },
  };
}

function open(deps: OwnCredentialDeps, account: string, family: Family, envelope: string | null): Opened {
  if (envelope === null) return null;
  if (deps.ring === null) return { problem: `an account has its own ${family} credential, but this sidecar has no KEYGATE_CREDENTIAL_KEY: its requests are refused (503) until the key is set` };
  try {
    return upstreamCredential(deps.headers[family], openCredential(deps.ring, account, family, envelope));
  } catch (err) {
    // RevealKeyError messages name the kid and the variable, never the plaintext.
    return { problem: `an account's own ${family} credential cannot be opened: ${(err as Error).message}` };
  }
}

function unusable(problem: string, keyId: string): Deny {
  return { allow: false, code: 'AUTH_UNAVAILABLE', status: DENY_STATUS.AUTH_UNAVAILABLE, keyId, message: UNUSABLE_MESSAGE, gatewayProblem: problem };
}

/**
 * `KEYGATE_REQUIRE_OWN_CREDENTIAL=true`: an account without its own credential for the request's
 * provider is refused, 403 ENDPOINT_NOT_ALLOWED (the endpoint rule's slot, after the money rules).
 */
export const requireOwnCredential: Phase = {
  name: 'require-own-credential',
  run: (d) => (d.upstream !== null ? null : notOwn(d)),
};

function notOwn(d: DecisionState): Deny {
  const base = deny('ENDPOINT_NOT_ALLOWED');
  return {
    ...base,
    keyId: d.grant!.id,
    message: `This gateway serves only accounts that use their own ${d.family} credential, and this key's account has none. Set the account's ${d.family} credential in the console, then retry.`,
  };
}
