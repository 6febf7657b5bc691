/**
 * The price table as the console manages it (docs/metering.md, "Prices"): list, set and remove one
 * model's price. The table is one hash (`src/schema/prices.ts`); each change is one script that also
 * writes its audit event (on Cluster, where the audit lists are in another slot, the event follows
 * the change). Every input is validated before the first write: a bad one changes nothing.
 */
import { FAMILIES } from '../core/families/index.ts';
import { decodePrice, encodePrice, EXTRA_CLASSES, MAX_PRICE_MICROS, MAX_PRICE_TIERS, MAX_PRICES, MAX_SERVICE_TIERS, multiplierScaled, priceField, pricesKey, SERVICE_TIER_PATTERN, type ExtraClass, type PriceRecord, type TierRecord } from '../schema/prices.ts';
import type { RedisClient } from '../store/redis.ts';
import { ConsoleError } from './errors.ts';
import { appendAudit } from './management.ts';
import { AUDIT_WRITE, NOW } from './scripts.ts';

/** The longest model name the console takes (it travels in a URL path segment). */
export const PRICE_MODEL_MAX_CHARS = 128;

/** One part of a model name: letters, digits and `. _ : @ + -`, starting with a letter or digit. */
const SEGMENT = /^[a-z0-9][a-z0-9._:@+-]*$/;

const MODEL_RULE = `a model name is a bare name (gpt-4o-mini), provider/name (openai/gpt-4o), provider/* (${FAMILIES.map((f) => `${f}/*`).join(', ')}) or *; at most ${PRICE_MODEL_MAX_CHARS} characters of letters, digits and . _ : @ + -`;

/** A model name as the price table's field (lower case), or INVALID_INPUT naming the rule. */
export function validatePriceModel(model: unknown): string {
  const bad = (why: string) => new ConsoleError('INVALID_INPUT', `model ${JSON.stringify(String(model).slice(0, 40))}: ${why}; ${MODEL_RULE}`);
  if (typeof model !== 'string' || model.length === 0) throw new ConsoleError('INVALID_INPUT', `model is missing; ${MODEL_RULE}`);
  if (model.length > PRICE_MODEL_MAX_CHARS) throw bad('too long');
  const m = priceField(model);
  if (m === '*') return m;
  const parts = m.split('/');
  if (parts.length === 2 && parts[1] === '*') {
    if (!(FAMILIES as readonly string[]).includes(parts[0]!)) throw bad(`a wildcard needs a provider the sidecar serves (${FAMILIES.join(', ')})`);
    return m;
  }
  if (parts.length > 4 || !parts.every((p) => SEGMENT.test(p))) throw bad('not a model name');
  return m;
}

/** A price as given: micro-units per million tokens; the cached and cache-write prices default to the input price. */
export interface PriceInput {
  readonly input: number;
  readonly output: number;
  readonly cachedInput?: number | null;
  readonly cacheWrite?: number | null;
  /** Section 16's classes (micro-units per million tokens; web_search per thousand calls). */
  readonly extra?: Partial<Record<ExtraClass, number | null>> | null;
  /** Whole-request tiers: `{above, input?, output?, cached_input?, cache_write?, …}`, ascending. */
  readonly tiers?: readonly Record<string, number>[] | null;
  /** Service tier → decimal multiplier text (`{"flex": "0.5"}`). */
  readonly serviceTiers?: Readonly<Record<string, string>> | null;
}

export interface PriceEntry extends PriceRecord {
  /** The table field: the model name in lower case. */
  readonly model: string;
}

function micros(what: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || v > MAX_PRICE_MICROS) {
    throw new ConsoleError('INVALID_INPUT', `${what} must be an integer number of micro-units per million tokens from 0 to ${MAX_PRICE_MICROS}`);
  }
  return v;
}

const TIER_CLASSES = ['input', 'output', 'cached_input', 'cache_write', ...EXTRA_CLASSES] as const;

/** A price input checked, as the record to store (without `updated_at`: the script stamps the Redis clock). */
export function validatePrice(p: PriceInput): PriceRecord {
  const extra: Partial<Record<ExtraClass, number>> = {};
  for (const [k, v] of Object.entries(p.extra ?? {})) {
    if (!(EXTRA_CLASSES as readonly string[]).includes(k)) throw new ConsoleError('INVALID_INPUT', `unknown price class ${JSON.stringify(k.slice(0, 40))}; the classes are ${EXTRA_CLASSES.join(', ')}`);
    if (v != null) extra[k as ExtraClass] = micros(k, v);
  }
  const tiers: TierRecord[] = [];
  const given = p.tiers ?? [];
  if (!Array.isArray(given) || given.length > MAX_PRICE_TIERS) throw new ConsoleError('INVALID_INPUT', `tiers must be a list of at most ${MAX_PRICE_TIERS}`);
  for (const t of given) {
    if (typeof t !== 'object' || t === null) throw new ConsoleError('INVALID_INPUT', 'a tier must be an object {above, input?, output?, …}');
    const above = t.above;
    if (typeof above !== 'number' || !Number.isSafeInteger(above) || above < 0) throw new ConsoleError('INVALID_INPUT', 'a tier needs above: a whole number of input tokens (0 or more)');
    if (tiers.length > 0 && above <= tiers[tiers.length - 1]!.above) throw new ConsoleError('INVALID_INPUT', 'tiers must ascend by above, each threshold once');
    const rec: Record<string, number> = { above };
    for (const [k, v] of Object.entries(t)) {
      if (k === 'above') continue;
      if (!(TIER_CLASSES as readonly string[]).includes(k)) throw new ConsoleError('INVALID_INPUT', `unknown price class ${JSON.stringify(k.slice(0, 40))} in a tier; the classes are ${TIER_CLASSES.join(', ')}`);
      rec[k] = micros(`tier ${above} ${k}`, v);
    }
    if (Object.keys(rec).length === 1) throw new ConsoleError('INVALID_INPUT', `the tier above ${above} prices no class`);
    tiers.push(rec as TierRecord);
  }
  const serviceTiers: Record<string, string> = {};
  const st = p.serviceTiers ?? {};
  if (typeof st !== 'object' || Array.isArray(st) || Object.keys(st).length > MAX_SERVICE_TIERS) throw new ConsoleError('INVALID_INPUT', `service tiers must be an object of at most ${MAX_SERVICE_TIERS} names`);
  for (const [k, v] of Object.entries(st)) {
    if (!SERVICE_TIER_PATTERN.test(k)) throw new ConsoleError('INVALID_INPUT', `service tier ${JSON.stringify(k.slice(0, 40))}: 1-32 of a-z 0-9 _ -`);
    if (typeof v !== 'string' || multiplierScaled(v) === null) throw new ConsoleError('INVALID_INPUT', `the multiplier of service tier ${k} must be a decimal from 0 to 1000 with at most 6 decimals (e.g. "0.5")`);
    serviceTiers[k] = v;
  }
  return {
    input: micros('input', p.input),
    output: micros('output', p.output),
    ...(p.cachedInput != null ? { cachedInput: micros('cached_input', p.cachedInput) } : {}),
    ...(p.cacheWrite != null ? { cacheWrite: micros('cache_write', p.cacheWrite) } : {}),
    ...(Object.keys(extra).length > 0 ? { extra } : {}),
    ...(tiers.length > 0 ? { tiers } : {}),
    ...(Object.keys(serviceTiers).length > 0 ? { serviceTiers } : {}),
  };
}

/** The audit event of a price change: its lists and its JSON (without the time). */
export interface PriceAudit {
  readonly lists: readonly [string, string];
  readonly event: string;
}

/** KEYS: prices [, audit, audit of the account]. ARGV: field, record JSON (no updated_at), max fields [, audit event]. */
const PRICE_SET = `${NOW}
local v = string.sub(ARGV[2], 1, -2) .. ',"updated_at":' .. now_s .. '}'
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 'LIMIT' end
redis.call('HSET', KEYS[1], ARGV[1], v)
local audit_ev = false
if #KEYS == 3 then audit_ev = ARGV[4] end
${AUDIT_WRITE(2)}
return v`;

/** KEYS: prices [, audit, audit of the account]. ARGV: field [, audit event]. */
const PRICE_REMOVE = `${NOW}
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 'NOTFOUND' end
local audit_ev = false
if #KEYS == 3 then audit_ev = ARGV[2] end
${AUDIT_WRITE(2)}
return 'OK'`;

export class PriceBook {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #cluster: boolean;

  constructor(redis: RedisClient, namespace: string, cluster: boolean) {
    this.#redis = redis;
    this.#key = pricesKey(namespace);
    this.#cluster = cluster;
  }

  /** Every price, by model name; a record off the schema is CORRUPT (naming its model: remove it or set it again). */
  async list(): Promise<PriceEntry[]> {
    const hash = await this.#redis.hgetall(this.#key);
    return Object.keys(hash)
      .sort()
      .map((model) => {
        const r = decodePrice(hash[model]!);
        if (typeof r === 'string') throw new ConsoleError('CORRUPT', `the price of ${JSON.stringify(model.slice(0, 60))} does not follow the schema (${r})`);
        return { model, ...r };
      });
  }

  /** Sets (or replaces) a model's price; the model and price are validated first. */
  async set(model: string, price: PriceRecord, audit?: (model: string, p: PriceRecord) => PriceAudit): Promise<PriceEntry> {
    const field = validatePriceModel(model);
    const rec = validatePrice(price);
    const value = encodePrice(rec);
    const a = audit?.(field, rec);
    const r = String(await this.#eval(PRICE_SET, [field, value, String(MAX_PRICES)], a));
    if (r === 'LIMIT') throw new ConsoleError('LIMIT', `the price table holds at most ${MAX_PRICES} models`);
    const stored = decodePrice(r);
    if (typeof stored === 'string') throw new ConsoleError('CORRUPT', `the stored price does not follow the schema (${stored})`);
    return { model: field, ...stored };
  }

  /** Removes a model's price (NOT_FOUND when it has none). */
  async remove(model: string, audit?: (model: string) => PriceAudit): Promise<void> {
    const field = validatePriceModel(model);
    const r = String(await this.#eval(PRICE_REMOVE, [field], audit?.(field)));
    if (r === 'NOTFOUND') throw new ConsoleError('NOT_FOUND', `no price for model ${field}`);
  }

  /** The script with its audit event in it; on Cluster the event follows a change that took place. */
  async #eval(script: string, args: string[], audit: PriceAudit | undefined): Promise<unknown> {
    if (audit === undefined) return this.#redis.eval(script, 1, this.#key, ...args);
    if (!this.#cluster) return this.#redis.eval(script, 3, this.#key, ...audit.lists, ...args, audit.event);
    const r = await this.#redis.eval(script, 1, this.#key, ...args);
    if (r !== 'LIMIT' && r !== 'NOTFOUND') await appendAudit(this.#redis, true, audit.lists, audit.event);
    return r;
  }
}

export interface PriceJson {
  model: string;
  input_micros: number;
  output_micros: number;
  cached_input_micros: number | null;
  cache_write_micros: number | null;
  updated_at: string | null;
  /** Section 16's classes, when set (`<class>_micros`; web_search_micros is per thousand calls). */
  cache_write_1h_micros?: number;
  input_audio_micros?: number;
  output_audio_micros?: number;
  input_image_micros?: number;
  output_image_micros?: number;
  web_search_micros?: number;
  tiers?: Record<string, number>[];
  service_tiers?: Record<string, string>;
}

/** A price as the CLI's `--json` and the management API show it (micro-units per million tokens; null: the input price). */
export function priceJson(e: PriceEntry): PriceJson {
  const j: PriceJson = {
    model: e.model,
    input_micros: e.input,
    output_micros: e.output,
    cached_input_micros: e.cachedInput ?? null,
    cache_write_micros: e.cacheWrite ?? null,
    updated_at: e.updatedAt === undefined ? null : new Date(e.updatedAt).toISOString(),
  };
  for (const c of EXTRA_CLASSES) if (e.extra?.[c] !== undefined) j[`${c}_micros`] = e.extra[c];
  // tiers as the API takes them: {above, <class>_micros…}
  if (e.tiers !== undefined) j.tiers = e.tiers.map((t) => Object.fromEntries(Object.entries(t).map(([k, v]) => [k === 'above' ? k : `${k}_micros`, v as number])));
  if (e.serviceTiers !== undefined) j.service_tiers = { ...e.serviceTiers };
  return j;
}
