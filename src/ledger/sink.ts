/**
 * The ledger's sink (docs/ledger.md): reads every account's usage log through the consumer group
 * `keygate-ledger`, writes one row per booking into `keygate_usage` (batched, one transaction a
 * round, `ON CONFLICT DO NOTHING` on the booking), and acknowledges the entries only after the
 * commit: at least once out of Redis, exactly once into the table. Entries pending too long on
 * another consumer (a sink that died between its commit and its acknowledgement) are claimed
 * (XAUTOCLAIM), so several sinks share the work and a dead one's entries are not stranded. What the
 * group acknowledged is trimmed from the log (scripts.ts), which the record script otherwise cuts
 * only at the hard cap, counting what it cut unacknowledged.
 *
 * Every command names one account's keys, so it runs alike on standalone Redis, Sentinel and
 * Cluster (each account's records share the slot of `{account}`).
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Schema } from '../schema/redis-schema.ts';
import type { RedisClient } from '../store/redis.ts';
import type { LedgerMetrics } from './metrics.ts';
import { ROW_COLUMNS, usageRow, type LedgerRow } from './row.ts';
import { LEDGER_GROUP, TRIM_ACKED } from './scripts.ts';
import { systemClock, type Clock } from '../core/clock.ts';

export interface SinkOptions {
  /** This sink's consumer name in the group (default: host, pid and a random part: unique per process). */
  readonly consumer?: string;
  /** Entries read per account per call (default 1000). */
  readonly batch?: number;
  /** Rows written in one transaction at most (default 5000). */
  readonly maxRows?: number;
  /** An entry pending this long on a consumer is claimed by another sink (default 30 s). */
  readonly claimIdleMs?: number;
  /** Wait when a round found nothing (default 200 ms). */
  readonly pollMs?: number;
  /** How often the list of accounts, the lag and the dropped counters are read (default 2 s). */
  readonly accountsEveryMs?: number;
  /** Accounts read at once (default 16). */
  readonly concurrency?: number;
  /** A consumer of the group with nothing pending and idle this long (a stopped sink) is removed (default 1 h). */
  readonly forgetIdleMs?: number;
  /** Test hook (KEYGATE_LEDGER_TEST_PAUSE_AFTER_COMMIT_MS): pause this long between a commit and its acknowledgement. */
  readonly pauseAfterCommitMs?: number;
  readonly metrics?: LedgerMetrics;
  /** The rounds' waits, back-off and refresh instants run on it (default `systemClock`). */
  readonly clock?: Clock;
}

interface Entry {
  readonly account: string;
  readonly id: string;
  readonly flat: string[];
}

type XEntry = [string, string[] | null];

const INSERT = `INSERT INTO keygate_usage (booking_id, account, key_id, request_id, model, amount_micros, input_tokens, output_tokens,
  cached_input_tokens, cache_write_tokens, reasoning_tokens, source, estimated, unpriced, price, booked_at, entry_id, entry_seq, extra)
SELECT b, a, k, r, m, am, i, o, ci, cw, rs, src, est, unp, pr, timestamptz 'epoch' + ms * interval '1 millisecond', eid, seq, ex
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[],
  $10::bigint[], $11::bigint[], $12::text[], $13::boolean[], $14::boolean[], $15::jsonb[], $16::bigint[], $17::text[], $18::bigint[], $19::jsonb[])
  AS t(b, a, k, r, m, am, i, o, ci, cw, rs, src, est, unp, pr, ms, eid, seq, ex)
ON CONFLICT (account, booking_id) DO NOTHING`;

type WithTrim = { kgLedgerTrim(key: string, group: string): Promise<unknown> };

export class LedgerSink {
  readonly consumer: string;
  readonly #redis: RedisClient & WithTrim;
  readonly #pool: pg.Pool;
  readonly #s: Schema;
  readonly #log: Logger;
  readonly #o: Required<Omit<SinkOptions, 'consumer' | 'metrics' | 'clock'>>;
  readonly #clock: Clock;
  readonly #m: LedgerMetrics | undefined;
  #accounts: string[] = [];
  readonly #grouped = new Set<string>();
  readonly #claimCursor = new Map<string, string>();
  /** Account → the millisecond of its oldest unacknowledged entry. */
  readonly #oldest = new Map<string, number>();
  readonly #dropped = new Map<string, number>();
  #start = 0;
  #nextAccounts = 0;
  #nextClaim = 0;
  #nextForget = 0;
  #stopping = false;
  #loop: Promise<void> | null = null;
  #wake: (() => void) | null = null;
  /** Rows this sink wrote, and entries it found already written. */
  written = 0;
  duplicates = 0;
  /** Rounds that failed and were retried. */
  retries = 0;

  constructor(redis: RedisClient, pool: pg.Pool, s: Schema, log: Logger, o: SinkOptions = {}) {
    if (!('kgLedgerTrim' in redis)) redis.defineCommand('kgLedgerTrim', { numberOfKeys: 1, lua: TRIM_ACKED });
    this.#redis = redis as RedisClient & WithTrim;
    this.#pool = pool;
    this.#s = s;
    this.#log = log;
    this.#m = o.metrics;
    this.#clock = o.clock ?? systemClock;
    this.consumer = o.consumer ?? `${hostname().slice(0, 64)}-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.#o = {
      batch: o.batch ?? 1000,
      maxRows: o.maxRows ?? 5000,
      claimIdleMs: o.claimIdleMs ?? 30_000,
      pollMs: o.pollMs ?? 200,
      accountsEveryMs: o.accountsEveryMs ?? 2000,
      concurrency: o.concurrency ?? 16,
      pauseAfterCommitMs: o.pauseAfterCommitMs ?? 0,
      forgetIdleMs: o.forgetIdleMs ?? 3_600_000,
    };
  }

  /** Age of the oldest unacknowledged entry over every account, in ms (0 when none), as last read. */
  get lagMs(): number {
    let min = Infinity;
    for (const v of this.#oldest.values()) min = Math.min(min, v);
    return min === Infinity ? 0 : Math.max(0, this.#clock.now() - min);
  }

  /** Entries the cap dropped unacknowledged, over every account, as last read. */
  get dropped(): number {
    let n = 0;
    for (const v of this.#dropped.values()) n += v;
    return n;
  }

  start(): void {
    if (this.#loop === null) this.#loop = this.#run();
  }

  /** Stops after the round under way (a batch committed is acknowledged first when Redis answers). */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    await this.#loop;
  }

  /** One pass (tests and `keygate ledger` use the loop): accounts, claims, reads, commit, acknowledgement; the entries handled. */
  async round(): Promise<number> {
    const now = this.#clock.now();
    if (now >= this.#nextAccounts) {
      await this.#refreshAccounts();
      this.#nextAccounts = now + this.#o.accountsEveryMs;
    }
    const entries: Entry[] = [];
    if (now >= this.#nextClaim) {
      entries.push(...(await this.#claim()));
      this.#nextClaim = now + Math.max(100, Math.floor(this.#o.claimIdleMs / 2));
    }
    if (entries.length < this.#o.maxRows) entries.push(...(await this.#read(this.#o.maxRows - entries.length)));
    if (entries.length === 0) return 0;
    if (!(await this.#commit(entries))) return 0;
    if (this.#o.pauseAfterCommitMs > 0) {
      this.#log.info({ entries: entries.length }, 'ledger test hook: committed, pausing before the acknowledgement');
      await this.#sleep(this.#o.pauseAfterCommitMs);
    }
    await this.#ack(entries);
    return entries.length;
  }

  async #run(): Promise<void> {
    let backoff = 0;
    while (!this.#stopping) {
      try {
        const n = await this.round();
        backoff = 0;
        if (n === 0) await this.#sleep(this.#o.pollMs);
      } catch (err) {
        this.retries++;
        this.#m?.retries.inc({ stage: 'redis' });
        this.#log.warn({ err: { message: (err as Error).message } }, 'ledger sink: Redis failed; retrying');
        backoff = Math.min(Math.max(250, backoff * 2), 5000);
        await this.#sleep(backoff);
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    if (this.#stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const clock = this.#clock;
      const t = clock.setTimeout(done, ms);
      function done() {
        clock.clearTimeout(t);
        resolve();
      }
      this.#wake = done;
    });
  }

  /** The accounts with a usage log; the group created on each new one; every account's lag and dropped count read. */
  async #refreshAccounts(): Promise<void> {
    const accounts = (await this.#redis.smembers(this.#s.usageAccounts())).sort();
    this.#accounts = accounts;
    const known = new Set(accounts);
    for (const a of [...this.#oldest.keys()]) if (!known.has(a)) this.#oldest.delete(a);
    await this.#each(accounts, async (a) => {
      if (!this.#grouped.has(a)) {
        try {
          await this.#redis.xgroup('CREATE', this.#s.usageLog(a), LEDGER_GROUP, '0', 'MKSTREAM');
        } catch (err) {
          if (!String((err as Error).message).includes('BUSYGROUP')) throw err;
        }
        this.#grouped.add(a);
      }
      await this.#trim(a);
      const d = Number((await this.#redis.get(this.#s.usageDropped(a))) ?? 0);
      const before = this.#dropped.get(a) ?? 0;
      if (d > before) {
        this.#log.error({ account: a, dropped: d - before, total: d }, 'usage log: the cap (KEYGATE_USAGE_LOG_MAX) dropped entries the ledger had not acknowledged; they are not in the ledger');
      }
      this.#dropped.set(a, d);
    });
    this.#m?.dropped.set(this.dropped);
    this.#m?.lag.set(this.lagMs / 1000);
    if (this.#clock.now() >= this.#nextForget) {
      this.#nextForget = this.#clock.now() + Math.max(1000, Math.floor(this.#o.forgetIdleMs / 4));
      await this.#each(accounts, (a) => this.#forgetStopped(a));
    }
  }

  /** Consumers of stopped sinks (nothing pending, idle past forgetIdleMs) leave the group; a live one idle that long comes back on its next read. */
  async #forgetStopped(a: string): Promise<void> {
    const key = this.#s.usageLog(a);
    const list = (await this.#redis.xinfo('CONSUMERS', key, LEDGER_GROUP).catch(() => [])) as unknown[][];
    for (const c of list) {
      const f = new Map<string, unknown>();
      for (let i = 0; i + 1 < c.length; i += 2) f.set(String(c[i]), c[i + 1]);
      const name = String(f.get('name'));
      if (name !== this.consumer && Number(f.get('pending')) === 0 && Number(f.get('idle')) > this.#o.forgetIdleMs) {
        await this.#redis.xgroup('DELCONSUMER', key, LEDGER_GROUP, name);
      }
    }
  }

  /** Runs `f` over the accounts, `concurrency` at a time. */
  async #each(accounts: readonly string[], f: (a: string) => Promise<void>): Promise<void> {
    for (let i = 0; i < accounts.length; i += this.#o.concurrency) {
      await Promise.all(accounts.slice(i, i + this.#o.concurrency).map(f));
    }
  }

  /** Entries idle on another consumer longer than claimIdleMs, now this sink's. */
  async #claim(): Promise<Entry[]> {
    const out: Entry[] = [];
    await this.#each([...this.#grouped], async (a) => {
      const key = this.#s.usageLog(a);
      const r = (await this.#redis.xautoclaim(key, LEDGER_GROUP, this.consumer, this.#o.claimIdleMs, this.#claimCursor.get(a) ?? '0-0', 'COUNT', this.#o.batch).catch((err: Error) => this.#noGroup(a, err))) as [string, XEntry[], string[]?] | null;
      if (r === null) return;
      this.#claimCursor.set(a, r[0]);
      for (const [id, flat] of r[1]) if (flat !== null) out.push({ account: a, id, flat });
      if (r[2] !== undefined && r[2].length > 0) await this.#lostPending(a, r[2]);
    });
    return out;
  }

  /**
   * Entries a dead sink held that the cap cut from the log (XAUTOCLAIM's deleted ids, now out of the
   * group): those not in the table are lost to the ledger, and counted with the record script's drops.
   */
  async #lostPending(a: string, ids: readonly string[]): Promise<void> {
    const found = await this.#pool.query<{ entry_id: string }>('SELECT entry_id FROM keygate_usage WHERE account = $1 AND entry_id = ANY($2::text[])', [a, ids]);
    const lost = ids.length - found.rowCount!;
    if (lost > 0) {
      await this.#redis.incrby(this.#s.usageDropped(a), lost);
      this.#log.error({ account: a, dropped: lost }, 'usage log: the cap (KEYGATE_USAGE_LOG_MAX) dropped entries a stopped sink had read and not written; they are not in the ledger');
    }
  }

  /** New entries, up to `room`, from the accounts in turn (the start rotates, so no account waits behind a busy one). */
  async #read(room: number): Promise<Entry[]> {
    const list = [...this.#grouped];
    if (list.length === 0) return [];
    const start = this.#start++ % list.length;
    const order = [...list.slice(start), ...list.slice(0, start)];
    const out: Entry[] = [];
    for (let i = 0; i < order.length && out.length < room; i += this.#o.concurrency) {
      await Promise.all(
        order.slice(i, i + this.#o.concurrency).map(async (a) => {
          const r = (await this.#redis
            .xreadgroup('GROUP', LEDGER_GROUP, this.consumer, 'COUNT', this.#o.batch, 'STREAMS', this.#s.usageLog(a), '>')
            .catch((err: Error) => this.#noGroup(a, err))) as [string, XEntry[]][] | null;
          for (const [, entries] of r ?? []) for (const [id, flat] of entries) if (flat !== null) out.push({ account: a, id, flat });
        }),
      );
    }
    return out;
  }

  /** A log whose group is gone (Redis restarted without its data, the log deleted): the group is made again on the next refresh. */
  #noGroup(a: string, err: Error): null {
    if (!String(err.message).includes('NOGROUP')) throw err;
    this.#grouped.delete(a);
    this.#nextAccounts = 0;
    return null;
  }

  /** Writes the rows in one transaction; retries until committed. False when stopping first (nothing acknowledged: another sink or the next start takes them). */
  async #commit(entries: readonly Entry[]): Promise<boolean> {
    const rows: LedgerRow[] = [];
    for (const e of entries) {
      const r = usageRow(e.account, e.id, e.flat);
      if (typeof r === 'string') {
        this.#m?.rejected.inc();
        this.#log.error({ account: e.account, entry: e.id, problem: r }, 'usage log entry cannot be a ledger row; acknowledged without one');
      } else rows.push(r);
    }
    let backoff = 0;
    for (;;) {
      try {
        const [inserted, refused] = await this.#insertOrSkip(rows);
        const dup = rows.length - inserted - refused;
        this.written += inserted;
        this.duplicates += dup;
        this.#m?.rows.inc({ result: 'written' }, inserted);
        if (dup > 0) this.#m?.rows.inc({ result: 'duplicate' }, dup);
        return true;
      } catch (err) {
        this.retries++;
        this.#m?.retries.inc({ stage: 'postgres' });
        this.#log.warn({ err: { message: (err as Error).message, code: (err as { code?: string }).code }, rows: rows.length }, 'ledger sink: PostgreSQL write failed; retrying');
        if (this.#stopping) return false;
        backoff = Math.min(Math.max(250, backoff * 2), 1000);
        await this.#sleep(backoff);
        if (this.#stopping) return false;
      }
    }
  }

  /**
   * `#insert`, and when PostgreSQL refuses the data itself (SQLSTATE class 22: a value out of range,
   * bad text), row by row: a row it refuses is logged, counted and left out, so that one bad entry
   * never holds up the log. Any other error (connection, server) is thrown for the retry.
   */
  async #insertOrSkip(rows: readonly LedgerRow[]): Promise<[inserted: number, refused: number]> {
    try {
      return [await this.#insert(rows), 0];
    } catch (err) {
      if (!String((err as { code?: string }).code ?? '').startsWith('22') || rows.length === 0) throw err;
    }
    let inserted = 0;
    let refused = 0;
    for (const row of rows) {
      try {
        inserted += await this.#insert([row]);
      } catch (err) {
        const code = String((err as { code?: string }).code ?? '');
        if (!code.startsWith('22')) throw err;
        refused++;
        this.#m?.rejected.inc();
        this.#log.error({ account: row.account, entry: row.entry_id, code, problem: (err as Error).message }, 'usage log entry refused by PostgreSQL; acknowledged without a row');
      }
    }
    return [inserted, refused];
  }

  async #insert(rows: readonly LedgerRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    // The server going away between two statements (a restart, 57P01) is an 'error' event on the
    // checked-out client, not a rejected query: without a listener it would end the process.
    const lost = (err: Error) => {
      broken = err;
    };
    client.on('error', lost);
    try {
      await client.query('BEGIN');
      let inserted = 0;
      for (let i = 0; i < rows.length; i += 1000) {
        const chunk = rows.slice(i, i + 1000);
        const r = await client.query(INSERT, ROW_COLUMNS.map((c) => chunk.map((row) => row[c])));
        inserted += r.rowCount ?? 0;
      }
      await client.query('COMMIT');
      return inserted;
    } catch (err) {
      broken = err as Error;
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.off('error', lost);
      client.release(broken);
    }
  }

  /** XACK the committed entries (retried until Redis answers: they are in the table either way), then trim what is acknowledged. */
  async #ack(entries: readonly Entry[]): Promise<void> {
    const by = new Map<string, string[]>();
    for (const e of entries) {
      let ids = by.get(e.account);
      if (ids === undefined) by.set(e.account, (ids = []));
      ids.push(e.id);
    }
    let backoff = 0;
    for (;;) {
      try {
        await this.#each([...by.keys()], async (a) => {
          const ids = by.get(a)!;
          for (let i = 0; i < ids.length; i += 1000) await this.#redis.xack(this.#s.usageLog(a), LEDGER_GROUP, ...ids.slice(i, i + 1000));
          by.delete(a);
          await this.#trim(a);
        });
        this.#m?.lag.set(this.lagMs / 1000);
        return;
      } catch (err) {
        this.retries++;
        this.#m?.retries.inc({ stage: 'redis' });
        this.#log.warn({ err: { message: (err as Error).message } }, 'ledger sink: acknowledgement failed; retrying (the rows are committed)');
        if (this.#stopping) return;
        backoff = Math.min(Math.max(250, backoff * 2), 5000);
        await this.#sleep(backoff);
      }
    }
  }

  async #trim(a: string): Promise<void> {
    const r = (await this.#redis.kgLedgerTrim(this.#s.usageLog(a), LEDGER_GROUP)) as [string, string?, number?];
    if (r[0] === 'NOGROUP') {
      this.#grouped.delete(a);
      this.#oldest.delete(a);
      return;
    }
    if (r[1]) this.#oldest.set(a, Number(r[1].split('-')[0]));
    else this.#oldest.delete(a);
  }
}
