/**
 * Webhook endpoints: per account (its events) or for all accounts (`account: null`). The secret is
 * shown once at creation and stored sealed with the console's reveal key (AES-256-GCM envelope of
 * src/keys/crypto.ts, bound to the endpoint id), because delivery must sign with it: a Redis dump
 * alone does not give the secrets. Dead letters and replays are per endpoint.
 *
 * This is the library's side: the endpoint record's codec, the reads, and the delivery worker's
 * writes (failure state, dead letters). The changes people make (create, remove, replay) are console
 * resources, validated and audited in their own script: src/console/webhooks.ts.
 */
import type { Cluster, Redis } from 'ioredis';
import { openSecret, parseKeyring, REVEAL_KEY_ENV, RevealKeyError, sealSecret, type Keyring } from '../keys/crypto.ts';
import { DEAD_LETTERS_KEPT, eventsSchema, type EventsSchema } from '../schema/events.ts';
import { systemResolver, type Resolver } from './ssrf.ts';
import type { EventJson } from './types.ts';

type RedisClient = Redis | Cluster;

export const SECRET_PREFIX = 'whsec_';

export interface Endpoint {
  readonly id: string;
  readonly url: string;
  /** null = every account. */
  readonly account: string | null;
  /** null = every event type. */
  readonly events: readonly string[] | null;
  readonly status: 'active' | 'disabled';
  readonly createdAt: number;
  /** The first failure since the last success (null while delivering fine). */
  readonly failingSince: number | null;
  readonly disabledAt: number | null;
}

/** An endpoint record as stored: its secret sealed. */
export interface StoredEndpoint extends Endpoint {
  readonly secret: string;
}

export interface DeadLetter {
  readonly event: EventJson;
  readonly attempts: number;
  readonly lastError: string;
  readonly deadAt: number;
}

/** Writes the endpoint record only while it exists (a removal is never undone by a worker's update). */
const UPDATE_IF_EXISTS = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]); return 1 end
return 0`;

export function parseEndpoint(id: string, text: string): StoredEndpoint | null {
  try {
    const d = JSON.parse(text) as Record<string, unknown>;
    if (typeof d.url !== 'string' || typeof d.secret !== 'string') return null;
    return {
      id,
      url: d.url,
      account: typeof d.account === 'string' && d.account !== '' ? d.account : null,
      events: Array.isArray(d.events) ? (d.events as string[]) : null,
      status: d.status === 'disabled' ? 'disabled' : 'active',
      createdAt: Number(d.created_at),
      failingSince: typeof d.failing_since === 'number' ? d.failing_since : null,
      disabledAt: typeof d.disabled_at === 'number' ? d.disabled_at : null,
      secret: d.secret,
    };
  } catch {
    return null;
  }
}

export function encodeEndpoint(e: StoredEndpoint): string {
  return JSON.stringify({
    url: e.url,
    account: e.account ?? '',
    events: e.events,
    status: e.status,
    created_at: e.createdAt,
    failing_since: e.failingSince,
    disabled_at: e.disabledAt,
    secret: e.secret,
  });
}

export function publicEndpoint(e: StoredEndpoint): Endpoint {
  const { secret: _s, ...rest } = e;
  return rest;
}

export class WebhookStore {
  readonly redis: RedisClient;
  readonly s: EventsSchema;
  readonly #revealKey: string | undefined;
  /** How a destination's name is resolved when an endpoint is created (the system resolver unless a test seam). */
  readonly resolve: Resolver;
  #ring: Keyring | undefined;

  constructor(redis: RedisClient, namespace: string, revealKey?: string, resolve: Resolver = systemResolver) {
    this.redis = redis;
    this.s = eventsSchema(namespace);
    this.#revealKey = revealKey;
    this.resolve = resolve;
  }

  /** The keyring the secrets are sealed with; RevealKeyError (saying so) when KEYGATE_REVEAL_KEY is not usable. */
  #keyring(): Keyring {
    if (!this.#ring) {
      try {
        this.#ring = parseKeyring(this.#revealKey ?? process.env[REVEAL_KEY_ENV]);
      } catch (err) {
        throw new RevealKeyError(`webhook secrets are stored sealed: ${err instanceof RevealKeyError ? err.message : 'KEYGATE_REVEAL_KEY is not usable'}`);
      }
    }
    return this.#ring;
  }

  /** The endpoint's secret sealed for its record (bound to the endpoint id). */
  seal(id: string, secret: string): string {
    return sealSecret(this.#keyring(), `webhook:${id}`, secret);
  }

  async #all(): Promise<StoredEndpoint[]> {
    const h = await this.redis.hgetall(this.s.endpoints());
    return Object.entries(h)
      .map(([id, v]) => parseEndpoint(id, v))
      .filter((e): e is StoredEndpoint => e !== null)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  /** Every endpoint, or those of one account (and not the all-accounts ones). */
  async list(account?: string | null): Promise<Endpoint[]> {
    const all = await this.#all();
    return (account === undefined ? all : all.filter((e) => e.account === account)).map(publicEndpoint);
  }

  /** The endpoint, or null when there is none with this id. */
  async find(id: string): Promise<Endpoint | null> {
    const v = await this.redis.hget(this.s.endpoints(), id);
    const e = v === null ? null : parseEndpoint(id, v);
    return e === null ? null : publicEndpoint(e);
  }

  /** The endpoint (an Error when there is none). */
  async get(id: string): Promise<Endpoint> {
    const e = await this.find(id);
    if (e === null) throw new Error(`no webhook with id ${id}`);
    return e;
  }

  /** Endpoints with their sealed secrets opened: the delivery worker's view. */
  async active(): Promise<(Endpoint & { readonly secret: string })[]> {
    const out: (Endpoint & { readonly secret: string })[] = [];
    for (const e of await this.#all()) {
      if (e.status !== 'active') continue;
      out.push({ ...e, secret: openSecret(this.#keyring(), `webhook:${e.id}`, e.secret) });
    }
    return out;
  }

  /** The worker's write of the failure state; nothing when the endpoint was removed meanwhile. */
  async update(id: string, change: Partial<Pick<Endpoint, 'status' | 'failingSince' | 'disabledAt'>>): Promise<void> {
    const v = await this.redis.hget(this.s.endpoints(), id);
    const e = v === null ? null : parseEndpoint(id, v);
    if (e === null) return;
    await this.redis.eval(UPDATE_IF_EXISTS, 1, this.s.endpoints(), id, encodeEndpoint({ ...e, ...change }));
  }

  async addDead(id: string, d: DeadLetter): Promise<void> {
    await this.redis.lpush(this.s.dead(id), JSON.stringify({ event: d.event, attempts: d.attempts, last_error: d.lastError, dead_at: d.deadAt }));
    await this.redis.ltrim(this.s.dead(id), 0, DEAD_LETTERS_KEPT - 1);
  }

  /** The endpoint's dead letters, newest first (none for an unknown endpoint). */
  async listDead(id: string, limit = 100): Promise<DeadLetter[]> {
    const raw = await this.redis.lrange(this.s.dead(id), 0, Math.min(Math.max(limit, 1), DEAD_LETTERS_KEPT) - 1);
    return raw.flatMap((v) => {
      try {
        const d = JSON.parse(v) as { event: EventJson; attempts: number; last_error: string; dead_at: number };
        return [{ event: d.event, attempts: d.attempts, lastError: d.last_error, deadAt: d.dead_at }];
      } catch {
        return [];
      }
    });
  }
}
