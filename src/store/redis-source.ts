/**
 * Uncached lookups: one command per lookup (`RecordType.read`) over `HashReads` — the sidecar's
 * Redis connection, or the unit tier's in-memory hashes. A corrupt record is logged once (bounded)
 * and answered as decoded (the phase denies it).
 */
import type { Logger } from 'pino';
import type { HashReads, RecordType } from '../schema/records.ts';
import type { Schema } from '../schema/redis-schema.ts';
import { StoreUnavailable, type RecordSource } from './record-source.ts';

export class RedisRecordSource implements RecordSource {
  readonly #reads: HashReads;
  readonly #schema: Schema;
  readonly #log: Logger;
  readonly #ready: () => boolean;
  readonly #close: () => void;
  /** Records whose corruption was already logged (bounded). */
  readonly #loggedCorrupt = new Set<string>();
  /** Why reads are refused (a Sentinel failover under way), or null. */
  #paused: string | null = null;
  readonly #closers: Array<() => void> = [];

  /**
   * `ready` says whether the connection is up; `close` releases it (omit both for a connection the
   * caller owns and watches).
   */
  constructor(reads: HashReads, schema: Schema, log: Logger, conn: { ready?: () => boolean; close?: () => void } = {}) {
    this.#reads = reads;
    this.#schema = schema;
    this.#log = log;
    this.#ready = conn.ready ?? (() => true);
    this.#close = conn.close ?? (() => {});
  }

  /**
   * Refuse every read (503) until `resume`: while a failover is under way the connected node may be
   * an old master that no longer receives writes.
   */
  pause(reason: string): void {
    this.#paused = reason;
  }

  resume(): void {
    this.#paused = null;
  }

  async lookup<T>(type: RecordType<T>, id: string): Promise<T> {
    if (this.#paused !== null) throw new StoreUnavailable(this.#paused);
    let v: T;
    try {
      v = await type.read(this.#reads, type.key(this.#schema, id));
    } catch (err) {
      throw err instanceof StoreUnavailable ? err : new StoreUnavailable(err instanceof Error ? err.message : String(err));
    }
    const why = type.corrupt(v);
    if (why !== undefined) this.#corrupt(`${type.name}:${type.logId ? type.logId(id) : id}`, why);
    return v;
  }

  ready(): boolean {
    return this.#paused === null && this.#ready();
  }

  /** Runs `fn` when the store closes (companion connections, e.g. the sentinel watch). */
  onClose(fn: () => void): void {
    this.#closers.push(fn);
  }

  async close(): Promise<void> {
    for (const fn of this.#closers.splice(0)) fn();
    this.#close();
  }

  #corrupt(what: string, reason: string): void {
    if (this.#loggedCorrupt.has(what)) return;
    if (this.#loggedCorrupt.size >= 10_000) this.#loggedCorrupt.clear();
    this.#loggedCorrupt.add(what);
    this.#log.error({ record: what, reason }, 'corrupt record in the key store; treated as a deny');
  }
}

/** A source over the sidecar's own Redis connection (ready while it is; closed with the store). */
export function redisSource(redis: HashReads & { status: string; disconnect(): void }, schema: Schema, log: Logger, ownsClient = true): RedisRecordSource {
  return new RedisRecordSource(redis, schema, log, { ready: () => redis.status === 'ready', close: ownsClient ? () => redis.disconnect() : undefined });
}
