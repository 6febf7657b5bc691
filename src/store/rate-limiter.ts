/**
 * The request-rate limiter a sidecar shares with every other sidecar through Redis
 * (docs/rate-limits.md). Per window record (a key's or an account's) the sidecar holds at most one
 * lease: units of the window's budget that the TAKE script has already counted for it. A request
 * that both its rates' leases cover is decided in memory, without a Redis command; otherwise the
 * requests waiting on the same key go to Redis in one TAKE call, which counts them, releases the
 * exhausted lease and grants a new one. Limits below 100 have no pool: every request is counted by
 * Redis (exact).
 *
 * Time: windows follow the Redis server's clock. A lease is used only while the Redis clock is
 * certainly still in its window (local deadline = send time + window end − server time), and a
 * window known to be used up is refused locally until it has certainly ended by the server's clock.
 *
 * Outage: a TAKE that fails leaves the leases as they were; requests they cover are still allowed
 * (the local share: units Redis already counted), any other request resolves `unavailable` (the
 * caller fails closed). Memory: at most `maxScopes` window states; idle ones are dropped first.
 *
 * Sentinel failover: between the sentinel's announcement that a failover started and the switch,
 * the connected node may be an old master whose writes the new one never sees (the store pauses
 * then; `src/store/sentinel-watch.ts`). The limiter pauses with it (`pause`/`resume`): no command
 * goes to Redis, requests that held leases cover are allowed (as in an outage), every other one
 * resolves `unavailable` at once (503); idle leases are kept, not given back.
 */
import { leasePool, type RateScope, type RateView } from '../core/rate.ts';
import { UNIT_MS, type Rate } from '../schema/rates.ts';
import { TAKE } from '../schema/rate-scripts.ts';
import type { RedisClient } from './redis.ts';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.ts';

export interface RateLimiterOptions {
  /** A lease unused this long is given back (its unused units return to the window). Default 250 ms. */
  readonly idleReleaseMs?: number;
  /** Window states kept (bounded memory). Default 100 000. */
  readonly maxScopes?: number;
  /** Requests sent in one TAKE at most. Default 1 000. */
  readonly maxBatch?: number;
  /** This process's clock: lease deadlines, known resets and the idle sweep (default `systemClock`). */
  readonly clock?: Clock;
  /**
   * The TAKE script's call (numkeys, keys, args → reply); default: the script on `redis`. A seam for
   * the unit tier, where the leases and windows are pinned on a fake clock without a Redis.
   */
  readonly take?: TakeCall;
}

export type TakeCall = (numkeys: number, ...keysAndArgs: string[]) => Promise<TakeReply>;

/** What a request of a key asks: its account, key, the Redis window records and both request rates (null = none). */
export interface RateRequest {
  readonly keyWindow: string | null;
  readonly keyRate: Rate | null;
  readonly accountWindow: string | null;
  readonly accountRate: Rate | null;
}

export type TakeResult =
  | { readonly kind: 'allow'; readonly key: RateView | null; readonly account: RateView | null }
  | { readonly kind: 'refuse'; readonly scope: RateScope; readonly retryAt: number }
  | { readonly kind: 'unavailable' };

interface Lease {
  /** Window start (server clock). */
  readonly window: number;
  readonly size: number;
  left: number;
  /** Local epoch ms until which the server's clock is certainly in the window. */
  readonly deadline: number;
  lastUse: number;
}

interface Scope {
  readonly rkey: string;
  limit: number;
  len: number;
  lease: Lease | null;
  /** Last counted units the server reported, and the local instant its window certainly ends. */
  counted: number;
  resetAt: number;
  /** Local epoch ms until which the window is known to be used up (0 = not known). */
  exhaustedUntil: number;
  /** Requests of batches in flight that use this scope (a scope is never evicted while > 0). */
  busy: number;
  /** Requests waiting in a batch that uses this scope (not yet sent). */
  queued: number;
}

interface Waiter {
  readonly resolve: (r: TakeResult) => void;
}

interface Batch {
  readonly key: Scope | null;
  readonly account: Scope | null;
  readonly waiters: Waiter[];
  inFlight: boolean;
}

const TAKE_COMMAND = 'keygateRateTake';

export type TakeReply = string[];

export class RateLimiter {
  readonly #redis: RedisClient;
  readonly #clock: Clock;
  readonly #now: () => number;
  readonly #take: TakeCall;
  readonly #idleMs: number;
  readonly #maxScopes: number;
  readonly #maxBatch: number;
  readonly #scopes = new Map<string, Scope>();
  readonly #batches = new Map<string, Batch>();
  readonly #sweep: TimerHandle;
  #closed = false;
  /** Why no command may go to Redis now (a Sentinel failover under way), or null. */
  #paused: string | null = null;
  /** Counters for tests and metrics. */
  readonly stats = { local: 0, calls: 0, callErrors: 0, refusedLocally: 0 };

  constructor(redis: RedisClient, opts: RateLimiterOptions = {}) {
    this.#redis = redis;
    this.#clock = opts.clock ?? systemClock;
    this.#now = this.#clock.now;
    this.#idleMs = opts.idleReleaseMs ?? 250;
    this.#maxScopes = opts.maxScopes ?? 100_000;
    this.#maxBatch = opts.maxBatch ?? 1000;
    if (opts.take === undefined && !(TAKE_COMMAND in redis)) redis.defineCommand(TAKE_COMMAND, { lua: TAKE });
    this.#take = opts.take ?? ((n, ...a) => (redis as unknown as Record<string, TakeCall>)[TAKE_COMMAND]!(n, ...a));
    this.#sweep = this.#clock.setInterval(() => this.#releaseIdle(), Math.max(50, this.#idleMs)).unref();
  }

  /**
   * Counts one request against its key's and account's request rates. Synchronous when the leases
   * decide (no Redis command), a promise when Redis must be asked. Never rejects.
   */
  take(req: RateRequest): TakeResult | Promise<TakeResult> {
    const now = this.#now();
    const ks = req.keyRate && req.keyWindow !== null ? this.#scope(req.keyWindow, req.keyRate) : null;
    const as = req.accountRate && req.accountWindow !== null ? this.#scope(req.accountWindow, req.accountRate) : null;
    if (ks === null && as === null) return ALLOW_UNLIMITED;
    const refused = this.#knownRefusal(ks, as, now);
    if (refused) {
      this.stats.refusedLocally++;
      return refused;
    }
    // Decided in memory when the leases cover it and no earlier request of these windows waits.
    if ((ks === null || ks.queued === 0) && (as === null || as.queued === 0) && covers(ks, now) && covers(as, now)) {
      this.stats.local++;
      return this.#allowFromLeases(ks, as, now);
    }
    if (this.#paused !== null) return UNAVAILABLE;
    const bkey = (ks ?? as)!.rkey + (ks && as ? `\n${as.rkey}` : '');
    return new Promise<TakeResult>((resolve) => {
      let b = this.#batches.get(bkey);
      if (b === undefined) {
        b = { key: ks, account: as, waiters: [], inFlight: false };
        this.#batches.set(bkey, b);
      }
      b.waiters.push({ resolve });
      queued(b, 1);
      if (!b.inFlight) {
        b.inFlight = true;
        queueMicrotask(() => void this.#flush(bkey, b));
      }
    });
  }

  /**
   * A request-rate refusal this sidecar already knows of (a window it saw used up, no lease left),
   * without counting anything: for naming the first used-up rate when a token rate refuses first.
   */
  peek(req: RateRequest): Extract<TakeResult, { kind: 'refuse' }> | null {
    const now = this.#now();
    const ks = req.keyRate && req.keyWindow !== null ? this.#scopes.get(req.keyWindow) ?? null : null;
    const as = req.accountRate && req.accountWindow !== null ? this.#scopes.get(req.accountWindow) ?? null : null;
    return this.#knownRefusal(ks, as, now) as Extract<TakeResult, { kind: 'refuse' }> | null;
  }

  /**
   * A Sentinel failover is under way (the store paused): until `resume`, no command goes to Redis;
   * requests the held leases cover are allowed, every other one is `unavailable` (fail closed).
   */
  pause(reason: string): void {
    this.#paused = reason;
  }

  /** The failover ended (the store follows the new master): commands go to Redis again. */
  resume(): void {
    this.#paused = null;
  }

  /** Why the limiter is paused (a Sentinel failover under way), or null. */
  get paused(): string | null {
    return this.#paused;
  }

  /** Gives back every lease (best effort) and stops the sweep. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#clock.clearInterval(this.#sweep);
    await Promise.allSettled([...this.#scopes.values()].map((s) => this.#release(s)));
  }

  /** Units of leases this sidecar holds unused and may still use: its local share if Redis went away now. */
  heldUnits(): number {
    const now = this.#now();
    let n = 0;
    for (const sc of this.#scopes.values()) if (sc.lease && now < sc.lease.deadline) n += sc.lease.left;
    return n;
  }

  /** The window states held (tests). */
  get scopeCount(): number {
    return this.#scopes.size;
  }

  #scope(rkey: string, rate: Rate): Scope {
    let s = this.#scopes.get(rkey);
    if (s === undefined) {
      if (this.#scopes.size >= this.#maxScopes) this.#evict();
      s = { rkey, limit: rate.count, len: UNIT_MS[rate.per], lease: null, counted: 0, resetAt: 0, exhaustedUntil: 0, busy: 0, queued: 0 };
      this.#scopes.set(rkey, s);
    } else if (s.limit !== rate.count || s.len !== UNIT_MS[rate.per]) {
      // The rate changed: what was learnt of the old one no longer decides (the lease stays counted).
      s.limit = rate.count;
      s.len = UNIT_MS[rate.per];
      s.exhaustedUntil = 0;
    }
    return s;
  }

  #evict(): void {
    for (const [k, s] of this.#scopes) {
      if (this.#scopes.size < this.#maxScopes) return;
      if (s.busy === 0 && s.queued === 0 && s.lease === null) this.#scopes.delete(k);
    }
    // Every state holds a lease or is busy: drop the oldest leases (their units stay counted: safe).
    for (const [k, s] of this.#scopes) {
      if (this.#scopes.size < this.#maxScopes) return;
      if (s.busy === 0 && s.queued === 0) this.#scopes.delete(k);
    }
  }

  /** Named after the key when its window refuses, else the account's; waits until the later of the refusing windows ends. */
  #knownRefusal(ks: Scope | null, as: Scope | null, now: number): TakeResult | null {
    const k = ks !== null && now < ks.exhaustedUntil && !covers(ks, now) ? ks.exhaustedUntil : 0;
    const a = as !== null && now < as.exhaustedUntil && !covers(as, now) ? as.exhaustedUntil : 0;
    if (k === 0 && a === 0) return null;
    return { kind: 'refuse', scope: k !== 0 ? 'key' : 'account', retryAt: Math.max(k, a) };
  }

  #allowFromLeases(ks: Scope | null, as: Scope | null, now: number): TakeResult {
    if (ks) use(ks.lease!, now);
    if (as) use(as.lease!, now);
    return { kind: 'allow', key: view(ks), account: view(as) };
  }

  async #flush(bkey: string, b: Batch): Promise<void> {
    // Serve what the leases cover first (a lease may have arrived while these waited).
    const now0 = this.#now();
    while (b.waiters.length > 0) {
      const refused = this.#knownRefusal(b.key, b.account, now0);
      if (refused) {
        queued(b, -b.waiters.length);
        for (const w of b.waiters.splice(0)) w.resolve(refused);
        break;
      }
      if (!(covers(b.key, now0) && covers(b.account, now0))) break;
      queued(b, -1);
      b.waiters.shift()!.resolve(this.#allowFromLeases(b.key, b.account, now0));
    }
    if (b.waiters.length === 0) {
      b.inFlight = false;
      this.#batches.delete(bkey);
      return;
    }
    const waiters = b.waiters.splice(0, this.#maxBatch);
    const n = waiters.length;
    queued(b, -n);
    const scopes = [b.key, b.account].filter((s): s is Scope => s !== null);
    const keys: string[] = [];
    const args: string[] = [String(n)];
    const parts: Array<{ s: Scope; covered: number; lease: Lease | null; released: boolean }> = [];
    for (const s of scopes) {
      s.busy++;
      let lease = s.lease;
      if (lease !== null && now0 >= lease.deadline) lease = s.lease = null; // its window ended: nothing to give back
      const covered = lease ? Math.min(n, lease.left) : 0;
      if (lease) lease.left -= covered;
      // A lease this batch exhausts is given back in the same call (all of it counted: unused 0).
      const released = lease !== null && lease.left === 0;
      if (released) s.lease = null;
      keys.push(s.rkey);
      const pool = leasePool(s.limit);
      args.push(
        String(s.limit),
        String(s.len),
        String(pool),
        String(covered),
        released ? String(lease!.size) : '0',
        released ? String(lease!.window) : '0',
        '0',
        String(pool > 0 && s.lease === null ? pool : 0),
      );
      parts.push({ s, covered, lease, released });
    }
    const sentAt = this.#now();
    let reply: TakeReply | null = null;
    if (this.#paused === null) {
      try {
        this.stats.calls++;
        reply = await this.#take(keys.length, ...keys, ...args);
      } catch {
        this.stats.callErrors++;
      }
    }
    // Paused (a failover began while these waited): nothing was sent; answered as a failed call.
    const recvAt = this.#now();
    for (const p of parts) p.s.busy--;
    if (reply === null) {
      // Whether the script ran is unknown. Units set aside from a lease that was kept go back to it
      // (Redis counted them when leasing and, without a release, never gives them back). A lease
      // given back in this call stays given back: its units may have returned to the window.
      for (const p of parts) {
        if (p.lease && !p.released && p.covered > 0) p.lease.left += p.covered;
      }
      for (const w of waiters) {
        if (covers(b.key, recvAt) && covers(b.account, recvAt)) w.resolve(this.#allowFromLeases(b.key, b.account, recvAt));
        else w.resolve(UNAVAILABLE);
      }
    } else {
      const serverNow = Number(reply[0]);
      const k = Number(reply[1]);
      parts.forEach((p, i) => {
        const at = 2 + i * 5;
        const wstart = Number(reply![at]);
        const wend = Number(reply![at + 1]);
        const counted = Number(reply![at + 2]);
        const extra = Number(reply![at + 4]);
        const s = p.s;
        s.counted = counted;
        // Certainly ended (server clock ≥ wend) from this local instant on: for refusals and resets.
        s.resetAt = recvAt + (wend - serverNow);
        if (p.covered > k) {
          // Units set aside but not used by this batch: back to the lease (a released lease's went back to the window).
          if (!p.released && p.lease) p.lease.left += p.covered - k;
        }
        if (extra > 0) {
          // Usable while the server's clock is certainly inside the window.
          const lease: Lease = { window: wstart, size: extra, left: extra, deadline: sentAt + (wend - serverNow), lastUse: recvAt };
          // A concurrent batch (another key of the account) got a lease first: give this one back.
          if (s.lease !== null && recvAt < s.lease.deadline && s.lease.left > 0) void this.#giveBack(s, lease);
          else s.lease = lease;
        }
        const leaseLeft = s.lease && recvAt < s.lease.deadline ? s.lease.left : 0;
        s.exhaustedUntil = counted >= s.limit && leaseLeft === 0 ? s.resetAt : 0;
      });
      for (let i = 0; i < n; i++) {
        if (i < k) waiters[i]!.resolve({ kind: 'allow', key: view(b.key), account: view(b.account) });
        else waiters[i]!.resolve(this.#refusalAfter(b, recvAt));
      }
    }
    if (b.waiters.length > 0) {
      queueMicrotask(() => void this.#flush(bkey, b));
    } else {
      b.inFlight = false;
      this.#batches.delete(bkey);
    }
  }

  #refusalAfter(b: Batch, now: number): TakeResult {
    const r = this.#knownRefusal(b.key, b.account, now);
    if (r) return r;
    // Refused by a window this sidecar does not see as used up (a lease another batch got meanwhile,
    // or a batch larger than what remained): named after and waiting for the windows the server
    // reported full, the later of them; with neither, the key's (else the account's) reset.
    const full = [b.key, b.account].filter((s): s is Scope => s !== null && s.counted >= s.limit);
    const s = full[0] ?? b.key ?? b.account!;
    const resetAt = full.length > 0 ? Math.max(...full.map((f) => f.resetAt)) : s.resetAt;
    return { kind: 'refuse', scope: s === b.key ? 'key' : 'account', retryAt: Math.max(now + 1, resetAt) };
  }

  /** Gives back leases unused for `idleMs` (their unused units return to the window for the others). */
  #releaseIdle(): void {
    // During an outage or a failover a lease is the local share: keep it.
    if (this.#redis.status !== 'ready' || this.#paused !== null) return;
    const now = this.#now();
    for (const [k, s] of this.#scopes) {
      if (s.busy > 0 || s.queued > 0) continue;
      const l = s.lease;
      if (l === null) {
        if (now >= s.exhaustedUntil) this.#scopes.delete(k); // no lease, not known used up: nothing worth keeping
        continue;
      }
      if (now >= l.deadline) {
        s.lease = null;
        continue;
      }
      if (now - l.lastUse >= this.#idleMs) void this.#release(s);
    }
  }

  async #release(s: Scope): Promise<void> {
    const l = s.lease;
    if (l === null || s.busy > 0) return;
    s.lease = null;
    await this.#giveBack(s, l);
  }

  /** Returns a lease no longer held locally: its unused units go back to the window. */
  async #giveBack(s: Scope, l: Lease): Promise<void> {
    // Ended, or a failover under way (not given back: the units stay counted, fewer allowed, never more).
    if (this.#now() >= l.deadline || this.#paused !== null) return;
    s.busy++;
    try {
      this.stats.calls++;
      await this.#take(
        1, s.rkey, '0', String(s.limit), String(s.len), String(leasePool(s.limit)), '0', String(l.size), String(l.window), String(l.left), '0',
      );
    } catch {
      // Not given back: the units stay counted (fewer allowed, never more).
      this.stats.callErrors++;
    } finally {
      s.busy--;
    }
  }
}

const ALLOW_UNLIMITED: TakeResult = Object.freeze({ kind: 'allow', key: null, account: null });
const UNAVAILABLE: TakeResult = Object.freeze({ kind: 'unavailable' });

function queued(b: Batch, n: number): void {
  if (b.key) b.key.queued += n;
  if (b.account) b.account.queued += n;
}

/** True when the scope is absent (no rate) or its lease can pay one request now. */
function covers(s: Scope | null, now: number): boolean {
  if (s === null) return true;
  const l = s.lease;
  return l !== null && l.left > 0 && now < l.deadline;
}

function use(l: Lease, now: number): void {
  l.left--;
  l.lastUse = now;
}

/** The window as this sidecar knows it: units counted by the server that are not its own unused lease. */
function view(s: Scope | null): RateView | null {
  if (s === null) return null;
  const own = s.lease ? s.lease.left : 0;
  return { limit: s.limit, remaining: Math.max(0, s.limit - s.counted + own), resetAt: s.resetAt };
}

