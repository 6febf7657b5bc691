/**
 * Webhook endpoints: per account (its events) or for all accounts (`account: null`). The secret is
 * shown once at creation and stored sealed with the console's reveal key (AES-256-GCM envelope of
 * src/keys/crypto.ts, bound to the endpoint id), because delivery must sign with it: a Redis dump
 * alone does not give the secrets. Dead letters and replays are per endpoint.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { ConsoleError } from '../console/errors.ts';
import { openSecret, parseKeyring, REVEAL_KEY_ENV, RevealKeyError, sealSecret, type Keyring } from '../keys/crypto.ts';
import { DEAD_LETTERS_KEPT, ENDPOINT_ID_PATTERN, ENDPOINT_ID_RULE, ENDPOINTS_MAX, ENDPOINTS_PER_ACCOUNT_MAX, eventsSchema, type EventsSchema } from '../schema/events.ts';
import { ACCOUNT_ID_PATTERN } from '../schema/redis-schema.ts';
import { checkDestination, DestinationError, systemResolver, type Resolver } from './ssrf.ts';
import { EVENT_ID_PATTERN, EVENT_TYPES, type EventJson } from './types.ts';

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

interface StoredEndpoint extends Endpoint {
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

/** Moves one dead letter (by event id) to the replay list. KEYS: dead, replay. ARGV: event id. */
const REPLAY = `
local all = redis.call('LRANGE', KEYS[1], 0, -1)
for _, v in ipairs(all) do
  local ok, d = pcall(cjson.decode, v)
  if ok and type(d) == 'table' and type(d.event) == 'table' and d.event.id == ARGV[1] then
    redis.call('LREM', KEYS[1], 1, v)
    redis.call('LPUSH', KEYS[2], v)
    return 1
  end
end
return 0`;

/** Adds an endpoint within the bounds. KEYS: endpoints. ARGV: id, record, per-account max, total max, account ('' = all). */
const CREATE = `
local all = redis.call('HVALS', KEYS[1])
if #all >= tonumber(ARGV[4]) then return 'LIMIT' end
local n = 0
for _, v in ipairs(all) do
  local ok, d = pcall(cjson.decode, v)
  if ok and type(d) == 'table' and d.account == ARGV[5] then n = n + 1 end
end
if ARGV[5] ~= '' and n >= tonumber(ARGV[3]) then return 'LIMIT' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 'OK'`;

function parseEndpoint(id: string, text: string): StoredEndpoint | null {
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

function encodeEndpoint(e: StoredEndpoint): string {
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

function publicEndpoint(e: StoredEndpoint): Endpoint {
  const { secret: _s, ...rest } = e;
  return rest;
}

export function validateEndpointId(id: unknown): string {
  if (typeof id !== 'string' || !ENDPOINT_ID_PATTERN.test(id)) throw new ConsoleError('INVALID_INPUT', `a webhook id is ${ENDPOINT_ID_RULE}`);
  return id;
}

export function validateEventTypes(events: unknown): string[] | null {
  if (events === undefined || events === null) return null;
  if (!Array.isArray(events) || events.length === 0 || events.length > EVENT_TYPES.length) throw new ConsoleError('INVALID_INPUT', `events must be a non-empty list of: ${EVENT_TYPES.join(', ')}`);
  for (const e of events) {
    if (typeof e !== 'string' || !(EVENT_TYPES as readonly string[]).includes(e)) {
      throw new ConsoleError('INVALID_INPUT', `unknown event type ${JSON.stringify(String(e).slice(0, 40))}; one of: ${EVENT_TYPES.join(', ')}`);
    }
  }
  return [...new Set(events as string[])];
}

export class WebhookStore {
  readonly redis: RedisClient;
  readonly s: EventsSchema;
  readonly #revealKey: string | undefined;
  readonly #resolve: Resolver;
  #ring: Keyring | undefined;

  /** `resolve`: how a destination's name is resolved at creation (the system resolver unless a test seam). */
  constructor(redis: RedisClient, namespace: string, revealKey?: string, resolve: Resolver = systemResolver) {
    this.redis = redis;
    this.s = eventsSchema(namespace);
    this.#revealKey = revealKey;
    this.#resolve = resolve;
  }

  #keyring(): Keyring {
    if (!this.#ring) {
      try {
        this.#ring = parseKeyring(this.#revealKey ?? process.env[REVEAL_KEY_ENV]);
      } catch (err) {
        throw new ConsoleError('REVEAL_KEY', `webhook secrets are stored sealed: ${err instanceof RevealKeyError ? err.message : 'KEYGATE_REVEAL_KEY is not usable'}`);
      }
    }
    return this.#ring;
  }

  async create(input: { url: unknown; account: unknown; events?: unknown }, allowPrivate: boolean): Promise<{ endpoint: Endpoint; secret: string }> {
    let url: string;
    try {
      url = (await checkDestination(input.url as string, allowPrivate, this.#resolve)).url.href;
    } catch (err) {
      if (err instanceof DestinationError) throw new ConsoleError('INVALID_INPUT', `url: ${err.message}`);
      throw err;
    }
    const account = input.account === null ? null : (input.account as string);
    if (account !== null && (typeof account !== 'string' || !ACCOUNT_ID_PATTERN.test(account))) throw new ConsoleError('INVALID_INPUT', 'account: not a valid account id');
    const events = validateEventTypes(input.events);
    const id = `wh_${randomBytes(15).toString('base64url').replace(/[-_]/g, 'x').slice(0, 20)}`;
    const secret = SECRET_PREFIX + randomBytes(24).toString('base64url');
    const sealed = sealSecret(this.#keyring(), `webhook:${id}`, secret);
    const [sec, us] = (await this.redis.time()) as unknown as [string, string];
    const now = Number(sec) * 1000 + Math.floor(Number(us) / 1000);
    const rec: StoredEndpoint = { id, url, account, events, status: 'active', createdAt: now, failingSince: null, disabledAt: null, secret: sealed };
    const r = await this.redis.eval(CREATE, 1, this.s.endpoints(), id, encodeEndpoint(rec), String(ENDPOINTS_PER_ACCOUNT_MAX), String(ENDPOINTS_MAX), account ?? '');
    if (r !== 'OK') throw new ConsoleError('LIMIT', `at most ${ENDPOINTS_PER_ACCOUNT_MAX} webhook endpoints per account and ${ENDPOINTS_MAX} in all`);
    return { endpoint: publicEndpoint(rec), secret };
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

  async get(id: string): Promise<Endpoint> {
    validateEndpointId(id);
    const v = await this.redis.hget(this.s.endpoints(), id);
    const e = v === null ? null : parseEndpoint(id, v);
    if (e === null) throw new ConsoleError('NOT_FOUND', `no webhook with id ${id}`);
    return publicEndpoint(e);
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

  async remove(id: string): Promise<void> {
    validateEndpointId(id);
    const n = await this.redis.hdel(this.s.endpoints(), id);
    if (n === 0) throw new ConsoleError('NOT_FOUND', `no webhook with id ${id}`);
    await this.redis.del(this.s.dead(id), this.s.replay(id));
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

  async listDead(id: string, limit = 100): Promise<DeadLetter[]> {
    await this.get(id);
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

  /** Queues a dead letter for one more delivery (the worker's next pass). */
  async replay(id: string, eventId: string): Promise<void> {
    await this.get(id);
    if (typeof eventId !== 'string' || !EVENT_ID_PATTERN.test(eventId)) throw new ConsoleError('INVALID_INPUT', 'an event id is evt_<ms>_<seq>_<8 hex>');
    const n = await this.redis.eval(REPLAY, 2, this.s.dead(id), this.s.replay(id), eventId);
    if (n !== 1) throw new ConsoleError('NOT_FOUND', `no dead letter ${eventId} on webhook ${id}`);
  }
}
