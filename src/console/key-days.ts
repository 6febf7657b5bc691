/**
 * A key's usage per UTC day over the last days (the `keydays` hash the usage-record script writes;
 * docs/redis-schema.md, "A key's daily usage"): spend, requests and tokens, one entry per day, oldest
 * first, days without usage as zeros.
 */
import { KEY_DAYS_KEPT } from '../schema/redis-schema.ts';
import { ConsoleError } from './errors.ts';
import { serverNow } from './key-list.ts';
import type { ConsoleService } from './service.ts';

export const KEY_DAYS_MAX = 31;
const DAY_MS = 86_400_000;

export interface KeyDay {
  /** The UTC day, `YYYY-MM-DD`. */
  readonly day: string;
  readonly amountMicros: number;
  readonly requests: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** Parses one day's value `amount requests input output`; null when it does not follow the schema. */
export function parseKeyDay(value: string): [number, number, number, number] | null {
  const m = /^(\d{1,16}) (\d{1,16}) (\d{1,16}) (\d{1,16})$/.exec(value);
  if (!m) return null;
  const n = m.slice(1).map(Number) as [number, number, number, number];
  return n.every(Number.isSafeInteger) ? n : null;
}

/** The last `days` UTC days (today included) of a key's usage. The key's account is the caller's to check. */
export async function keyDays(mc: ConsoleService, account: string, keyId: string, days: number): Promise<KeyDay[]> {
  if (!Number.isInteger(days) || days < 1 || days > Math.min(KEY_DAYS_MAX, KEY_DAYS_KEPT)) throw new ConsoleError('INVALID_INPUT', `days must be 1-${KEY_DAYS_MAX}`);
  const [hash, now] = await Promise.all([mc.redis.hgetall(mc.schema.keyDays(account, keyId)), serverNow(mc)]);
  const today = Math.floor(now / DAY_MS);
  const out: KeyDay[] = [];
  for (let d = today - days + 1; d <= today; d++) {
    const v = hash[String(d)];
    const n = v === undefined ? [0, 0, 0, 0] : parseKeyDay(v);
    if (n === null) throw new ConsoleError('CORRUPT', `key ${keyId}: daily usage of day ${d} does not follow the schema`);
    out.push({ day: new Date(d * DAY_MS).toISOString().slice(0, 10), amountMicros: n[0]!, requests: n[1]!, inputTokens: n[2]!, outputTokens: n[3]! });
  }
  return out;
}
