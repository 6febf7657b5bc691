/**
 * The decision pipeline: the phases in the decision order (README "What it does"); the one loop that
 * runs them is `Authorizer.check` (`src/authorizer.ts`). The first phase that answers a deny decides; a request that passes every phase is
 * allowed. A new rule is a new file in `phases/` and one line in `decisionPhases` (docs/architecture.md,
 * "Adding a decision phase").
 */
import type { Phase } from './phase.ts';
import { account } from './phases/account.ts';
import { credential } from './phases/credential.ts';
import { endpointRule } from './phases/endpoint.ts';
import { EndpointCatalog } from '../core/endpoints/catalog.ts';
import { expiry } from './phases/expiry.ts';
import { format } from './phases/format.ts';
import { key } from './phases/key.ts';
import { model } from './phases/model.ts';
import { ownCredential, requireOwnCredential, type OwnCredentialDeps } from './phases/own-credential.ts';
import { rateLimit, type RateLimitDeps } from './phases/rate-limit.ts';
import { spendLimit } from './phases/spend-limit.ts';
import { wallet } from './phases/wallet.ts';

export { DecisionState, type CheckInput, type CheckOutcome, type DecisionEnv, type Phase, type PhaseAnswer } from './phase.ts';

/**
 * What optional phases need, injected by the wiring (`src/main.ts`). A phase whose part is switched
 * off is left out of the list, so it costs the hot path nothing.
 */
export interface PhaseDeps {
  /** The shared rate limiter and token windows (docs/rate-limits.md); without them no rate phase. */
  readonly rates?: RateLimitDeps;
  /** Accounts' own upstream credentials (docs/credentials.md); without them no credential is injected. */
  readonly credentials?: OwnCredentialDeps;
  /** The endpoint catalog with the operator's rows (docs/endpoints.md); without it, the builtin catalog. */
  readonly endpoints?: EndpointCatalog;
  /** Refuse at the Check the OpenAI chat and completions bodies metering could not make ask for usage (KEYGATE_METER_FORCE_USAGE; default on). */
  readonly usageGuarantee?: boolean;
}

let builtin: EndpointCatalog | undefined;
/** The builtin catalog, compiled once. */
export function builtinCatalog(): EndpointCatalog {
  return (builtin ??= new EndpointCatalog());
}

/** The phases in order. */
export function decisionPhases(deps: PhaseDeps = {}): readonly Phase[] {
  return [
    credential, // 1. which key the headers carry
    format, // 2. prefix, length, alphabet, checksum
    key, // 3. the key record (store)
    expiry, // 4.
    account, // 5. the account's state and gate (store)
    ...(deps.credentials ? [ownCredential(deps.credentials)] : []), // 5a. the account's own credential (store, only accounts that have one)
    wallet, // 6.
    spendLimit, // 7.
    ...(deps.credentials?.requireOwn ? [requireOwnCredential] : []), // 8. KEYGATE_REQUIRE_OWN_CREDENTIAL (the endpoint rule's row)
    endpointRule(deps.endpoints ?? builtinCatalog(), { usageGuarantee: deps.usageGuarantee ?? true }), // 8. every key: the endpoint's class (and the body's references)
    model, // 9. restricted keys only
    // 10. counts only requests that passed every rule above; keys and accounts without rates pass at once.
    ...(deps.rates ? [rateLimit(deps.rates)] : []),
  ];
}
