/**
 * Reads of the per-account key list index (`keyorder`, `keycur`, `keyinfo`; docs/redis-schema.md,
 * "Key list index"): which key ids make one page, without reading the account's key records.
 *
 * - Newest/oldest first over All, Current or Revoked with no search: a range of a sorted set, so a
 *   page costs its own size (Revoked walks `keyorder` skipping the at most 100 current keys).
 * - Any other filter (Active, Expired, Limit reached, Rate limited): the current keys only (at most
 *   the account's active-key limit), their `keyinfo` fields in one HMGET.
 * - A search or another sort: every key's `keyinfo` fields (one HGETALL of small fields), never the
 *   records.
 *
 * An account whose index is missing or incomplete (keys made before the index, a Cluster step cut
 * short) gets it built from its records on its first list (`ensureIndex`).
 */
import type { KeyStatusFilter } from '../core/key-page.ts';
import { KEY_INFO_BUILT, parseKeyInfo, type KeyInfo } from '../schema/redis-schema.ts';
import { ConsoleError } from './errors.ts';
import type { ConsoleService } from './service.ts';

/** Builds the account's index from its records when it holds fewer keys than the account has. */
export async function ensureIndex(kc: ConsoleService, account: string): Promise<void> {
  const s = kc.schema;
  const [all, indexed, orphans] = await Promise.all([
    kc.redis.scard(s.accountKeys(account)),
    kc.redis.zcard(s.keyOrder(account)),
    kc.redis.hget(s.keyInfo(account), KEY_INFO_BUILT),
  ]);
  if (orphans !== null && all <= indexed + Number(orphans)) return;
  const ids = await kc.redis.smembers(s.accountKeys(account));
  const digests = await Promise.all(ids.map((id) => kc.redis.get(s.keyIdIndex(id))));
  const records = digests.filter((d): d is string => d !== null && /^[0-9a-f]{64}$/.test(d)).map((d) => s.keyRecord(d));
  await kc.indexRecords(account, records, String(ids.length - records.length));
}

export interface Cursor {
  readonly value: string | number;
  readonly id: string;
}

export interface IdPage {
  readonly ids: { id: string; createdAt: number }[];
  readonly more: boolean;
  readonly total: number;
}

/** True when the page can be cut from a sorted set: newest/oldest first, no search, All/Current/Revoked. */
export function rangeable(status: KeyStatusFilter, sort: string, q: string): boolean {
  return q.trim() === '' && (sort === 'created' || sort === '-created') && (status === 'all' || status === 'current' || status === 'revoked');
}

/**
 * One page of ids by creation time from `keyorder` (All, Revoked) or `keycur` (Current), after the
 * cursor; ties in created_at are ordered by id, like the sorted set itself.
 */
export async function rangePage(kc: ConsoleService, account: string, status: 'all' | 'current' | 'revoked', desc: boolean, cursor: Cursor | null, limit: number): Promise<IdPage> {
  const s = kc.schema;
  const r = kc.redis;
  const z = status === 'current' ? s.keyCurrent(account) : s.keyOrder(account);
  const [cur, total0, totalCur] = await Promise.all([
    status === 'revoked' ? r.zrange(s.keyCurrent(account), '0', '-1') : Promise.resolve([] as string[]),
    r.zcard(s.keyOrder(account)),
    r.zcard(s.keyCurrent(account)),
  ]);
  const skip = new Set(cur);
  const total = status === 'all' ? total0 : status === 'current' ? totalCur : total0 - totalCur;
  const start = cursor === null ? 0 : await after(kc, z, desc, cursor);
  const want = limit + skip.size + 1;
  const flat = desc ? await r.zrevrange(z, start, start + want - 1, 'WITHSCORES') : await r.zrange(z, String(start), String(start + want - 1), 'WITHSCORES');
  const ids: { id: string; createdAt: number }[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const id = flat[i]!;
    if (!skip.has(id)) ids.push({ id, createdAt: Number(flat[i + 1]) });
  }
  return { ids: ids.slice(0, limit), more: ids.length > limit, total };
}

/** The rank just after the cursor in the sorted set's order (ascending, or descending with `desc`). */
async function after(kc: ConsoleService, z: string, desc: boolean, c: Cursor): Promise<number> {
  const r = kc.redis;
  const rank = desc ? await r.zrevrank(z, c.id) : await r.zrank(z, c.id);
  const score = rank === null ? null : await r.zscore(z, c.id);
  if (rank !== null && score !== null && Number(score) === Number(c.value)) return rank + 1;
  // The cursor's key left the set (revoked while paging Current): count what sorts before it.
  const v = Number(c.value);
  if (!Number.isSafeInteger(v)) throw new ConsoleError('INVALID_INPUT', 'cursor is not one this list made');
  const [before, ties] = await Promise.all([desc ? r.zcount(z, `(${v}`, '+inf') : r.zcount(z, '-inf', `(${v}`), r.zrangebyscore(z, v, v)]);
  return before + ties.filter((id) => (desc ? id >= c.id : id <= c.id)).length;
}

/** The `keyinfo` entries of the given ids (Active, Expired, … over the current keys), or of every key (ids null). */
export async function infoOf(kc: ConsoleService, account: string, ids: readonly string[] | null): Promise<KeyInfo[]> {
  const s = kc.schema;
  const out: KeyInfo[] = [];
  const push = (id: string, v: string | null) => {
    if (v === null || id === KEY_INFO_BUILT) return;
    const k = parseKeyInfo(id, v);
    if (typeof k === 'string') throw new ConsoleError('CORRUPT', `account ${account}: ${k}`);
    out.push(k);
  };
  if (ids === null) {
    const h = await kc.redis.hgetall(s.keyInfo(account));
    for (const [id, v] of Object.entries(h)) push(id, v);
  } else if (ids.length > 0) {
    const vs = await kc.redis.hmget(s.keyInfo(account), ...ids);
    ids.forEach((id, i) => push(id, vs[i] ?? null));
  }
  return out;
}

/** The ids of the account's current (not revoked) keys: at most its active-key limit. */
export function currentIds(kc: ConsoleService, account: string): Promise<string[]> {
  return kc.redis.zrange(kc.schema.keyCurrent(account), '0', '-1');
}
