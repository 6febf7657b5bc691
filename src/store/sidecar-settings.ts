/**
 * The settings a sidecar publishes for the console: whether it refuses accounts without a wallet
 * (`KEYGATE_REQUIRE_WALLET`), so that the console's `wallet.enforced` tells the rule the live
 * sidecars apply instead of the console's own environment (docs/decisions.md, "Who says a wallet is
 * enforced"), and how it reads a model name without a provider (`KEYGATE_BARE_MODEL_PROVIDER`), so
 * that the console can say what a plain name counts as here (`bare_models`, docs/models.md).
 *
 * One hash per namespace, `{ns}:v1:sidecars`: field = the sidecar's instance id, value =
 * `<require wallet 1|0> <bare-name mapping> <expires at, epoch ms of the Redis server>`, the mapping
 * in canonical form (`openai=openai,google=vertex`, families in a fixed order) or `-` for none; a
 * mapping this console cannot read (a family of a later version) counts as none published.
 * A sidecar writes its field once its store connection is ready (and after each reconnect), and
 * again every `SIDECAR_SETTINGS_EVERY_MS` (10 s) on a timer of its own, with an expiry of
 * `SIDECAR_SETTINGS_TTL_MS` (30 s); it removes the field when it closes, so a crashed sidecar
 * drops out within 30 s. The request path never touches it: no Check runs a command for it.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { every, systemClock, type Clock } from '../core/clock.ts';
import { FAMILIES, type Family } from '../core/families/index.ts';
import { formatBareProviders, parseBareProviders } from '../core/model/index.ts';
import { LUA_NOW } from '../schema/lua-time.ts';
import type { RedisClient } from './redis.ts';

/** How often a sidecar writes its settings again. */
export const SIDECAR_SETTINGS_EVERY_MS = 10_000;
/** How long a written setting counts: three refreshes. */
export const SIDECAR_SETTINGS_TTL_MS = 30_000;

const NOW = `${LUA_NOW}
local function expires(v) return tonumber(string.match(v, ' (%d+)$') or '0') end
`;

/**
 * KEYS: the sidecars hash. ARGV: instance id, settings (`1|0 <mapping|->`), ttl ms. Writes the field with
 * its expiry (server time), drops expired fields, and lets the whole hash expire with the last one.
 */
const ANNOUNCE = `${NOW}
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. string.format('%d', now + ttl))
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if expires(all[i + 1]) < now then redis.call('HDEL', KEYS[1], all[i]) end
end
redis.call('PEXPIRE', KEYS[1], ttl)
return 'OK'`;

/** KEYS: the sidecars hash. → the settings of every live sidecar, without their expiry (read only). */
const LIVE = `${NOW}
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if expires(all[i + 1]) >= now then table.insert(out, string.match(all[i + 1], '^(.-) %d+$') or '') end
end
return out`;

/** What the live sidecars say about accounts without a wallet and about model names without a provider. */
export interface LiveSidecars {
  /** Per live sidecar: whether it refuses an account never credited (402). */
  readonly requireWallet: readonly boolean[];
  /** Per live sidecar: its bare-name mapping (KEYGATE_BARE_MODEL_PROVIDER); null: one this console cannot read. */
  readonly bareProviders: readonly (ReadonlyMap<Family, string> | null)[];
}

/** Reads the settings of the sidecars alive now (one read-only script). */
export async function liveSidecars(redis: RedisClient, key: string): Promise<LiveSidecars> {
  const settings = ((await redis.eval(LIVE, 1, key)) as string[]).map((v) => v.split(' '));
  return { requireWallet: settings.map((v) => v[0] === '1'), bareProviders: settings.map((v) => mapping(v[1] ?? '')) };
}

function mapping(word: string): ReadonlyMap<Family, string> | null {
  if (word === '-') return new Map();
  if (word === '') return null;
  try {
    return parseBareProviders(word);
  } catch {
    return null; // not a mapping this version reads: as if none was published
  }
}

/**
 * What the live sidecars agree on, one value each (undefined: this one did not say): `unreported`
 * (none said), `mixed` (they differ, or some did not say), or the one value all of them gave. The
 * rule of `wallet.rule` and of `bare_models`.
 */
export type Agreement<T> = { readonly kind: 'unreported' } | { readonly kind: 'mixed' } | { readonly kind: 'all'; readonly value: T };

export function agreement<T>(values: readonly (T | undefined)[]): Agreement<T> {
  if (!values.some((v) => v !== undefined)) return { kind: 'unreported' };
  const first = values[0];
  return values.every((v) => v === first) ? { kind: 'all', value: first as T } : { kind: 'mixed' };
}

/**
 * How the live sidecars read a model name without a provider at an entry of one family, by the
 * rules of `wallet.rule`: `provider` (every one reads it as `provider`'s), `none` (none reads it as
 * any provider's: the default), `mixed` (they differ, or some published no mapping), `unreported`
 * (no live sidecar published one).
 */
export type BareModelRule = 'provider' | 'none' | 'mixed' | 'unreported';
export const BARE_MODEL_RULES: readonly BareModelRule[] = ['provider', 'none', 'mixed', 'unreported'];
export interface BareModelReading {
  readonly rule: BareModelRule;
  /** The provider of rule `provider`; otherwise null. */
  readonly provider: string | null;
}

/** Per entry family, how the live sidecars read a bare model name. */
export type BareModels = Readonly<Record<Family, BareModelReading>>;

export function bareModelReadings(live: LiveSidecars): BareModels {
  const one = (family: Family): BareModelReading => {
    const a = agreement(live.bareProviders.map((m) => (m === null ? undefined : (m.get(family) ?? null))));
    if (a.kind !== 'all') return { rule: a.kind, provider: null };
    return a.value === null ? { rule: 'none', provider: null } : { rule: 'provider', provider: a.value };
  };
  return Object.fromEntries(FAMILIES.map((f) => [f, one(f)])) as BareModels;
}

/** A sidecar's side: writes its settings at start and on a timer; removes them on close. */
export class SidecarSettings {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #value: string;
  readonly #log: Logger;
  readonly #id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  #stop: (() => void) | null = null;
  readonly #onReady = () => void this.#announce();

  constructor(redis: RedisClient, key: string, o: { requireWallet: boolean; bareModelProviders: ReadonlyMap<Family, string>; log: Logger }) {
    this.#redis = redis;
    this.#key = key;
    this.#value = `${o.requireWallet ? '1' : '0'} ${formatBareProviders(o.bareModelProviders) || '-'}`;
    this.#log = o.log;
  }

  /** Writes the settings as soon as the connection is ready (again after each reconnect) and every 10 s. */
  start(clock: Clock = systemClock): void {
    this.#stop = every(clock, SIDECAR_SETTINGS_EVERY_MS, () => void this.#announce());
    this.#redis.on('ready', this.#onReady);
    if (this.#redis.status === 'ready') this.#onReady();
  }

  async close(): Promise<void> {
    this.#stop?.();
    this.#stop = null;
    this.#redis.off('ready', this.#onReady);
    await this.#redis.hdel(this.#key, this.#id).catch((err: Error) => this.#log.debug({ err: { message: err.message } }, 'could not remove the sidecar settings'));
  }

  async #announce(): Promise<void> {
    try {
      await this.#redis.eval(ANNOUNCE, 1, this.#key, this.#id, this.#value, String(SIDECAR_SETTINGS_TTL_MS));
    } catch (err) {
      // The store is down: the setting expires, and the console falls back to its own until the next write.
      this.#log.debug({ err: { message: (err as Error).message } }, 'could not write the sidecar settings');
    }
  }
}
