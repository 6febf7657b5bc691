/**
 * Reads of the ledger (docs/ledger.md, "Reads"): the usage export, an account's charges newest
 * first (the page's ledger), and an account's sums per day, key or model. Keyset pages on the
 * indexes of migration 1, so a page costs the same at any depth and memory stays at one page.
 */
import type pg from 'pg';
import type { UsageEntry } from '../schema/money.ts';

/** Sums of one group (decimal strings: SUMs of bigint columns, exact). */
export interface LedgerSums {
  readonly group: string;
  readonly requests: string;
  readonly amount: string;
  readonly input: string;
  readonly cached_input: string;
  readonly cache_write: string;
  readonly output: string;
  readonly reasoning: string;
}

/** What the console reads from the ledger when one is configured (src/console uses it in place of the Redis log). */
export interface UsageHistory {
  exportUsage(o: { sinceMs: number; untilMs?: number; account?: string; pageSize?: number }): AsyncGenerator<UsageEntry>;
  /** The account's entries before `before` (ms, then seq; exclusive), newest first. */
  charges(account: string, before: { ms: number; seq: number } | null, limit: number): Promise<UsageEntry[]>;
  /** The account's sums per group over [sinceMs, untilMs), groups ascending. */
  sums(account: string, sinceMs: number, untilMs: number, by: 'day' | 'key' | 'model'): Promise<LedgerSums[]>;
}

const ENTRY_COLUMNS = `entry_id, account, key_id, request_id, booking_id, price, amount_micros::text AS amount, model, input_tokens::text AS tin, output_tokens::text AS tout,
  cached_input_tokens::text AS tcached, cache_write_tokens::text AS twrite, reasoning_tokens::text AS treason, source, estimated, unpriced,
  (extract(epoch from booked_at) * 1000)::bigint::text AS ms, entry_seq::text AS seq, id::text AS row_id`;

interface EntryRow {
  entry_id: string;
  account: string;
  key_id: string;
  request_id: string;
  booking_id: string;
  /** jsonb: parsed by pg. */
  price: Record<string, unknown> | null;
  amount: string;
  model: string | null;
  tin: string | null;
  tout: string | null;
  tcached: string | null;
  twrite: string | null;
  treason: string | null;
  source: string;
  estimated: boolean;
  unpriced: boolean;
  ms: string;
  seq: string;
  row_id: string;
}

const n = (v: string | null) => (v === null ? null : Number(v));

function entryOf(r: EntryRow): UsageEntry {
  return {
    id: r.entry_id,
    time: Number(r.ms),
    account: r.account,
    keyId: r.key_id,
    requestId: r.request_id,
    bookingId: r.booking_id,
    amountMicros: Number(r.amount),
    model: r.model,
    inputTokens: n(r.tin),
    outputTokens: n(r.tout),
    cachedInputTokens: n(r.tcached),
    cacheWriteTokens: n(r.twrite),
    reasoningTokens: n(r.treason),
    source: r.source === 'meter' ? 'meter' : 'record',
    estimated: r.estimated,
    unpriced: r.unpriced,
    price: r.price !== null && typeof r.price === 'object' && !Array.isArray(r.price) ? r.price : null,
  };
}

const AT = (p: string) => `timestamptz 'epoch' + ${p}::bigint * interval '1 millisecond'`;

/** The SQL of the served reads, named (bench/ledger-queries.ts EXPLAINs each). */
export const LEDGER_SQL = {
  exportAll: `SELECT ${ENTRY_COLUMNS} FROM keygate_usage
    WHERE booked_at >= ${AT('$1')} AND booked_at < ${AT('$2')} AND (booked_at, entry_seq, account, id) > (${AT('$3')}, $4::bigint, $5::text, $7::bigint)
    ORDER BY booked_at, entry_seq, account, id LIMIT $6`,
  exportAccount: `SELECT ${ENTRY_COLUMNS} FROM keygate_usage
    WHERE account = $5 AND booked_at >= ${AT('$1')} AND booked_at < ${AT('$2')} AND (booked_at, entry_seq, id) > (${AT('$3')}, $4::bigint, $7::bigint)
    ORDER BY booked_at, entry_seq, id LIMIT $6`,
  charges: `SELECT ${ENTRY_COLUMNS} FROM keygate_usage
    WHERE account = $1 AND (booked_at, entry_seq) < (${AT('$2')}, $3::bigint)
    ORDER BY booked_at DESC, entry_seq DESC LIMIT $4`,
  sums: (by: 'day' | 'key' | 'model') => {
    const g = by === 'day' ? `to_char(booked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')` : by === 'key' ? 'key_id COLLATE "C"' : `coalesce(lower(model), '(none)') COLLATE "C"`;
    return `SELECT ${g} AS "group", count(*)::text AS requests, sum(amount_micros)::text AS amount,
      sum(coalesce(input_tokens, 0))::text AS input, sum(coalesce(cached_input_tokens, 0))::text AS cached_input,
      sum(coalesce(cache_write_tokens, 0))::text AS cache_write, sum(coalesce(output_tokens, 0))::text AS output,
      sum(coalesce(reasoning_tokens, 0))::text AS reasoning
    FROM keygate_usage WHERE account = $1 AND booked_at >= ${AT('$2')} AND booked_at < ${AT('$3')}
    GROUP BY 1 ORDER BY 1`;
  },
} as const;

/** Past any instant a usage entry can carry (year 9999 ends before it). */
const END_MS = 253_402_300_800_000;
const MAX_SEQ = '9223372036854775807';

export class LedgerReads implements UsageHistory {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async *exportUsage(o: { sinceMs: number; untilMs?: number; account?: string; pageSize?: number }): AsyncGenerator<UsageEntry> {
    const page = o.pageSize ?? 1000;
    const since = Math.max(0, Math.floor(o.sinceMs));
    const until = o.untilMs === undefined ? END_MS : Math.min(END_MS, Math.floor(o.untilMs));
    // the cursor: strictly after (ms, seq, account, row id), the order of the index (the row id breaks a tie
    // a Redis that lost writes could make: a stream id given again); it starts just before `since`
    let cursor: [number | string, string, string, string] = [since - 1, MAX_SEQ, '', '0'];
    for (;;) {
      const r =
        o.account === undefined
          ? await this.#pool.query<EntryRow>(LEDGER_SQL.exportAll, [since, until, cursor[0], cursor[1], cursor[2], page, cursor[3]])
          : await this.#pool.query<EntryRow>(LEDGER_SQL.exportAccount, [since, until, cursor[0], cursor[1], o.account, page, cursor[3]]);
      for (const row of r.rows) yield entryOf(row);
      if (r.rows.length < page) return;
      const last = r.rows[r.rows.length - 1]!;
      cursor = [last.ms, last.seq, last.account, last.row_id];
    }
  }

  async charges(account: string, before: { ms: number; seq: number } | null, limit: number): Promise<UsageEntry[]> {
    const b = before ?? { ms: END_MS, seq: 0 };
    const r = await this.#pool.query<EntryRow>(LEDGER_SQL.charges, [account, b.ms, before === null ? MAX_SEQ : String(b.seq), limit]);
    return r.rows.map(entryOf);
  }

  async sums(account: string, sinceMs: number, untilMs: number, by: 'day' | 'key' | 'model'): Promise<LedgerSums[]> {
    const r = await this.#pool.query<LedgerSums>(LEDGER_SQL.sums(by), [account, Math.floor(sinceMs), Math.floor(untilMs)]);
    return r.rows;
  }
}
