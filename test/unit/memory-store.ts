/**
 * An in-memory `KeyStore` for the unit tier: records are kept encoded (as Redis holds them, through
 * the schema module's codec) and decoded on every lookup, so the decision pipeline runs exactly as
 * in production, without Redis. Counts lookups; `down` makes every lookup fail as an outage does.
 */
import { pino } from 'pino';
import { Authorizer, type AuthorizerOptions, type CheckInput } from '../../src/authorizer.ts';
import type { HeaderValue } from '../../src/core/credentials.ts';
import { keyDigest } from '../../src/keys/format.ts';
import {
  encodeKeyRecord,
  parseAccountBlocked,
  parseSidecarKey,
  SIDECAR_KEY_FIELDS,
  type NewKeyRecord,
} from '../../src/schema/redis-schema.ts';
import { parseGate, type Gate } from '../../src/schema/money.ts';
import { StoreUnavailable, type KeyStore } from '../../src/store/key-store.ts';

/** A flat HSET field/value list as the hash Redis would hold. */
export function hashOf(fields: readonly string[]): Record<string, string> {
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) h[fields[i]!] = fields[i + 1]!;
  return h;
}

export class MemoryKeyStore implements KeyStore {
  readonly keys = new Map<string, Record<string, string>>();
  readonly accounts = new Map<string, string>();
  /** Gate records (the money flags) by account, as Redis holds them. */
  readonly gates = new Map<string, Record<string, string>>();
  readonly lookups = { key: 0, account: 0 };
  gateLookups = 0;
  down = false;

  /** Stores the record of plaintext `key` (under its digest, as the console does). */
  putKey(key: string, record: NewKeyRecord): void {
    this.keys.set(keyDigest(key), hashOf(encodeKeyRecord(record)));
  }

  /** Stores a raw hash (a record that may not follow the schema). */
  putRaw(key: string, hash: Record<string, string>): void {
    this.keys.set(keyDigest(key), hash);
  }

  async key(digest: string) {
    this.lookups.key++;
    if (this.down) throw new StoreUnavailable('store down');
    const h = this.keys.get(digest) ?? {};
    return parseSidecarKey(SIDECAR_KEY_FIELDS.map((f) => h[f] ?? null));
  }

  async accountBlocked(accountId: string) {
    this.lookups.account++;
    if (this.down) throw new StoreUnavailable('store down');
    return parseAccountBlocked(this.accounts.get(accountId) ?? null);
  }

  async gate(accountId: string): Promise<Gate | 'corrupt'> {
    this.gateLookups++;
    if (this.down) throw new StoreUnavailable('store down');
    const g = parseGate(this.gates.get(accountId) ?? {});
    return typeof g === 'string' ? 'corrupt' : g;
  }

  ready(): boolean {
    return !this.down;
  }

  async close(): Promise<void> {}
}

export const silentLog = pino({ level: 'silent' });

export function authorizer(store: KeyStore, opts: Partial<AuthorizerOptions> = {}): Authorizer {
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
