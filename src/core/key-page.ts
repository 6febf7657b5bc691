/**
 * One page of an account's keys: the status a key is in right now, the search, the status filter,
 * the sort and the cursor (pure: no I/O). The console reads the account's key records and its gate
 * record, and this picks the page; the usage of the page's keys is read after, for those keys only.
 */

/** The status a key is in at an instant, as the page and the list filter name it. */
export const KEY_STATES = ['active', 'expired', 'limit_reached', 'rate_limited', 'revoked'] as const;
export type KeyState = (typeof KEY_STATES)[number];

/** The list filter: one state, `current` (every key not revoked) or `all`. */
export const KEY_STATUS_FILTERS = ['current', 'all', ...KEY_STATES] as const;
export type KeyStatusFilter = (typeof KEY_STATUS_FILTERS)[number];

/** Sort orders: a field, `-` first for descending. */
export const KEY_SORTS = ['created', '-created', 'name', '-name', 'expires', '-expires'] as const;
export type KeySort = (typeof KEY_SORTS)[number];

export const PAGE_DEFAULT = 50;
export const PAGE_MAX = 200;

/** What the page needs of a key record to place it. */
export interface ListedKey {
  readonly id: string;
  readonly name: string;
  readonly hint: string;
  readonly status: 'active' | 'revoked';
  readonly expiresAt: number | null;
  readonly createdAt: number;
}

export interface KeyStateOf {
  readonly state: KeyState;
  /** When a reached spend limit lifts (epoch ms); Infinity = never (a total limit); null = not reached. */
  readonly limitUntil: number | null;
}

/** A key's state: revoked, then expired, then over its spend limit (the gate's block), then rate-limited, else active. */
export function keyState(k: ListedKey, nowMs: number, limitUntil: number | undefined, rateLimited = false): KeyStateOf {
  if (k.status === 'revoked') return { state: 'revoked', limitUntil: null };
  if (k.expiresAt !== null && k.expiresAt <= nowMs) return { state: 'expired', limitUntil: null };
  if (limitUntil !== undefined && nowMs < limitUntil) return { state: 'limit_reached', limitUntil };
  if (rateLimited) return { state: 'rate_limited', limitUntil: null };
  return { state: 'active', limitUntil: null };
}

export function matchesStatus(state: KeyState, filter: KeyStatusFilter): boolean {
  if (filter === 'all') return true;
  if (filter === 'current') return state !== 'revoked';
  return state === filter;
}

/** The search: a case-insensitive substring of the name, or the exact key id or hint. */
export function matchesQuery(k: ListedKey, q: string): boolean {
  const t = q.trim();
  if (t === '') return true;
  return k.id === t || k.hint === t || k.name.toLowerCase().includes(t.toLowerCase());
}

type SortValue = string | number;

function sortValue(k: ListedKey, field: string): SortValue {
  if (field === 'name') return k.name.toLowerCase();
  // A key without expiry sorts after every dated one, ascending.
  if (field === 'expires') return k.expiresAt ?? Number.MAX_SAFE_INTEGER;
  return k.createdAt;
}

function compare(a: SortValue, b: SortValue): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The cursor: where the last page ended (sort value and id), opaque to callers. */
export function encodeCursor(sort: KeySort, value: SortValue, id: string): string {
  return Buffer.from(JSON.stringify([sort, value, id]), 'utf8').toString('base64url');
}

/** The decoded cursor, or null when it is not one this sort made. */
export function decodeCursor(cursor: string, sort: KeySort): { value: SortValue; id: string } | null {
  if (cursor.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || v.length !== 3 || v[0] !== sort) return null;
    const [, value, id] = v as unknown[];
    if ((typeof value !== 'string' && typeof value !== 'number') || typeof id !== 'string' || id.length > 64) return null;
    return { value, id };
  } catch {
    return null;
  }
}

export interface PageQuery {
  readonly limit: number;
  readonly cursor: { value: SortValue; id: string } | null;
  readonly status: KeyStatusFilter;
  readonly q: string;
  readonly sort: KeySort;
}

export interface KeyPage<K extends ListedKey> {
  readonly keys: (K & KeyStateOf)[];
  /** The cursor of the next page; null on the last. */
  readonly next: string | null;
  /** Keys that match the search and the filter, on every page. */
  readonly total: number;
}

/** Filters, sorts and cuts one page. Ties in the sort value are broken by key id, so pages never overlap. */
export function selectPage<K extends ListedKey>(keys: readonly K[], q: PageQuery, stateOf: (k: K) => KeyStateOf): KeyPage<K> {
  const desc = q.sort.startsWith('-');
  const field = desc ? q.sort.slice(1) : q.sort;
  const dir = desc ? -1 : 1;
  const matched: { k: K & KeyStateOf; v: SortValue }[] = [];
  for (const k of keys) {
    if (!matchesQuery(k, q.q)) continue;
    const s = stateOf(k);
    if (!matchesStatus(s.state, q.status)) continue;
    matched.push({ k: { ...k, ...s }, v: sortValue(k, field) });
  }
  const order = (a: { v: SortValue; id: string }, b: { v: SortValue; id: string }) => dir * (compare(a.v, b.v) || compare(a.id, b.id));
  matched.sort((a, b) => order({ v: a.v, id: a.k.id }, { v: b.v, id: b.k.id }));
  let start = 0;
  if (q.cursor) {
    const c = q.cursor;
    start = matched.findIndex((m) => order({ v: m.v, id: m.k.id }, { v: c.value, id: c.id }) > 0);
    if (start === -1) start = matched.length;
  }
  const page = matched.slice(start, start + q.limit);
  const last = page[page.length - 1];
  const next = start + q.limit < matched.length && last ? encodeCursor(q.sort, last.v, last.k.id) : null;
  return { keys: page.map((m) => m.k), next, total: matched.length };
}
