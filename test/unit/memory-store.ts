/**
 * An in-memory store for the unit tier, built from the production store's own parts: records are
 * kept encoded (as Redis holds them, through the schema module's codec) in hashes, read by
 * `RedisRecordSource` through the record types' decoders, and served through the same cache
 * decorator as production (`CachedRecordSource`), with an invalidation source that fires on every
 * write to the maps. So a check runs exactly as in production, without Redis, on a cold key (first
 * lookup) and on a warm one (the next). Counts store reads (cache misses); `down = true` makes every
 * read fail as an outage does and drops the cache as a lost invalidation link does.
 */
import { EventEmitter } from 'node:events';
import { pino } from 'pino';
import { Authorizer, type AuthorizerOptions, type CheckInput } from '../../src/authorizer.ts';
import type { HeaderValue } from '../../src/core/credentials.ts';
import { keyDigest } from '../../src/core/key-format.ts';
import type { HashReads, RecordType } from '../../src/schema/records.ts';
import { encodeKeyRecord, schema, type NewKeyRecord } from '../../src/schema/redis-schema.ts';
import { CachedRecordSource } from '../../src/store/cache.ts';
import type { Tracker, TrackerEvents } from '../../src/store/invalidation.ts';
import { StoreUnavailable, type RecordSource } from '../../src/store/record-source.ts';
import { RedisRecordSource } from '../../src/store/redis-source.ts';

export const silentLog = pino({ level: 'silent' });
const s = schema();
const CRED_PREFIX = s.credentials('').slice(0, -2);

/** A flat HSET field/value list as the hash Redis would hold. */
export function hashOf(fields: readonly string[]): Record<string, string> {
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) h[fields[i]!] = fields[i + 1]!;
  return h;
}

/** A Map that reports each write by the Redis key name of the record it holds. */
class Hashes<V> extends Map<string, V> {
  readonly #changed: (id: string) => void;
  constructor(changed: (id: string) => void) {
    super();
    this.#changed = changed;
  }
  override set(id: string, v: V): this {
    super.set(id, v);
    this.#changed?.(id);
    return this;
  }
  override delete(id: string): boolean {
    const had = super.delete(id);
    this.#changed(id);
    return had;
  }
}

/** The invalidation source: confirmed while the store is up; every write invalidates its record. */
class MemoryTracker extends EventEmitter<TrackerEvents> implements Tracker {
  tracked = true;
  readonly reconnects = 0;
  close(): void {}
}

export class MemoryKeyStore implements RecordSource {
  readonly #tracker = new MemoryTracker();
  /** Key records by digest, as Redis holds them. */
  readonly keys = new Hashes<Record<string, string>>((digest) => this.#tracker.emit('invalidate', [s.keyRecord(digest)]));
  /** Account status by account id. */
  readonly accounts = new Hashes<string>((id) => this.#tracker.emit('invalidate', [s.account(id)]));
  /** Gate records (the money flags) by account, as Redis holds them. */
  readonly gates = new Hashes<Record<string, string>>((id) => this.#tracker.emit('invalidate', [s.gate(id)]));
  /** The account record's `credentials` field (the providers with an own credential) by account id. */
  readonly accountCredentials = new Hashes<string>((id) => this.#tracker.emit('invalidate', [s.account(id)]));
  /** Credential records (`cred:{acct}`) by account, as Redis holds them. */
  readonly credentials = new Hashes<Record<string, string>>((id) => this.#tracker.emit('invalidate', [s.credentials(id)]));
  credentialLookups = 0;
  /** Account billing (`metered` | `external`) by account id. */
  readonly billing = new Hashes<string>((id) => this.#tracker.emit('invalidate', [s.account(id)]));
  /** Owned provider objects by Redis key name (`s.owned(provider, id)`). */
  readonly owned = new Hashes<Record<string, string>>((rkey) => this.#tracker.emit('invalidate', [rkey]));
  /** Store reads (cache misses) by record. */
  readonly lookups = { key: 0, account: 0 };
  ownedLookups = 0;
  gateLookups = 0;
  #down = false;
  readonly #source: RecordSource;

  constructor(opts: { cached?: boolean } = {}) {
    const reads: HashReads = {
      hmget: async (rkey, ...fields) => {
        const h = rkey.startsWith(CRED_PREFIX) ? this.#read('credential', rkey) : this.#read(rkey.startsWith(s.account('')) ? 'account' : 'key', rkey);
        return fields.map((f) => h[f] ?? null);
      },
      hget: async (rkey, field) => {
        if (!rkey.startsWith(s.owned('', '').slice(0, -2))) return this.#read('account', rkey)[field] ?? null;
        this.ownedLookups++;
        if (this.#down) throw new StoreUnavailable('store down');
        return this.owned.get(rkey)?.[field] ?? null;
      },
      hgetall: async (rkey) => ({ ...this.#read('gate', rkey) }),
    };
    const inner = new RedisRecordSource(reads, s, silentLog, { ready: () => !this.#down });
    this.#source = opts.cached === false ? inner : new CachedRecordSource(inner, this.#tracker, s, { maxEntries: 1000, serveCachedDuringOutage: false, lookupTimeoutMs: 5000, maxInflight: 64, maxQueued: 256 }, silentLog);
  }

  #read(kind: 'key' | 'account' | 'gate' | 'credential', rkey: string): Record<string, string> {
    if (kind === 'gate') this.gateLookups++;
    else if (kind === 'credential') this.credentialLookups++;
    else this.lookups[kind]++;
    if (this.#down) throw new StoreUnavailable('store down');
    if (kind === 'key') return this.keys.get(rkey.slice(s.keyRecord('').length)) ?? {};
    if (kind === 'account') {
      const id = rkey.slice(s.account('').length);
      const status = this.accounts.get(id);
      const credentials = this.accountCredentials.get(id);
      const billing = this.billing.get(id);
      return { ...(status !== undefined && { status }), ...(credentials !== undefined && { credentials }), ...(billing !== undefined && { billing }) };
    }
    if (kind === 'credential') return this.credentials.get(/\{(.*)\}$/.exec(rkey)![1]!) ?? {};
    const id = /\{(.*)\}$/.exec(rkey)![1]!;
    return this.gates.get(id) ?? {};
  }

  /** Every read fails as an outage does; the invalidation link is lost with it (the cache is dropped). */
  get down(): boolean {
    return this.#down;
  }
  set down(v: boolean) {
    if (v === this.#down) return;
    this.#down = v;
    this.#tracker.tracked = !v;
    if (v) this.#tracker.emit('down', 'store down');
    else this.#tracker.emit('up');
  }

  /** Stores the record of plaintext `key` (under its digest, as the console does). */
  putKey(key: string, record: NewKeyRecord): void {
    this.keys.set(keyDigest(key), hashOf(encodeKeyRecord(record)));
  }

  /** Stores a raw hash (a record that may not follow the schema). */
  putRaw(key: string, hash: Record<string, string>): void {
    this.keys.set(keyDigest(key), hash);
  }

  lookup<T>(type: RecordType<T>, id: string): T | Promise<T> {
    return this.#source.lookup(type, id);
  }

  ready(): boolean {
    return this.#source.ready();
  }

  async close(): Promise<void> {
    await this.#source.close();
  }
}

export function authorizer(store: RecordSource, opts: Partial<AuthorizerOptions> = {}): Authorizer {
  return new Authorizer(store, { keyPrefix: 'kg_', pathPrefixes: [], ...opts }, silentLog);
}

/** A CheckInput from a plain header map (lower-case names). */
export function input(headers: Record<string, HeaderValue>, o: Partial<Omit<CheckInput, 'header'>> = {}): CheckInput {
  return {
    header: (n) => (Object.hasOwn(headers, n) ? headers[n] : undefined),
    method: 'POST',
    path: '/v1/chat/completions',
    protocol: undefined,
    body: undefined,
    bodyTruncated: false,
    requestId: 'req-1',
    ...o,
  };
}
