/**
 * Decision logs: one JSON line per deny at info (code, status, family, key id or masked key,
 * request id, duration); allows only at debug. The key itself never reaches a line: a deny before
 * the key is known carries `maskedKey` (`kg_…WXYZ`), after it the key id. Each deny names the
 * rule that refused it (`rule`), and the safe detail text when there is one (`detail`).
 *
 * Repeats are folded: within a window (`windowMs`, 1 s by default) the first deny of a kind (same
 * code, rule, detail, family and key id or masked key) gets its own line at once; the identical
 * denies after it are counted and said in one `deny repeated` line at the end of the window, with
 * the count (`repeated`) and the last request id. At most `maxKinds` kinds get their own line per
 * window; denies of further kinds are counted per (code, rule, family) in a `deny repeated` line
 * with `overflow: true`. So every deny is in a line or a count, and a flood of identical or random
 * bad keys costs a map update per request instead of a log line. Metrics are not affected (they
 * count every decision exactly). `windowMs: 0` logs every deny on its own line.
 */
import type { Logger } from 'pino';
import type { CheckOutcome, DecisionObserver } from '../authorizer.ts';
import type { Deny } from '../core/decision.ts';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.ts';

/** Which rule refused, in words an operator can act on. Never key material. */
export function denyRule(d: Deny): string {
  switch (d.code) {
    case 'API_KEY_REQUIRED':
      return 'no key in Authorization, x-api-key or x-goog-api-key';
    case 'AMBIGUOUS_API_KEY':
      return 'more than one key sent';
    case 'INVALID_API_KEY':
      return d.detail !== undefined ? 'Authorization header not in the Bearer scheme' : 'key malformed, unknown or revoked';
    case 'API_KEY_EXPIRED':
      return 'key past its expiry';
    case 'USER_BLOCKED':
      return 'account disabled';
    case 'INSUFFICIENT_BALANCE':
      return 'account wallet empty (or no wallet where wallets are required)';
    case 'KEY_LIMIT_EXCEEDED':
      return 'key spend limit reached for the current period';
    case 'ENDPOINT_NOT_ALLOWED':
      return 'endpoint not open to the key (unknown, stateful, unbillable, an object of another account, or no own credential where one is required)';
    case 'MODEL_NOT_ALLOWED':
      return 'model not among the key\'s allowed models, or not readable for a model-restricted key';
    case 'RATE_LIMITED':
      return 'key or account rate used up for the current window';
    case 'AUTH_UNAVAILABLE':
      if (d.gatewayProblem !== undefined) return 'gateway problem (see the gateway-problem log)';
      return d.keyId !== undefined ? 'account or gate record unreadable, or store unavailable' : 'key store unavailable';
    case 'USAGE_NOT_GUARANTEED':
      return 'request body not readable whole, or a streamed request keygate cannot make ask for usage';
  }
}

export interface DecisionLogOptions {
  /** How long identical denies are folded into one count (ms); 0 logs each deny. Default 1000. */
  readonly windowMs?: number;
  /** Kinds of deny with their own line per window; beyond, counted per (code, rule, family). Default 256. */
  readonly maxKinds?: number;
  /** The window's timer runs on it (default `systemClock`). */
  readonly clock?: Clock;
}

interface Kind {
  readonly deny: Deny;
  readonly family: string;
  readonly who: { keyId: string } | { maskedKey: string | undefined };
  count: number;
  lastRequestId: string;
  readonly overflow: boolean;
}

export class DecisionLog {
  readonly observer: DecisionObserver;
  readonly #log: Logger;
  readonly #windowMs: number;
  readonly #maxKinds: number;
  /** This window's kinds (with their own line) and overflow counts, by key. */
  readonly #kinds = new Map<string, Kind>();
  #own = 0;
  readonly #clock: Clock;
  #timer: TimerHandle | undefined;

  constructor(log: Logger, opts: DecisionLogOptions = {}) {
    this.#log = log;
    this.#windowMs = opts.windowMs ?? 1000;
    this.#clock = opts.clock ?? systemClock;
    this.#maxKinds = opts.maxKinds ?? 256;
    this.observer = (outcome, _input, startedAt) => {
      const d = outcome.decision;
      if (d.allow) {
        if (log.isLevelEnabled('debug')) this.#allow(outcome, startedAt);
        return;
      }
      if (log.isLevelEnabled('info')) this.#deny(outcome, d, startedAt);
    };
  }

  /** Writes the pending counts now (end of a window; on shutdown). */
  flush(): void {
    if (this.#timer) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const k of this.#kinds.values()) {
      if (k.count === 0) continue;
      const d = k.deny;
      this.#log.info(
        {
          decision: 'deny',
          code: d.code,
          status: d.status,
          rule: denyRule(d),
          ...(d.detail !== undefined && !k.overflow ? { detail: d.detail } : {}),
          family: k.family,
          ...(k.overflow ? { overflow: true } : k.who),
          repeated: k.count,
          windowMs: this.#windowMs,
          lastRequestId: k.lastRequestId,
        },
        'deny repeated',
      );
    }
    this.#kinds.clear();
    this.#own = 0;
  }

  /** Flushes and stops the window timer. */
  close(): void {
    this.flush();
  }

  #allow(outcome: CheckOutcome, startedAt: bigint): void {
    const d = outcome.decision;
    if (!d.allow) return;
    this.#log.debug(
      {
        decision: 'allow',
        requestId: outcome.requestId,
        family: outcome.family,
        keyId: d.keyId,
        accountId: d.accountId,
        model: d.model ?? undefined,
        ms: elapsedMs(startedAt),
      },
      'allow',
    );
  }

  #deny(outcome: CheckOutcome, d: Deny, startedAt: bigint): void {
    const who = d.keyId !== undefined ? { keyId: d.keyId } : { maskedKey: outcome.maskedKey };
    if (this.#windowMs <= 0) return this.#line(outcome, d, who, startedAt);
    const key = `${d.code}\0${d.status}\0${d.detail ?? ''}\0${outcome.family}\0${'keyId' in who ? `k${who.keyId}` : `m${who.maskedKey ?? ''}`}`;
    const seen = this.#kinds.get(key);
    if (seen !== undefined) {
      seen.count++;
      seen.lastRequestId = outcome.requestId;
      return;
    }
    if (this.#timer === undefined) {
      this.#timer = this.#clock.setTimeout(() => this.flush(), this.#windowMs).unref();
    }
    if (this.#own < this.#maxKinds) {
      this.#own++;
      this.#kinds.set(key, { deny: d, family: outcome.family, who, count: 0, lastRequestId: outcome.requestId, overflow: false });
      return this.#line(outcome, d, who, startedAt);
    }
    const over = `overflow\0${d.code}\0${d.status}\0${d.detail === undefined ? '' : 'detail'}\0${'keyId' in who ? 'k' : 'm'}\0${outcome.family}`;
    const o = this.#kinds.get(over);
    if (o !== undefined) {
      o.count++;
      o.lastRequestId = outcome.requestId;
    } else {
      this.#kinds.set(over, { deny: d, family: outcome.family, who, count: 1, lastRequestId: outcome.requestId, overflow: true });
    }
  }

  #line(outcome: CheckOutcome, d: Deny, who: Kind['who'], startedAt: bigint): void {
    this.#log.info(
      {
        decision: 'deny',
        requestId: outcome.requestId,
        code: d.code,
        status: d.status,
        rule: denyRule(d),
        ...(d.detail !== undefined ? { detail: d.detail } : {}),
        family: outcome.family,
        ...who,
        ms: elapsedMs(startedAt),
      },
      'deny',
    );
  }
}

function elapsedMs(startedAt: bigint): number {
  return Math.round(Number(process.hrtime.bigint() - startedAt) / 1e3) / 1e3;
}
