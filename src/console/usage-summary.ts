/**
 * An account's usage summed per day (UTC), key or model, from its usage log: requests, amount and
 * tokens (input, cached input, cache write, output, reasoning; a count an entry lacks counts 0).
 * Bounded work: the span is at most USAGE_SUMMARY_MAX_DAYS, the log is read in pages (the export's
 * reader), at most USAGE_SUMMARY_MAX_ENTRIES entries are summed (`truncated` says when the span held
 * more) and at most USAGE_SUMMARY_MAX_GROUPS groups are kept (the rest are summed under `(other)`).
 * Sums are exact (BigInt) and refused (RANGE) beyond the exact integer range.
 */
import type { LedgerSums } from '../ledger/reads.ts';
import type { UsageEntry } from '../schema/money.ts';
import { ConsoleError } from './errors.ts';

export const USAGE_GROUPINGS = ['day', 'key', 'model'] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];
export const USAGE_SUMMARY_MAX_DAYS = 93;
export const USAGE_SUMMARY_MAX_ENTRIES = 200_000;
export const USAGE_SUMMARY_MAX_GROUPS = 1_000;
/** The group of entries past USAGE_SUMMARY_MAX_GROUPS, and of entries without a model. */
export const OTHER_GROUP = '(other)';
export const NO_MODEL_GROUP = '(none)';

export const TOKEN_KINDS = ['input', 'cached_input', 'cache_write', 'output', 'reasoning'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

export interface UsageSums {
  readonly requests: number;
  readonly amountMicros: number;
  readonly tokens: Readonly<Record<TokenKind, number>>;
}

export interface UsageGroup extends UsageSums {
  readonly group: string;
}

export interface UsageSummary {
  readonly account: string;
  readonly since: number;
  readonly until: number;
  readonly groupBy: UsageGrouping;
  /** In group order (days, key ids and models ascending). */
  readonly groups: readonly UsageGroup[];
  readonly total: UsageSums;
  /** The span held more than USAGE_SUMMARY_MAX_ENTRIES entries: the sums stop at the last one read. */
  readonly truncated: boolean;
}

/** An entry's token counts (absent = 0). */
export function entryTokens(e: UsageEntry): Record<TokenKind, number> {
  return {
    input: e.inputTokens ?? 0,
    cached_input: e.cachedInputTokens ?? 0,
    cache_write: e.cacheWriteTokens ?? 0,
    output: e.outputTokens ?? 0,
    reasoning: e.reasoningTokens ?? 0,
  };
}

/** The span asked for, checked: `since` before `until`, at most USAGE_SUMMARY_MAX_DAYS apart. */
export function summarySpan(sinceMs: number, untilMs: number): { since: number; until: number } {
  if (!Number.isFinite(sinceMs) || !Number.isFinite(untilMs)) throw new ConsoleError('INVALID_INPUT', 'since and until must be ISO-8601 instants');
  if (sinceMs >= untilMs) throw new ConsoleError('INVALID_INPUT', 'since must be before until');
  if (untilMs - sinceMs > USAGE_SUMMARY_MAX_DAYS * 86_400_000) throw new ConsoleError('INVALID_INPUT', `the span from since to until is at most ${USAGE_SUMMARY_MAX_DAYS} days`);
  return { since: sinceMs, until: untilMs };
}

class Sum {
  requests = 0n;
  amount = 0n;
  readonly tokens: Record<TokenKind, bigint> = { input: 0n, cached_input: 0n, cache_write: 0n, output: 0n, reasoning: 0n };

  add(e: UsageEntry): void {
    this.requests += 1n;
    this.amount += BigInt(e.amountMicros);
    const t = entryTokens(e);
    for (const k of TOKEN_KINDS) this.tokens[k] += BigInt(t[k]);
  }

  done(): UsageSums {
    const n = (v: bigint, what: string) => {
      if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)) throw new ConsoleError('RANGE', `the ${what} sum is beyond the exact integer range; ask for a shorter span`);
      return Number(v);
    };
    return {
      requests: n(this.requests, 'request'),
      amountMicros: n(this.amount, 'amount'),
      tokens: Object.fromEntries(TOKEN_KINDS.map((k) => [k, n(this.tokens[k], `${k} token`)])) as Record<TokenKind, number>,
    };
  }
}

function groupOf(e: UsageEntry, by: UsageGrouping): string {
  if (by === 'day') return new Date(e.time).toISOString().slice(0, 10);
  if (by === 'key') return e.keyId;
  return e.model === null ? NO_MODEL_GROUP : e.model.toLowerCase();
}

/** Sums the entries (oldest first, within the span) by `by`. */
export async function summarizeUsage(account: string, entries: AsyncIterable<UsageEntry>, span: { since: number; until: number }, by: UsageGrouping): Promise<UsageSummary> {
  const groups = new Map<string, Sum>();
  const total = new Sum();
  let read = 0;
  let truncated = false;
  for await (const e of entries) {
    if (read >= USAGE_SUMMARY_MAX_ENTRIES) {
      truncated = true;
      break;
    }
    read++;
    let g = groupOf(e, by);
    if (!groups.has(g) && groups.size >= USAGE_SUMMARY_MAX_GROUPS) g = OTHER_GROUP;
    let s = groups.get(g);
    if (s === undefined) groups.set(g, (s = new Sum()));
    s.add(e);
    total.add(e);
  }
  const list = [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([group, s]) => ({ group, ...s.done() }));
  return { account, since: span.since, until: span.until, groupBy: by, groups: list, total: total.done(), truncated };
}

/**
 * The summary from the ledger's sums per group (src/ledger/reads.ts: SQL over every booking in the
 * span, so never truncated). Past USAGE_SUMMARY_MAX_GROUPS groups (in group order) the rest are
 * summed under `(other)`, as the Redis reader does.
 */
export function summaryOfSums(account: string, rows: readonly LedgerSums[], span: { since: number; until: number }, by: UsageGrouping): UsageSummary {
  const groups = new Map<string, Sum>();
  const total = new Sum();
  for (const r of rows) {
    let g = r.group;
    if (!groups.has(g) && groups.size >= USAGE_SUMMARY_MAX_GROUPS) g = OTHER_GROUP;
    let s = groups.get(g);
    if (s === undefined) groups.set(g, (s = new Sum()));
    for (const x of [s, total]) {
      x.requests += BigInt(r.requests);
      x.amount += BigInt(r.amount);
      for (const k of TOKEN_KINDS) x.tokens[k] += BigInt(r[k]);
    }
  }
  const list = [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([group, s]) => ({ group, ...s.done() }));
  return { account, since: span.since, until: span.until, groupBy: by, groups: list, total: total.done(), truncated: false };
}

/** A summary as the CLI's `--json` and the management API show it. */
export function usageSummaryJson(s: UsageSummary) {
  const sums = (u: UsageSums) => ({ requests: u.requests, amount_micros: u.amountMicros, tokens: { ...u.tokens } });
  return {
    account: s.account,
    since: new Date(s.since).toISOString(),
    until: new Date(s.until).toISOString(),
    group_by: s.groupBy,
    groups: s.groups.map((g) => ({ group: g.group, ...sums(g) })),
    total: sums(s.total),
    truncated: s.truncated,
  };
}
