/**
 * The one decision pipeline: the core's phases composed in the decision order (README "What it does") around the store
 * lookups, shared by every transport (the only place they are composed):
 *   1. credential  — which key the headers carry (pure)
 *   2. format      — prefix, length, alphabet, checksum (pure; no store call for a malformed key)
 *   3. key         — the record by SHA-256 digest (store)
 *   4. expiry      — (pure)
 *   5. account     — disabled? (store)
 *   6-7. money     — wallet empty, key over its spend limit (the account's gate record, fetched
 *                    together with the account record: a cold key still costs two round trips)
 *   8. model       — only for restricted keys (pure, reads the body)
 * A store that cannot answer yields 503 AUTH_UNAVAILABLE.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { findCredential, type Credential, type HeaderValue, type KeyHeader } from './core/credentials.ts';
import {
  accountDeny,
  allow,
  credentialDeny,
  deny,
  keyDeny,
  modelDeny,
  type Decision,
} from './core/decision.ts';
import { moneyDeny } from './core/money.ts';
import { pathOnly, resolveFamily, type Family, type PrefixRule } from './core/family.ts';
import { GatewayProblemLog } from './telemetry/gateway-problem.ts';
import { readModel, type EndpointTable } from './core/model/index.ts';
import { isWellFormedKey, keyDigest, maskKey } from './keys/format.ts';
import { NO_GATE, type Gate } from './schema/money.ts';
import { StoreUnavailable, type KeyStore } from './store/key-store.ts';

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
}

export interface AuthorizerOptions {
  readonly keyPrefix: string;
  readonly pathPrefixes: readonly PrefixRule[];
  /** The operator's extra model endpoints (KEYGATE_MODEL_ENDPOINTS). */
  readonly modelEndpoints?: EndpointTable;
  readonly now?: () => number;
  /** An account without a wallet is refused like an empty one (`KEYGATE_REQUIRE_WALLET`). */
  readonly requireWallet?: boolean;
  /** How often one gateway configuration problem is logged at most (default 60 s). */
  readonly problemLogIntervalMs?: number;
}

/** Observes every decision (metrics, logs); must not throw. */
export type DecisionObserver = (outcome: CheckOutcome, input: CheckInput, startedAt: bigint) => void;

/**
 * A request id kept as given: characters that logs, JSON and protobuf carry as themselves, one byte
 * each (the deny-frame templates rely on it). Any other id is replaced by a UUID, which matches too.
 */
export const SAFE_REQUEST_ID = /^[A-Za-z0-9._:@=+/-]{1,128}$/;

export function requestIdOf(given: string | undefined): string {
  return given !== undefined && SAFE_REQUEST_ID.test(given) ? given : randomUUID();
}

export class Authorizer {
  readonly #store: KeyStore;
  readonly #opts: AuthorizerOptions;
  readonly #now: () => number;
  readonly #log: Logger;
  readonly #observers: DecisionObserver[] = [];
  readonly #problems: GatewayProblemLog;

  constructor(store: KeyStore, opts: AuthorizerOptions, log: Logger) {
    this.#store = store;
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
    this.#log = log;
    this.#problems = new GatewayProblemLog(log, opts.problemLogIntervalMs);
  }

  observe(fn: DecisionObserver): void {
    this.#observers.push(fn);
  }

  async check(input: CheckInput): Promise<CheckOutcome> {
    const startedAt = process.hrtime.bigint();
    const family = resolveFamily(input.protocol, input.path, this.#opts.pathPrefixes);
    const requestId = requestIdOf(input.requestId);
    const credential = findCredential(input.header as (n: KeyHeader) => HeaderValue);
    let decision: Decision;
    try {
      decision = await this.#decide(input, family, credential);
    } catch (err) {
      if (!(err instanceof StoreUnavailable)) {
        this.#log.error({ err: { message: (err as Error)?.message, name: (err as Error)?.name }, requestId }, 'check failed; denying');
      }
      decision = deny('AUTH_UNAVAILABLE');
    }
    if (!decision.allow && decision.gatewayProblem !== undefined) {
      this.#problems.note(decision.gatewayProblem, { family, method: input.method, path: pathOnly(input.path).slice(0, 200) });
    }
    const maskedKey = !decision.allow && decision.keyId === undefined && credential.kind === 'key' ? maskKey(credential.key, this.#opts.keyPrefix) : undefined;
    const outcome: CheckOutcome = { decision, family, requestId, maskedKey };
    for (const fn of this.#observers) fn(outcome, input, startedAt);
    return outcome;
  }

  async #decide(input: CheckInput, family: Family, credential: Credential): Promise<Decision> {
    const key = credential.kind === 'key' ? credential.key : '';
    const early = credentialDeny(credential, credential.kind === 'key' && isWellFormedKey(key, this.#opts.keyPrefix));
    if (early) return early;

    const parsed = await this.#store.key(keyDigest(key));
    const k = keyDeny(parsed, this.#now());
    if (k) return k;
    if (parsed.kind !== 'grant') return deny('INVALID_API_KEY');
    const grant = parsed.grant;

    // Both account answers from the cache without an await, or both lookups at once (one round trip
    // when cold; the gate's failure is observed even when the account decides first).
    const cached = this.#store.cachedAccount?.(grant.account);
    let gate: Gate | 'corrupt';
    if (cached !== undefined) {
      const a = accountDeny(cached.blocked, grant.id);
      if (a) return a;
      gate = cached.gate;
    } else {
      const blocked = this.#store.accountBlocked(grant.account);
      const pending = this.#store.gate(grant.account);
      pending.catch(noop);
      const a = accountDeny(await blocked, grant.id);
      if (a) return a;
      gate = await pending;
    }
    if (gate !== NO_GATE || this.#opts.requireWallet === true) {
      const g = moneyDeny(gate, grant.id, this.#now(), this.#opts.requireWallet === true);
      if (g) return g;
    }

    const m = modelDeny(
      grant,
      () =>
        readModel({
          family,
          method: input.method,
          path: input.path,
          contentType: firstValue(input.header('content-type')),
          body: input.body,
          bodyTruncated: input.bodyTruncated,
          endpoints: this.#opts.modelEndpoints,
        }),
      family,
    );
    if ('allow' in m) return m;
    return allow(grant, m.model);
  }
}

function noop(): void {}

function firstValue(v: HeaderValue): string | undefined {
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v[0];
}
