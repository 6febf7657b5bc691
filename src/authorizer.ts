/**
 * The one loop that runs the decision phases (`src/pipeline/`), shared by every transport: each
 * phase in order until one denies; a request that passes every phase is allowed. A store that
 * cannot answer yields 503 AUTH_UNAVAILABLE. Observers (metrics, logs, usage counting, gateway
 * problems) see every outcome; the pipeline itself depends on none of them.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './core/clock.ts';
import { findCredential, type HeaderValue, type KeyHeader } from './core/credentials.ts';
import { allow, deny, type Decision } from './core/decision.ts';
import { pathOnly, resolveFamily, type PrefixRule } from './core/families/index.ts';
import type { EndpointTable } from './core/model/index.ts';
import { maskKey } from './core/key-format.ts';
import { decisionPhases, DecisionState, type CheckInput, type CheckOutcome, type DecisionEnv, type Phase, type PhaseAnswer } from './pipeline/index.ts';
import { isPending, StoreUnavailable, type RecordSource } from './store/record-source.ts';

export type { CheckInput, CheckOutcome } from './pipeline/index.ts';

export interface AuthorizerOptions {
  readonly keyPrefix: string;
  readonly pathPrefixes: readonly PrefixRule[];
  /** The operator's extra model endpoints (KEYGATE_MODEL_ENDPOINTS). */
  readonly modelEndpoints?: EndpointTable;
  /** What expiries, spend-limit blocks and rate headers are compared with (default `systemClock`). */
  readonly clock?: Clock;
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
      now: (opts.clock ?? systemClock).now,
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

  /**
   * Runs the phases in order. A phase answering from memory costs no await: the loop goes on
   * synchronously and continues in a `then` only after a phase that returned a promise (a warm
   * key: the one wait of the key record, `KEY_RECORD.afterPendingIo`; nothing else).
   */
  check(input: CheckInput): Promise<CheckOutcome> {
    try {
      const startedAt = process.hrtime.bigint();
      const env = this.#env;
      const family = resolveFamily(input.protocol, input.path, env.pathPrefixes);
      const requestId = requestIdOf(input.requestId);
      const d = new DecisionState(input, family, findCredential(input.header as (n: KeyHeader) => HeaderValue), env);
      const r = this.#run(d, 0, requestId, startedAt);
      return isPending(r) ? r : Promise.resolve(r);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Phases from `from` on; the outcome, or a promise of it once a phase must be waited for. */
  #run(d: DecisionState, from: number, requestId: string, startedAt: bigint): CheckOutcome | Promise<CheckOutcome> {
    let decision: Decision | null = null;
    try {
      const phases = this.#phases;
      for (let i = from; i < phases.length; i++) {
        const a: PhaseAnswer | Promise<PhaseAnswer> = phases[i]!.run(d);
        if (a === null) continue;
        if (isPending(a)) {
          const next = i + 1;
          return a.then(
            (r) => (r === null ? this.#run(d, next, requestId, startedAt) : this.#outcome(d, r, requestId, startedAt)),
            (err: unknown) => this.#outcome(d, this.#failed(err, requestId), requestId, startedAt),
          );
        }
        decision = a;
        break;
      }
      decision ??= d.grant !== null ? allow(d.grant, d.model, d.rate, d.upstream) : deny('INVALID_API_KEY');
    } catch (err) {
      decision = this.#failed(err, requestId);
    }
    return this.#outcome(d, decision, requestId, startedAt);
  }

  /** A phase that threw or rejected: a store that cannot answer is 503; anything else is logged, and 503 too (fail closed). */
  #failed(err: unknown, requestId: string): Decision {
    if (!(err instanceof StoreUnavailable)) {
      this.#log.error({ err: { message: (err as Error)?.message, name: (err as Error)?.name }, requestId }, 'check failed; denying');
    }
    return deny('AUTH_UNAVAILABLE');
  }

  #outcome(d: DecisionState, decision: Decision, requestId: string, startedAt: bigint): CheckOutcome {
    const maskedKey = !decision.allow && decision.keyId === undefined && d.key !== '' ? maskKey(d.key, this.#env.keyPrefix) : undefined;
    const outcome: CheckOutcome = { decision, family: d.family, requestId, maskedKey, accountId: d.grant?.account };
    const observers = this.#observers;
    for (let i = 0; i < observers.length; i++) observers[i]!(outcome, d.input, startedAt);
    return outcome;
  }
}
