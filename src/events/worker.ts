/**
 * The delivery worker (run by `keygate console`, hence `keygate dev`; never by the sidecar):
 *
 * - Per endpoint × account, a cursor (the last stream entry handled) and a lease (SET NX PX): one
 *   console delivers a pair at a time, one event at a time, in stream order. An event that fails
 *   holds back the later ones; it is retried after the schedule's delays, then dead-lettered and the
 *   cursor moves on. The cursor moves only after a 2xx, so a console stopped mid-delivery leaves the
 *   event to be delivered again when its lease runs out (at least once; receivers de-duplicate on id).
 * - Only accounts with due work are read: the due set (`{wh}:due`, account → when to look next;
 *   0 = now) is written by every publisher after its event (`wakeAccounts`), and by the worker itself:
 *   a pass claims the due accounts (their score moved a lease ahead, so two consoles never examine
 *   one at once and a console that dies only delays it), reads each one's stream head and states,
 *   starts the pairs due now, then reschedules the account at its earliest retry or removes it when
 *   every endpoint is caught up — only if its score is still the claim (a wake-up written meanwhile
 *   wins). A delivery run wakes its account when it ends. A slow sweep (`sweepMs`, and once at start)
 *   walks every account as a safety net for a wake-up lost between a write and its wake-up.
 * - Every pass also tells `key.expired` for keys whose expiry passed (a sorted set; the member
 *   removed by exactly one console), delivers replays, and disables an endpoint that has failed
 *   without a success for `disableAfterMs` (publishing `webhook.disabled`).
 * - Once, at the first start on a store (`{wh}:expiries:filled` unset), in the background: the keys
 *   made before events existed get their entry in the expiries set (`fillExpiries`).
 * - Bounded: deliveries in flight (`concurrency`), each attempt's time and answer size, events per lease.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { eventsSchema, NO_ACCOUNT, type EventsSchema } from '../schema/events.ts';
import { scanPrefix } from '../store/scan.ts';
import { parseKeyRecord, schema as keySchema, type Schema } from '../schema/redis-schema.ts';
import type { WebhookConfig } from './config.ts';
import { deliverOnce, type AttemptResult } from './http-delivery.ts';
import { EventPublisher, wakeAccounts } from './publish.ts';
import { systemResolver, type Resolver } from './ssrf.ts';
import { eventFromEntry, type EventJson } from './types.ts';
import { WebhookStore, type Endpoint } from './webhooks.ts';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.ts';

type RedisClient = Redis | Cluster;
type ActiveEndpoint = Endpoint & { readonly secret: string };

export interface DeliveryState {
  /** The last stream entry id handled (delivered, skipped by the filter, or dead-lettered). */
  readonly cursor: string;
  readonly attempts: number;
  readonly nextAt: number;
  readonly lastError?: string;
}

export interface WorkerOptions {
  readonly redis: RedisClient;
  readonly namespace: string;
  readonly webhooks: WebhookStore;
  readonly config: WebhookConfig;
  readonly log: Logger;
  /** How often a pass runs (default 1000 ms; key.expired is told within this plus a pass's time). */
  readonly pollMs?: number;
  /** How long a pair's lease lasts; a console that stops mid-delivery is replaced after it (default 30 s). */
  readonly leaseMs?: number;
  /** DNS seam for tests. */
  readonly resolve?: Resolver;
  /** How often every account is walked for work whose wake-up was lost (default 5 min; also once at start). */
  readonly sweepMs?: number;
  /** The passes' timer and the stop's bound run on it (default `systemClock`; the schedule's instants are the Redis server's). */
  readonly clock?: Clock;
}

/** Owner-checked lease steps. KEYS: lease, state. ARGV: token, [endpoint id, state JSON]. */
const SAVE_IF_OWNER = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1`;
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`;

const EVENTS_PER_LEASE = 50;
/** Due accounts claimed per call. */
const CLAIM_BATCH = 200;

/**
 * Claims the due accounts. KEYS: due set. ARGV: now, claim score, at most. Each claimed account's
 * score becomes the claim (a lease ahead, with a .5 no wake-up or retry time has) → the accounts.
 */
const CLAIM = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, a in ipairs(due) do redis.call('ZADD', KEYS[1], ARGV[2], a) end
return due`;
/**
 * Settles a claimed account, if its score is still the claim. KEYS: due set. ARGV: account, claim
 * score, next score ('' = nothing left: removed). → 1 settled, 0 woken meanwhile (left due).
 */
const SETTLE = `
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not cur or tonumber(cur) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then redis.call('ZREM', KEYS[1], ARGV[1]) else redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) end
return 1`;

export class DeliveryWorker {
  readonly #o: WorkerOptions;
  readonly #s: EventsSchema;
  readonly #ks: Schema;
  readonly #pub: EventPublisher;
  readonly #resolve: Resolver;
  readonly #token = randomBytes(12).toString('hex');
  readonly #pollMs: number;
  readonly #leaseMs: number;
  readonly #sweepMs: number;
  /** When the next sweep is due (server clock); 0: at the first pass. */
  #nextSweep = 0;
  readonly #clock: Clock;
  #timer: TimerHandle | undefined;
  #running: Promise<void> | undefined;
  #filling: Promise<void> | undefined;
  #stopped = false;
  #inFlight = 0;
  readonly #busy = new Set<string>();
  readonly #tasks = new Set<Promise<void>>();

  constructor(o: WorkerOptions) {
    this.#o = o;
    this.#s = eventsSchema(o.namespace);
    this.#ks = keySchema(o.namespace);
    this.#pub = new EventPublisher(o.redis, o.namespace);
    this.#resolve = o.resolve ?? systemResolver;
    this.#pollMs = o.pollMs ?? 1000;
    this.#leaseMs = o.leaseMs ?? 30_000;
    this.#sweepMs = o.sweepMs ?? 300_000;
    this.#clock = o.clock ?? systemClock;
  }

  start(): void {
    const loop = () => {
      if (this.#stopped) return;
      this.#running = this.pass()
        .catch((err: unknown) => this.#o.log.warn({ err: { message: (err as Error)?.message?.slice(0, 200) } }, 'webhook pass failed'))
        .finally(() => {
          if (!this.#stopped) this.#timer = this.#clock.setTimeout(loop, this.#pollMs);
        });
    };
    this.#timer = this.#clock.setTimeout(loop, 0);
    this.#filling = this.fillExpiries()
      .then((n) => {
        if (n > 0) this.#o.log.info({ keys: n }, 'key expiries of keys made before events filled in');
      })
      .catch((err: unknown) => this.#o.log.warn({ err: { message: (err as Error)?.message?.slice(0, 200) } }, 'filling key expiries failed (tried again at the next start)'));
  }

  /**
   * Keys made before events existed have no entry in the expiries set, so `key.expired` would never
   * be told for them. Once per store (`{wh}:expiries:filled` marks it done; a console stopped before
   * the end leaves it to the next start): every account's active keys (SCAN of the `acctactive:`
   * sets, 200 names a step, on each master of a Cluster; at most an account's active keys read at a
   * time) whose expiry is still ahead get their entry, `ZADD NX` (an entry already there is kept).
   * A key whose expiry passed before this is not told late. → the entries added.
   */
  async fillExpiries(): Promise<number> {
    const r = this.#o.redis;
    if ((await r.exists(this.#s.expiriesFilled())) === 1) return 0;
    const now = await this.#now();
    const prefix = this.#ks.accountActiveKeys('');
    let added = 0;
    for await (const name of scanPrefix(r, prefix)) {
      if (this.#stopped) return added;
      const account = name.slice(prefix.length);
      const ids = await r.smembers(name);
      const digests = await Promise.all(ids.map((id) => r.get(this.#ks.keyIdIndex(id))));
      const records = await Promise.all(digests.map((d) => (d === null ? null : r.hgetall(this.#ks.keyRecord(d)))));
      for (const raw of records) {
        const rec = raw === null ? null : parseKeyRecord(raw);
        if (rec === null || typeof rec === 'string' || rec.status !== 'active' || rec.expiresAt === null || rec.expiresAt <= now || rec.account !== account) continue;
        added += Number(await r.zadd(this.#s.expiries(), 'NX', String(rec.expiresAt), `${account} ${rec.id}`));
      }
    }
    await r.set(this.#s.expiriesFilled(), String(now));
    return added;
  }

  /** Stops passes; waits (bounded) for deliveries in flight. An event whose attempt was cut is delivered again later. */
  async stop(timeoutMs = 5000): Promise<void> {
    this.#stopped = true;
    this.#clock.clearTimeout(this.#timer);
    const all = Promise.allSettled([this.#running, this.#filling, ...this.#tasks]);
    let t: TimerHandle | undefined;
    await Promise.race([all, new Promise((r) => (t = this.#clock.setTimeout(() => r(undefined), timeoutMs)))]);
    this.#clock.clearTimeout(t);
  }

  async #now(): Promise<number> {
    const [s, us] = (await this.#o.redis.time()) as unknown as [string, string];
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  /** One pass: expiries, replays, the sweep when due, then the due accounts' pairs, started up to the concurrency bound. */
  async pass(): Promise<void> {
    const now = await this.#now();
    await this.#expiries(now);
    const endpoints = await this.#o.webhooks.active();
    if (endpoints.length === 0) return;
    const failedOut = (e: Endpoint) => failedOutAt(e.failingSince, now, this.#o.config.disableAfterMs);
    for (const e of endpoints) if (failedOut(e)) await this.#disable(e, now);
    const live = endpoints.filter((e) => !failedOut(e));
    for (const e of live) if ((await this.#o.redis.llen(this.#s.replay(e.id))) > 0) this.#spawn(`replay ${e.id}`, () => this.#replays(e));
    if (now >= this.#nextSweep) {
      await this.#sweep(live);
      this.#nextSweep = now + this.#sweepMs;
    }
    const r = this.#o.redis;
    while (!this.#stopped && this.#inFlight < this.#o.config.concurrency) {
      const claim = String(now + this.#leaseMs + 0.5);
      const accounts = (await r.eval(CLAIM, 1, this.#s.due(), String(now), claim, String(CLAIM_BATCH))) as string[];
      for (const account of accounts) {
        // One account that cannot be examined stays claimed (looked at again after a lease) and holds back no other.
        await this.#examine(account, live, now, claim).catch((err: unknown) => this.#warnAccount(account, err));
      }
      if (accounts.length < CLAIM_BATCH) break;
    }
  }

  /** What each endpoint of a claimed account needs now: deliveries started, the account rescheduled or settled. */
  async #examine(account: string, live: ActiveEndpoint[], now: number, claim: string): Promise<void> {
    const r = this.#o.redis;
    const mine = live.filter((e) => e.account === null || e.account === account);
    let next = Infinity;
    let running = false;
    for (const [e, st] of await this.#behind(account, mine)) {
      if (st.nextAt > now) next = Math.min(next, st.nextAt);
      else if (this.#spawn(`${account} ${e.id}`, () => this.#deliverPair(account, e))) running = true;
      else next = 0; // deliveries at the bound: looked at again by the next pass
    }
    // A delivery run wakes its account when it ends; until then the claim stands (a lease ahead).
    if (running) return;
    await r.eval(SETTLE, 1, this.#s.due(), account, claim, next === Infinity ? '' : String(next));
  }

  /** The endpoints of `mine` behind the account's stream head, with their states. */
  async #behind(account: string, mine: ActiveEndpoint[]): Promise<Array<[ActiveEndpoint, DeliveryState]>> {
    if (mine.length === 0) return [];
    const last = await this.#o.redis.xrevrange(this.#s.stream(account), '+', '-', 'COUNT', 1);
    if (last.length === 0) return [];
    const lastId = last[0]![0];
    const states = await this.#o.redis.hmget(this.#s.deliveryState(account), ...mine.map((e) => e.id));
    const out: Array<[ActiveEndpoint, DeliveryState]> = [];
    mine.forEach((e, i) => {
      const st = this.#state(e, states[i] ?? null);
      if (compareIds(st.cursor, lastId) < 0) out.push([e, st]);
    });
    return out;
  }

  /** The safety net: every account with an endpoint behind its stream is woken (due now). */
  async #sweep(live: ActiveEndpoint[]): Promise<void> {
    let cursor = '0';
    do {
      const [next, accounts] = await this.#o.redis.sscan(this.#s.accounts(), cursor, 'COUNT', 500);
      cursor = next;
      const woken: string[] = [];
      for (const account of accounts) {
        try {
          if ((await this.#behind(account, live.filter((e) => e.account === null || e.account === account))).length > 0) woken.push(account);
        } catch (err) {
          this.#warnAccount(account, err); // the rest of the sweep goes on
        }
      }
      await wakeAccounts(this.#o.redis, this.#o.namespace, woken);
    } while (cursor !== '0' && !this.#stopped);
  }

  #warnAccount(account: string, err: unknown): void {
    this.#o.log.warn({ account, err: { message: (err as Error)?.message?.slice(0, 200) } }, 'webhook account examination failed');
  }

  /** Starts a delivery run of a pair; true when it runs (started now, or already running here). */
  #spawn(key: string, fn: () => Promise<void>): boolean {
    if (this.#busy.has(key)) return true;
    if (this.#inFlight >= this.#o.config.concurrency || this.#stopped) return false;
    this.#busy.add(key);
    this.#inFlight++;
    const p = fn()
      .catch((err: unknown) => this.#o.log.warn({ err: { message: (err as Error)?.message?.slice(0, 200) } }, 'webhook delivery step failed'))
      .finally(() => {
        this.#busy.delete(key);
        this.#inFlight--;
        this.#tasks.delete(p);
      });
    this.#tasks.add(p);
    return true;
  }

  #state(e: Endpoint, raw: string | null): DeliveryState {
    if (raw !== null) {
      try {
        return JSON.parse(raw) as DeliveryState;
      } catch {
        /* rewritten below */
      }
    }
    return { cursor: startCursor(e.createdAt), attempts: 0, nextAt: 0 };
  }

  async #deliverPair(account: string, e: ActiveEndpoint): Promise<void> {
    const r = this.#o.redis;
    const lease = this.#s.lease(account, e.id);
    const stateKey = this.#s.deliveryState(account);
    if ((await r.set(lease, this.#token, 'PX', this.#leaseMs, 'NX')) !== 'OK') return;
    try {
      let st = this.#state(e, await r.hget(stateKey, e.id));
      for (let n = 0; n < EVENTS_PER_LEASE && !this.#stopped; n++) {
        const now = await this.#now();
        if (st.nextAt > now) return;
        const entries = await r.xrange(this.#s.stream(account), `(${st.cursor}`, '+', 'COUNT', 20);
        if (entries.length === 0) return;
        let target: { id: string; event: EventJson } | null = null;
        let skipTo = st.cursor;
        for (const [id, fields] of entries) {
          const ev = eventFromEntry(id, fields, account);
          if (ev !== null && (e.events === null || e.events.includes(ev.type))) {
            target = { id, event: ev };
            break;
          }
          skipTo = id;
        }
        if (target === null) {
          st = { cursor: skipTo, attempts: 0, nextAt: 0 };
          if (!(await this.#save(lease, stateKey, e.id, st))) return;
          continue;
        }
        const result = await this.#attempt(e, target.event);
        if (result.ok) {
          st = { cursor: target.id, attempts: 0, nextAt: 0 };
          if (!(await this.#save(lease, stateKey, e.id, st))) return;
          if (e.failingSince !== null) await this.#o.webhooks.update(e.id, { failingSince: null });
          continue;
        }
        const attempts = st.attempts + 1;
        const retryAt = nextAttemptAt(this.#o.config.retryScheduleSeconds, attempts, now);
        if (e.failingSince === null) await this.#o.webhooks.update(e.id, { failingSince: now });
        if (retryAt === null) {
          await this.#o.webhooks.addDead(e.id, { event: target.event, attempts, lastError: result.error, deadAt: now });
          st = { cursor: target.id, attempts: 0, nextAt: 0 };
          this.#o.log.warn({ webhook: e.id, event: target.event.id, attempts }, 'webhook event dead-lettered');
          if (!(await this.#save(lease, stateKey, e.id, st))) return;
          continue;
        }
        st = { cursor: st.cursor, attempts, nextAt: retryAt, lastError: result.error };
        await this.#save(lease, stateKey, e.id, st);
        return;
      }
    } finally {
      await r.eval(RELEASE, 1, lease, this.#token);
      // The account is looked at again by the next pass (more events, a retry's time, or caught up).
      await wakeAccounts(r, this.#o.namespace, [account]);
    }
  }

  async #save(lease: string, stateKey: string, endpointId: string, st: DeliveryState): Promise<boolean> {
    return (await this.#o.redis.eval(SAVE_IF_OWNER, 2, lease, stateKey, this.#token, endpointId, JSON.stringify(st))) === 1;
  }

  #attempt(e: ActiveEndpoint, ev: EventJson): Promise<AttemptResult> {
    const c = this.#o.config;
    return deliverOnce(e.url, e.secret, ev.id, JSON.stringify(ev), { allowPrivate: c.allowPrivate, timeoutMs: c.timeoutMs, resolve: this.#resolve });
  }

  async #replays(e: ActiveEndpoint): Promise<void> {
    const r = this.#o.redis;
    const lease = this.#s.replayLease(e.id);
    if ((await r.set(lease, this.#token, 'PX', this.#leaseMs, 'NX')) !== 'OK') return;
    try {
      for (let n = 0; n < EVENTS_PER_LEASE && !this.#stopped; n++) {
        const raw = await r.lindex(this.#s.replay(e.id), -1);
        if (raw === null) return;
        let d: { event: EventJson; attempts: number };
        try {
          d = JSON.parse(raw) as { event: EventJson; attempts: number };
        } catch {
          await r.lrem(this.#s.replay(e.id), 1, raw);
          continue;
        }
        const result = await this.#attempt(e, d.event);
        await r.lrem(this.#s.replay(e.id), 1, raw);
        if (!result.ok) await this.#o.webhooks.addDead(e.id, { event: d.event, attempts: d.attempts + 1, lastError: result.error, deadAt: await this.#now() });
        // A replay answered 2xx is a success of the endpoint, as a delivery is: no longer failing.
        else if ((await this.#o.webhooks.get(e.id).catch(() => null))?.failingSince != null) await this.#o.webhooks.update(e.id, { failingSince: null });
      }
    } finally {
      await r.eval(RELEASE, 1, lease, this.#token);
    }
  }

  async #disable(e: Endpoint, now: number): Promise<void> {
    await this.#o.webhooks.update(e.id, { status: 'disabled', disabledAt: now });
    this.#o.log.warn({ webhook: e.id }, 'webhook endpoint disabled: failing without a success');
    await this.#pub.publish(e.account, 'webhook.disabled', { webhook_id: e.id, url: redactedUrl(e.url), failing_since: new Date(e.failingSince!).toISOString() });
  }

  /** key.expired for keys whose expiry passed: the console that removes the member tells it. */
  async #expiries(now: number): Promise<void> {
    const r = this.#o.redis;
    const due = await r.zrangebyscore(this.#s.expiries(), '-inf', String(now), 'LIMIT', 0, 200);
    for (const member of due) {
      if ((await r.zrem(this.#s.expiries(), member)) !== 1) continue;
      const [account, keyId] = member.split(' ');
      if (!account || !keyId) continue;
      try {
        const digest = await r.get(this.#ks.keyIdIndex(keyId));
        const rec = digest === null ? null : parseKeyRecord(await r.hgetall(this.#ks.keyRecord(digest)));
        if (rec === null || typeof rec === 'string' || rec.status !== 'active' || rec.expiresAt === null || rec.expiresAt > now) continue;
        await this.#pub.publish(account, 'key.expired', {
          key_id: rec.id,
          name: rec.name,
          hint: rec.hint,
          expires_at: new Date(rec.expiresAt).toISOString(),
        });
      } catch (err) {
        await r.zadd(this.#s.expiries(), String(now), member); // told on a later pass
        throw err;
      }
    }
  }
}

/**
 * When an event that failed its `attempts`-th attempt at `now` is tried again: after the schedule's
 * delay for that attempt (seconds); null once the schedule is used up (the event is dead-lettered).
 */
export function nextAttemptAt(scheduleSeconds: readonly number[], attempts: number, now: number): number | null {
  return attempts > scheduleSeconds.length ? null : now + Math.round(scheduleSeconds[attempts - 1]! * 1000);
}

/** An endpoint failing without a success since `failingSince` is disabled once `disableAfterMs` has passed. */
export function failedOutAt(failingSince: number | null, now: number, disableAfterMs: number): boolean {
  return failingSince !== null && now - failingSince >= disableAfterMs;
}

/**
 * A new endpoint's cursor: the last possible stream id before its creation's millisecond, so an event
 * written in that millisecond after the endpoint (id `<creation ms>-<seq>`) is delivered. (Starting at
 * `<creation ms>-0` lost such an event: the cursor is the last entry handled.) An event written in that
 * same millisecond just before the endpoint may be delivered too.
 */
export function startCursor(createdAt: number): string {
  return `${createdAt - 1}-18446744073709551615`;
}

/**
 * An endpoint's URL as an event tells it (`webhook.disabled` goes to other receivers): its origin
 * only. A receiver's token may sit in the path (Slack's and Discord's webhook URLs), the query
 * string, the fragment or the user info; the event's `webhook_id` names the endpoint.
 */
export function redactedUrl(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '';
  }
}

/** Orders stream ids `<ms>-<seq>`. */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am === bm ? (as === bs ? 0 : as < bs ? -1 : 1) : am < bm ? -1 : 1;
}

export { NO_ACCOUNT };
