/**
 * An account's ledger: its wallet's credits (the `credits` record: reference → amount and time) and
 * charges (the usage log), newest first, a page at a time. The cursor is where the last page ended;
 * charges are read from the usage log backwards from there, so a page costs one XREVRANGE.
 */
import { parseUsageEntry } from '../schema/money.ts';
import { ConsoleError } from './errors.ts';
import type { ConsoleService } from './service.ts';
import { validateAccountId } from './validate.ts';

export interface LedgerEntry {
  /** `c:{reference}` for a credit, the usage-log id for a charge. */
  readonly id: string;
  readonly time: number;
  readonly type: 'credit' | 'charge';
  /** Signed: a credit adds to the balance, a charge takes from it. */
  readonly amountMicros: number;
  readonly reference: string | null;
  readonly requestId: string | null;
  readonly keyId: string | null;
  readonly model: string | null;
  /** A metered charge's price rule and the name that priced it (its usage entry's `price`), when it has one. */
  readonly price?: { readonly rule: string; readonly model: string | null };
}

/** Order: time descending; at one millisecond credits (`c:`) before charges, then id descending. */
function before(a: { time: number; id: string }, b: { time: number; id: string }): boolean {
  if (a.time !== b.time) return a.time < b.time;
  return a.id < b.id;
}

export function encodeLedgerCursor(e: { time: number; id: string }): string {
  return Buffer.from(JSON.stringify([e.time, e.id]), 'utf8').toString('base64url');
}

export function decodeLedgerCursor(cursor: string): { time: number; id: string } | null {
  if (cursor.length > 512 || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || v.length !== 2 || !Number.isSafeInteger(v[0]) || v[0] < 0 || typeof v[1] !== 'string' || v[1].length > 200) return null;
    return { time: v[0] as number, id: v[1] };
  } catch {
    return null;
  }
}

const USAGE_ID = /^\d{1,16}-\d{1,16}$/;

export async function ledgerPage(mc: ConsoleService, account: string, o: { limit: number; cursor: { time: number; id: string } | null }): Promise<{ entries: LedgerEntry[]; next: string | null }> {
  validateAccountId(account);
  const s = mc.schema;
  const redis = mc.redis;
  const c = o.cursor;
  // Charges strictly after the cursor in ledger order: before its stream id (exclusive), or up to the end of its millisecond after a credit.
  const end = c === null ? '+' : USAGE_ID.test(c.id) ? `(${c.id}` : `${c.time}`;
  const h = mc.usageHistory; // the usage ledger (src/ledger), when configured: every charge, not only the Redis log's
  const upTo = c === null ? null : USAGE_ID.test(c.id) ? { ms: Number(c.id.split('-')[0]), seq: Number(c.id.split('-')[1]) } : { ms: c.time, seq: Number.MAX_SAFE_INTEGER };
  const [charges, credits] = await Promise.all([
    h !== null
      ? h.charges(account, upTo, o.limit + 1)
      : (redis.xrevrange(s.usageLog(account), end, '-', 'COUNT', o.limit + 1) as Promise<[string, string[]][]>).then((rows) => rows.map(([id, flat]) => parseUsageEntry(account, id, flat))),
    redis.hgetall(s.credits(account)),
  ]);
  const entries: LedgerEntry[] = [];
  for (const u of charges) {
    const rule = u.price?.rule;
    const price = typeof rule === 'string' && rule !== 'recorded' ? { price: { rule, model: typeof u.price!.model === 'string' ? u.price!.model : null } } : {};
    entries.push({ id: u.id, time: u.time, type: 'charge', amountMicros: -u.amountMicros, reference: null, requestId: u.requestId, keyId: u.keyId, model: u.model, ...price });
  }
  for (const [reference, value] of Object.entries(credits)) {
    const m = /^(\d{1,16}):(\d{1,16})$/.exec(value);
    if (!m) throw new ConsoleError('CORRUPT', `account ${account}: credit ${reference} does not follow the schema`);
    const e: LedgerEntry = { id: `c:${reference}`, time: Number(m[2]), type: 'credit', amountMicros: Number(m[1]), reference, requestId: null, keyId: null, model: null };
    if (c === null || before(e, c)) entries.push(e);
  }
  entries.sort((a, b) => (before(a, b) ? 1 : before(b, a) ? -1 : 0));
  const page = entries.slice(0, o.limit);
  const last = page[page.length - 1];
  return { entries: page, next: entries.length > o.limit && last ? encodeLedgerCursor(last) : null };
}
