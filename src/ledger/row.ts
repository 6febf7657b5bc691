/**
 * One usage-log entry (a Redis stream entry, docs/redis-schema.md "Usage log") as one row of
 * `keygate_usage`. The one place that maps entry fields to columns: a field this version does not
 * know is kept in `extra` (jsonb), so nothing of an entry is lost when the entry grows.
 */

/** The columns `usageRow` fills, in the order the sink inserts them (its INSERT's parameters $1-$19). */
export const ROW_COLUMNS = [
  'booking_id',
  'account',
  'key_id',
  'request_id',
  'model',
  'amount_micros',
  'input_tokens',
  'output_tokens',
  'cached_input_tokens',
  'cache_write_tokens',
  'reasoning_tokens',
  'source',
  'estimated',
  'unpriced',
  'price',
  'entry_ms',
  'entry_id',
  'entry_seq',
  'extra',
] as const;

export interface LedgerRow {
  /** keygate's booking id: the entry's `booking_id` when it has one, else its idempotency id (`req`). */
  readonly booking_id: string;
  readonly account: string;
  readonly key_id: string;
  readonly request_id: string;
  readonly model: string | null;
  /** Decimal digits (bigint column): never through a float. */
  readonly amount_micros: string;
  readonly input_tokens: string | null;
  readonly output_tokens: string | null;
  readonly cached_input_tokens: string | null;
  readonly cache_write_tokens: string | null;
  readonly reasoning_tokens: string | null;
  readonly source: 'meter' | 'record';
  readonly estimated: boolean;
  readonly unpriced: boolean;
  /** The entry's price basis (JSON text), or null when the entry carries none. */
  readonly price: string | null;
  /** The Redis stream id `{ms}-{seq}`; `booked_at` is its millisecond. */
  readonly entry_id: string;
  readonly entry_ms: string;
  readonly entry_seq: string;
  /** Fields of the entry not mapped to a column (JSON object text), or null. */
  readonly extra: string | null;
}

/** The fields mapped to columns; any other field goes to `extra`. */
const KNOWN = new Set(['booking_id', 'key', 'req', 'amount', 'model', 'in', 'out', 'cached_in', 'cache_write', 'reasoning', 'src', 'est', 'unpriced', 'price']);
/** Amounts and counts: at most 18 digits, so every one fits a bigint (keygate writes at most 10^15). */
const DIGITS = /^\d{1,18}$/;
const ENTRY_ID = /^(\d{1,16})-(\d{1,16})$/;

/**
 * The row of one entry; a string saying what is wrong when the entry cannot be a row (its id or
 * amount is malformed, or it has no key or request id): such an entry is counted and logged, and
 * acknowledged so that it does not block the log (it stays readable in Redis until trimmed).
 */
export function usageRow(account: string, entryId: string, flat: readonly string[]): LedgerRow | string {
  const f = new Map<string, string>();
  // PostgreSQL's text and jsonb hold no NUL: one in a field (a hostile upstream's model name) becomes U+FFFD
  for (let i = 0; i + 1 < flat.length; i += 2) f.set(flat[i]!.replace(/\0/g, '\uFFFD'), flat[i + 1]!.replace(/\0/g, '\uFFFD'));
  const id = ENTRY_ID.exec(entryId);
  if (!id) return `entry id ${entryId.slice(0, 40)} is not {ms}-{seq}`;
  const amount = f.get('amount') ?? '';
  if (!DIGITS.test(amount)) return 'amount is not a non-negative integer';
  const key = f.get('key') ?? '';
  const req = f.get('req') ?? '';
  if (key === '' || req === '') return 'entry has no key or request id';
  const count = (name: string) => {
    const v = f.get(name);
    return v !== undefined && DIGITS.test(v) ? v : null;
  };
  const price = f.get('price');
  let priceJson: string | null = null;
  if (price !== undefined && price !== '') {
    try {
      priceJson = JSON.stringify(JSON.parse(price));
    } catch {
      priceJson = JSON.stringify(price); // not JSON: kept as a JSON string, never dropped
    }
  }
  const extra: Record<string, string> = {};
  for (const [k, v] of f) if (!KNOWN.has(k)) extra[k] = v;
  for (const name of ['in', 'out', 'cached_in', 'cache_write', 'reasoning']) {
    const v = f.get(name);
    if (v !== undefined && v !== '' && !DIGITS.test(v)) extra[name] = v;
  }
  const bookingId = f.get('booking_id');
  return {
    booking_id: bookingId !== undefined && bookingId !== '' ? bookingId : req,
    account,
    key_id: key,
    request_id: req,
    model: f.get('model') || null,
    amount_micros: amount,
    input_tokens: count('in'),
    output_tokens: count('out'),
    cached_input_tokens: count('cached_in'),
    cache_write_tokens: count('cache_write'),
    reasoning_tokens: count('reasoning'),
    source: f.get('src') === 'meter' ? 'meter' : 'record',
    estimated: f.get('est') === '1',
    unpriced: f.get('unpriced') === '1',
    price: priceJson,
    entry_id: entryId,
    entry_ms: id[1]!,
    entry_seq: id[2]!,
    extra: Object.keys(extra).length > 0 ? JSON.stringify(extra) : null,
  };
}
