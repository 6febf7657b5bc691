/**
 * The one loop that runs the decision phases (`src/pipeline/`), shared by every transport: each
 * phase in order until one denies; a request that passes every phase is allowed. A store that
 * cannot answer yields 503 AUTH_UNAVAILABLE. Observers (metrics, logs, usage counting, gateway
 * problems) see every outcome; the pipeline itself depends on none of them.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { findCredential, type HeaderValue, type KeyHeader } from './core/credentials.ts';
import { allow, deny, type Decision } from './core/decision.ts';
import { pathOnly, resolveFamily, type PrefixRule } from './core/family.ts';
import type { EndpointTable } from './core/model/index.ts';
import { maskKey } from './keys/format.ts';
import { decisionPhases, DecisionState, type CheckInput, type CheckOutcome, type DecisionEnv, type Phase, type PhaseAnswer } from './pipeline/index.ts';
import { isPending, StoreUnavailable, type RecordSource } from './store/record-source.ts';

export type { CheckInput, CheckOutcome } from './pipeline/index.ts';

export interface AuthorizerOptions {
  readonly keyPrefix: string;
  readonly pathPrefixes: readonly PrefixRule[];
  /** The operator's extra model endpoints (KEYGATE_MODEL_ENDPOINTS). */
  readonly modelEndpoints?: EndpointTable;
  readonly now?: () => number;
  /** An account without a wallet is refused like an empty one (`KEYGATE_REQUIRE_WALLET`). */
  readonly requireWallet?: boolean;
  /** The phases, in order (default `decisionPhases()`). */
  readonly phases?: readonly Phase[];
}

/** Observes every decision (metrics, logs); must not throw. */
export type DecisionObserver = (outcome: CheckOutcome, input: CheckInput, startedAt: bigint) => void;

/** A gateway configuration problem behind a deny, with where it was seen (for a rate-limited operator log). */
export type GatewayProblemObserver = (problem: string, where: { family: string; method: string; path: string }) => void;

/**
 * A request id kept as given: characters that logs, JSON and protobuf carry as themselves, one byte
 * each (the deny-frame templates rely on it). Any other id is replaced by a UUID, which matches too.
 */
export const SAFE_REQUEST_ID = /^[A-Za-z0-9._:@=+/-]{1,128}$/;

export function requestIdOf(given: string | undefined): string {
  return given !== undefined && SAFE_REQUEST_ID.test(given) ? given : randomUUID();
}

export class Authorizer {
  readonly #env: DecisionEnv;
  readonly #phases: readonly Phase[];
  readonly #log: Logger;
  readonly #observers: DecisionObserver[] = [];

  constructor(records: RecordSource, opts: AuthorizerOptions, log: Logger) {
    this.#env = {
      records,
      now: opts.now ?? Date.now,
      keyPrefix: opts.keyPrefix,
      pathPrefixes: opts.pathPrefixes,
      modelEndpoints: opts.modelEndpoints,
      requireWallet: opts.requireWallet === true,
    };
    this.#phases = opts.phases ?? decisionPhases();
    this.#log = log;
  }

  observe(fn: DecisionObserver): void {
    this.#observers.push(fn);
  }

  /** Tells `fn` of each gateway configuration problem behind a deny (the caller rate-limits its log). */
  onGatewayProblem(fn: GatewayProblemObserver): void {
    this.observe((outcome, input) => {
      const d = outcome.decision;
      if (!d.allow && d.gatewayProblem !== undefined) fn(d.gatewayProblem, { family: outcome.family, method: input.method, path: pathOnly(input.path).slice(0, 200) });
    });
  }

  async check(input: CheckInput): Promise<CheckOutcome> {
    const startedAt = process.hrtime.bigint();
    const env = this.#env;
    const family = resolveFamily(input.protocol, input.path, env.pathPrefixes);
    const requestId = requestIdOf(input.requestId);
    const d = new DecisionState(input, family, findCredential(input.header as (n: KeyHeader) => HeaderValue), env);
    let decision: Decision | null = null;
    try {
      const phases = this.#phases;
      for (let i = 0; i < phases.length && decision === null; i++) {
        let a: PhaseAnswer | Promise<PhaseAnswer> = phases[i]!.run(d);
        if (a !== null && isPending(a)) a = await a;
        decision = a;
      }
      decision ??= d.grant !== null ? allow(d.grant, d.model, d.rate) : deny('INVALID_API_KEY');
    } catch (err) {
      if (!(err instanceof StoreUnavailable)) {
        this.#log.error({ err: { message: (err as Error)?.message, name: (err as Error)?.name }, requestId }, 'check failed; denying');
      }
      decision = deny('AUTH_UNAVAILABLE');
    }
    const maskedKey = !decision.allow && decision.keyId === undefined && d.key !== '' ? maskKey(d.key, env.keyPrefix) : undefined;
    const outcome: CheckOutcome = { decision, family, requestId, maskedKey, accountId: d.grant?.account };
    for (const fn of this.#observers) fn(outcome, input, startedAt);
    return outcome;
  }
}
