/**
 * Publishing events from TypeScript, and the settings the alert fragments read.
 *
 * A Lua script that publishes (src/schema/event-scripts.ts) gets `eventKeysFor(...)` appended to its KEYS and the
 * account as its last ARGV; `eventKeysFor` first runs `noteAccount` (the list of accounts with a
 * stream, which the delivery worker's slow sweep walks, is written before the stream: an account in
 * the list may have no events yet, never the reverse — the same rule as the usage export's account
 * list), and after it `wakeAccounts` when the script reports events written: the account is put in
 * the due set the worker reads each pass (written after the stream: a woken account always finds its
 * event). A wake-up lost (a publisher dying between the two) is made good by the sweep.
 *
 * Events published here (not in the change's own script) come right after the change; a crash
 * between the two loses that one event (documented).
 */
import type { Redis, Cluster } from 'ioredis';
import { AlertField, EVENT_STREAM_MAXLEN, EventField, eventsSchema, NO_ACCOUNT, type EventsSchema } from '../schema/events.ts';
import type { KeyRecord } from '../schema/redis-schema.ts';
import { DEFAULT_KEY_THRESHOLDS } from '../schema/event-scripts.ts';
import { eventId, type EventType } from './types.ts';

type RedisClient = Redis | Cluster;

export class EventPublisher {
  readonly redis: RedisClient;
  readonly s: EventsSchema;
  readonly #ns: string;

  constructor(redis: RedisClient, namespace: string) {
    this.redis = redis;
    this.#ns = namespace;
    this.s = eventsSchema(namespace);
  }

  /** Adds the account to the list the delivery worker walks (once per client, namespace and account, bounded). */
  noteAccount(account: string): Promise<void> {
    return noteAccount(this.redis, this.#ns, account);
  }

  /** Publishes one event; returns its id. `data` must hold public fields only (never key material). */
  async publish(account: string | null, type: EventType, data: Record<string, unknown>): Promise<string> {
    const acct = account ?? NO_ACCOUNT;
    await this.noteAccount(acct);
    const id = await this.redis.xadd(this.s.stream(acct), 'MAXLEN', '~', String(EVENT_STREAM_MAXLEN), '*', EventField.type, type, EventField.account, acct, EventField.data, JSON.stringify(data));
    await wakeAccounts(this.redis, this.#ns, [acct]);
    return eventId(String(id), acct);
  }

  // ---- key events --------------------------------------------------------------------------

  async keyEvent(type: 'key.created' | 'key.revoked' | 'key.expired', r: KeyRecord, extra: Record<string, unknown> = {}): Promise<void> {
    await this.publish(r.account, type, { ...keyData(r), ...extra });
    await this.trackExpiry(r);
  }

  async keyRolled(old: KeyRecord, fresh: KeyRecord, graceSeconds: number): Promise<void> {
    await this.publish(old.account, 'key.rolled', { key_id: old.id, rolled_to: fresh.id, grace_seconds: graceSeconds, new_key: keyData(fresh) });
    await Promise.all([this.trackExpiry(old), this.trackExpiry(fresh)]);
  }

  /** key.expired is told by the worker from this sorted set: an active key with an expiry is in it. */
  async trackExpiry(r: KeyRecord): Promise<void> {
    const member = `${r.account} ${r.id}`;
    if (r.status === 'active' && r.expiresAt !== null) await this.redis.zadd(this.s.expiries(), String(r.expiresAt), member);
    else await this.redis.zrem(this.s.expiries(), member);
  }

  // ---- alert settings (set by the console: src/console/alerts.ts) ----------------------------

  async alerts(account: string): Promise<{ walletLowMicros: number | null }> {
    const v = await this.redis.hget(this.s.alerts(account), AlertField.walletLow);
    return { walletLowMicros: v === null ? null : Number(v) };
  }

  /** The key's limit thresholds in percent (the default when none are set; [] = none). */
  async keyThresholds(account: string, keyId: string): Promise<number[]> {
    const v = await this.redis.hget(this.s.alerts(account), AlertField.keyThresholds(keyId));
    if (v === null) return [...DEFAULT_KEY_THRESHOLDS];
    return v === '' ? [] : v.split(',').map(Number);
  }
}

/** The public fields of a key in an event: never the plaintext, the envelope or the digest. */
export function keyData(r: KeyRecord): Record<string, unknown> {
  return {
    key_id: r.id,
    name: r.name,
    hint: r.hint,
    status: r.status,
    models: r.models,
    expires_at: r.expiresAt === null ? null : new Date(r.expiresAt).toISOString(),
  };
}

/** Per client: the "namespace account" pairs already in their namespace's list of accounts with events. */
const notedBy = new WeakMap<object, Set<string>>();

/** Adds the account to the namespace's list the delivery worker's sweep walks (once per client, namespace and account; bounded). */
export async function noteAccount(redis: RedisClient, namespace: string, account: string): Promise<void> {
  let noted = notedBy.get(redis);
  if (!noted) notedBy.set(redis, (noted = new Set()));
  const member = `${namespace} ${account}`;
  if (noted.has(member)) return;
  await redis.sadd(eventsSchema(namespace).accounts(), account);
  if (noted.size >= 10_000) noted.clear();
  noted.add(member);
}

/**
 * For a money script that publishes: lists the account for the delivery worker (`noteAccount`) and
 * returns the two KEYS to append (the event stream, the alerts hash).
 */
export async function eventKeysFor(redis: RedisClient, namespace: string, account: string): Promise<[string, string]> {
  await noteAccount(redis, namespace, account);
  const s = eventsSchema(namespace);
  return [s.stream(account), s.alerts(account)];
}

/**
 * Puts accounts whose streams just got events in the delivery worker's due set (score 0: due now),
 * after the write. Never throws: the events are written, and a wake-up that did not reach Redis is
 * made good by the worker's sweep (every 5 minutes; docs/events.md "Delivery").
 */
export async function wakeAccounts(redis: RedisClient, namespace: string, accounts: readonly string[]): Promise<void> {
  if (accounts.length === 0) return;
  await redis.zadd(eventsSchema(namespace).due(), ...accounts.flatMap((a) => ['0', a])).catch(() => {});
}

/** The number of events a publishing money script reports having written (its reply's `at`-th element). */
export function eventsWritten(reply: unknown, at: number): number {
  return Array.isArray(reply) && reply[0] === 'OK' ? Number(reply[at] ?? 0) || 0 : 0;
}
