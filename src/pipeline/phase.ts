/**
 * The decision as a list of phases: what a phase is, what it reads, what it may learn for the phases
 * after it. The list and the loop that runs it are in `index.ts`; one file per phase in `phases/`.
 *
 * A phase answers `null` (pass on to the next phase) or a `Deny` (the decision), or a promise of one
 * when it must wait (a store read not held in memory, a limiter that has to ask). The loop awaits only
 * a promise, so a phase that answers from memory costs no await. A phase never throws for bad input;
 * a store that cannot answer rejects with `StoreUnavailable` and the decision is 503 AUTH_UNAVAILABLE.
 *
 * The pipeline depends on nothing above it: not on the transports, not on telemetry (observers
 * watch outcomes from outside, `Authorizer.observe`).
 */
import type { Credential, HeaderValue } from '../core/credentials.ts';
import type { AllowRate, Decision, Deny } from '../core/decision.ts';
import type { Family, PrefixRule } from '../core/families/index.ts';
import type { UpstreamCredential } from '../core/upstream-credential.ts';
import type { EndpointTable } from '../core/model/index.ts';
import type { JsonModelScan } from '../core/model/json-scan.ts';
import { NO_RATES, type Rates } from '../schema/rates.ts';
import type { RateGate } from '../schema/records.ts';
import type { AccountBilling } from '../schema/redis-schema.ts';
import type { KeyGrant } from '../schema/redis-schema.ts';
import type { RecordSource } from '../store/record-source.ts';

/**
 * One request to decide. The header lookup and the body may be views of a transport's buffer that
 * is reused once `check()` has resolved (the h2 server's message pool): a phase or an observer that
 * keeps anything from them past the decision must copy it.
 */
export interface CheckInput {
  /** A request header by lower-case name. */
  readonly header: (name: string) => HeaderValue;
  readonly method: string;
  /** Path with query string, as the client sent it. */
  readonly path: string;
  /** Per-route family set by the proxy (Envoy `context_extensions.protocol`, `x-keygate-protocol`). */
  readonly protocol: string | undefined;
  readonly body: Uint8Array | string | undefined;
  readonly bodyTruncated: boolean;
  /** The proxy's request id (Envoy `x-request-id`), if any. */
  readonly requestId: string | undefined;
}

export interface CheckOutcome {
  readonly decision: Decision;
  readonly family: Family;
  readonly requestId: string;
  /**
   * For logs, on a deny that names no key id: the masked form (prefix and last four) of the key the
   * request carried; otherwise undefined.
   */
  readonly maskedKey?: string;
  /** The account of the key once its record was read (every allow, and denies after the key rule). */
  readonly accountId?: string;
}

/** What every decision of one sidecar shares: its settings and the services injected into it. */
export interface DecisionEnv {
  /** The one lookup shape: every record a phase reads (`src/schema/records.ts`). */
  readonly records: RecordSource;
  /** The clock every time rule compares with (expiry, spend-limit blocks). */
  readonly now: () => number;
  readonly keyPrefix: string;
  readonly pathPrefixes: readonly PrefixRule[];
  /** The operator's extra model endpoints (KEYGATE_MODEL_ENDPOINTS). */
  readonly modelEndpoints: EndpointTable | undefined;
  /** An account without a wallet is refused like an empty one (`KEYGATE_REQUIRE_WALLET`). */
  readonly requireWallet: boolean;
}

/**
 * One decision under way: the request, and what the phases learned so far. A phase reads what the
 * phases before it set (listed with each field) and sets only its own fields.
 */
export class DecisionState {
  readonly input: CheckInput;
  readonly family: Family;
  readonly credential: Credential;
  readonly env: DecisionEnv;
  /** The key the request carried (`credential`, when its kind is `key`); '' otherwise. */
  readonly key: string;
  /** Set by `key` (the key record): who the key is. Non-null in every phase after it. */
  grant: KeyGrant | null = null;
  /** Set by `account` (the account's records, read together): disabled, or `'corrupt'`. */
  blocked: boolean | 'corrupt' = false;
  /** Set by `account`: the account's rates (`NO_RATES` when none). */
  accountRates: Rates = NO_RATES;
  /** Set by `account`: the `PROVIDER_BIT`s of the providers the account has its own credential for (0: none). */
  accountCredentials = 0;
  /**
   * Set by `own-credential`: the account's own credential for the request's provider (SPEC 18), the
   * header and value the allow sets upstream (never logged); null: none. The endpoint rule opens
   * `stateful` endpoints when it is set.
   */
  upstream: UpstreamCredential | null = null;
  /** Set by `account`: how the account's usage is booked (`external` opens `unbillable` endpoints). */
  billing: AccountBilling = 'metered';
  /** Set by `account`: the account's gate (wallet empty, keys over their spend limit, token rates used up). */
  gate: RateGate | 'corrupt' | null = null;
  /**
   * Set by `endpoint` when its usage guarantee scanned the whole body as a JSON object for a
   * restricted key: `scanJsonModel`'s answer for those bytes, which `model` then need not scan again; else null.
   */
  bodyModel: JsonModelScan | null = null;
  /** Set by `model`: the resolved model when it was read (restricted keys), else null. */
  model: string | null = null;
  /** Set by `rate-limit` on a request it allows of a key or account with rates: what the allow carries. */
  rate: AllowRate | null = null;

  constructor(input: CheckInput, family: Family, credential: Credential, env: DecisionEnv) {
    this.input = input;
    this.family = family;
    this.credential = credential;
    this.env = env;
    this.key = credential.kind === 'key' ? credential.key : '';
  }
}

export type PhaseAnswer = Deny | null;

export interface Phase {
  /** Short name (logs, docs, the order test). */
  readonly name: string;
  run(d: DecisionState): PhaseAnswer | Promise<PhaseAnswer>;
}
