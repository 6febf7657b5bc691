/**
 * 9. Rate limits (docs/rate-limits.md): after every other rule, so only requests that pass them
 * count. A key and an account without rates pass at once (`NO_RATES` by identity: no Redis command,
 * no allocation). Otherwise: token blocks from the cached gate first (a request refused by a token
 * rate counts against no request rate), then the request rates through the shared limiter (in
 * memory while a lease covers it). Refused → 429 RATE_LIMITED with the wait; limiter unavailable →
 * 503 AUTH_UNAVAILABLE (fail closed). Sets `rate` on an allowed request (headers, metadata).
 */
import { deny, type AllowRate, type Deny } from '../../core/decision.ts';
import { DENY_STATUS } from '../../core/codes.ts';
import { firstRefusal, rateLimitHeaders, rateMessage, retryAfter, tighterView, tokenRefusals, type RateRefusal, type RateView } from '../../core/rate.ts';
import { NO_RATES, type Rate, type RateKeys, type Rates } from '../../schema/rates.ts';
import type { KeyGrant } from '../../schema/redis-schema.ts';
import type { RateLimiter, RateRequest, TakeResult } from '../../store/rate-limiter.ts';
import type { TokenRateViews } from '../../store/token-rate-views.ts';
import type { DecisionState, Phase, PhaseAnswer } from '../phase.ts';

export interface RateLimitDeps {
  readonly limiter: Pick<RateLimiter, 'take' | 'peek'>;
  readonly tokenViews: Pick<TokenRateViews, 'view'>;
  readonly keys: RateKeys;
}

/**
 * What a rated request of one grant under one account's rates always asks: the limiter's request
 * (window names and rates) and the token windows' names. Built once per (grant, account rates) and
 * kept beside the grant (a cached grant is the same object until its record changes), so a rated
 * request builds no key string and no request object.
 */
interface GrantRates {
  /** The key's rates (`NO_RATES` when none) and the account's these were built for. */
  readonly kr: Rates;
  readonly ar: Rates;
  readonly req: RateRequest;
  readonly keyTokens: string | null;
  readonly accountTokens: string | null;
}

export function rateLimit(deps: RateLimitDeps): Phase {
  const byGrant = new WeakMap<KeyGrant, GrantRates>();
  const ratesOf = (g: KeyGrant, kr: Rates, ar: Rates): GrantRates => {
    let r = byGrant.get(g);
    if (r === undefined || r.ar !== ar) {
      r = {
        kr,
        ar,
        req: {
          keyWindow: kr.requests ? deps.keys.requests(g.account, g.id) : null,
          keyRate: kr.requests,
          accountWindow: ar.requests ? deps.keys.requests(g.account) : null,
          accountRate: ar.requests,
        },
        keyTokens: kr.tokens ? deps.keys.tokens(g.account, g.id) : null,
        accountTokens: ar.tokens ? deps.keys.tokens(g.account) : null,
      };
      byGrant.set(g, r);
    }
    return r;
  };
  return {
    name: 'rate-limit',
    run: (d) => {
      const g = d.grant!;
      const kr = g.rates ?? NO_RATES;
      const ar = d.accountRates;
      if (kr === NO_RATES && ar === NO_RATES) return null;
      return decide(d, deps, ratesOf(g, kr, ar));
    },
  };
}

function decide(d: DecisionState, deps: RateLimitDeps, gr: GrantRates): PhaseAnswer | Promise<PhaseAnswer> {
  const g = d.grant!;
  const { kr, ar } = gr;
  const now = d.env.now();
  const req = gr.req;
  const gate = d.gate;
  const blocks = gate !== null && gate !== 'corrupt' ? gate.tokens : undefined;
  if (blocks !== undefined) {
    const refused = tokenRefusals(blocks, g.id, now, kr.tokens, ar.tokens);
    if (refused.length > 0) {
      const known = deps.limiter.peek(req);
      const asRefusal = known ? requestRefusal(known.scope, known.retryAt, kr, ar) : null;
      return rateDeny(firstRefusal([...refused, asRefusal])!, g.id, now);
    }
  }
  if (req.keyRate === null && req.accountRate === null) {
    d.rate = allowRate(d, deps, gr, null, null);
    return null;
  }
  const t = deps.limiter.take(req);
  if (t instanceof Promise) return t.then((r) => answer(d, deps, gr, r));
  return answer(d, deps, gr, t);
}

function answer(d: DecisionState, deps: RateLimitDeps, gr: GrantRates, r: TakeResult): PhaseAnswer {
  const g = d.grant!;
  if (r.kind === 'unavailable') return deny('AUTH_UNAVAILABLE', undefined, g.id);
  if (r.kind === 'refuse') return rateDeny(requestRefusal(r.scope, r.retryAt, gr.kr, gr.ar), g.id, d.env.now());
  d.rate = allowRate(d, deps, gr, r.key, r.account);
  return null;
}

function requestRefusal(scope: 'key' | 'account', retryAt: number, kr: Rates, ar: Rates): RateRefusal {
  return { scope, kind: 'requests', rate: (scope === 'key' ? kr.requests : ar.requests)!, retryAt };
}

function rateDeny(r: RateRefusal, keyId: string, now: number): Deny {
  return {
    allow: false,
    code: 'RATE_LIMITED',
    status: DENY_STATUS.RATE_LIMITED,
    keyId,
    message: rateMessage(r, now),
    retryAfterMs: retryAfter(r.retryAt, now).ms,
  };
}

function tokenView(deps: RateLimitDeps, window: string | null, rate: Rate | null): RateView | null {
  return rate === null || window === null ? null : deps.tokenViews.view(window, rate);
}

function allowRate(d: DecisionState, deps: RateLimitDeps, gr: GrantRates, key: RateView | null, account: RateView | null): AllowRate {
  const { kr, ar } = gr;
  const tokens = kr.tokens || ar.tokens ? tighterView(tokenView(deps, gr.keyTokens, kr.tokens), tokenView(deps, gr.accountTokens, ar.tokens)) : null;
  return {
    headers: rateLimitHeaders({ requests: tighterView(key, account), tokens }, d.env.now()),
    limit: kr.requests ?? ar.requests,
  };
}
