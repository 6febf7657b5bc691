/**
 * A page of an account's keys for the management API and the web page: search, status filter, sort
 * and cursor over the account's key list index (`src/console/key-index.ts`), with each key's status
 * right now (expired, over its spend limit per the gate record, revoked). Only the page's keys have
 * their records and usage read.
 */
import { Cluster } from 'ioredis';
import { encodeCursor, keyState, selectPage, type KeyStateOf, type PageQuery } from '../core/key-page.ts';
import { NO_GATE, parseGate } from '../schema/money.ts';
import { LIMITS } from '../schema/redis-schema.ts';
import { ConsoleError } from './errors.ts';
import { currentIds, ensureIndex, infoOf, rangePage, rangeable } from './key-index.ts';
import type { ManagedKeyView } from './keys.ts';
import type { ConsoleService } from './service.ts';

export interface KeyListPage {
  readonly keys: (ManagedKeyView & KeyStateOf)[];
  readonly next: string | null;
  readonly total: number;
  /** The account's active keys (revoked ones do not count) and the most it may have. */
  readonly activeKeys: number;
  readonly maxActiveKeys: number;
}

export async function serverNow(mc: ConsoleService): Promise<number> {
  const redis = mc.redis;
  const [sec, micro] = redis instanceof Cluster ? await redis.nodes('master')[0]!.time() : await redis.time();
  return Number(sec) * 1000 + Math.floor(Number(micro) / 1000);
}

/**
 * True when a key's (or the account's) request or token window is used up now. Reads the view's `rates` and `rateUse`
 * (the rate limits' fields) structurally: a view without them (no rate limits) is never rate-limited.
 */
export function rateLimitedNow(v: object): boolean {
  type Use = { used: number } | null | undefined;
  type Rate = { count: number } | null | undefined;
  const x = v as { rates?: { requests?: Rate; tokens?: Rate }; rateUse?: { requests?: Use; tokens?: Use } };
  const full = (r: Rate, u: Use) => !!r && !!u && u.used >= r.count;
  return !!x.rates && !!x.rateUse && (full(x.rates.requests, x.rateUse.requests) || full(x.rates.tokens, x.rateUse.tokens));
}

export async function listKeyPage(mc: ConsoleService, account: string, q: PageQuery): Promise<KeyListPage> {
  const s = mc.schema;
  const redis = mc.redis;
  await ensureIndex(mc, account);
  const [gateHash, active, now, accountRates] = await Promise.all([redis.hgetall(s.gate(account)), redis.scard(s.accountActiveKeys(account)), serverNow(mc), mc.rates.accountRates(account)]);
  const gate = Object.keys(gateHash).length === 0 ? NO_GATE : parseGate(gateHash);
  if (typeof gate === 'string') throw new ConsoleError('CORRUPT', `account ${account}: gate record does not follow the schema (${gate})`);
  // A used-up account window refuses every key of the account: each current key is then rate-limited too.
  const accountFull = rateLimitedNow({ rates: accountRates, rateUse: await mc.rates.use(account, null, accountRates, now) });
  const stateOf = (k: Parameters<typeof keyState>[0]) => keyState(k, now, gate.limits?.get(k.id), accountFull || rateLimitedNow(k));
  let ids: string[];
  let next: string | null;
  let total: number;
  if (rangeable(q.status, q.sort, q.q)) {
    // Newest or oldest first with no search: a range of the index, the page's own size.
    const r = await rangePage(mc, account, q.status as 'all' | 'current' | 'revoked', q.sort === '-created', q.cursor, q.limit);
    ids = r.ids.map((k) => k.id);
    const last = r.ids[r.ids.length - 1];
    next = r.more && last ? encodeCursor(q.sort, last.createdAt, last.id) : null;
    total = r.total;
  } else {
    // Other filters cover the current keys only (at most the active-key limit); a search or another
    // sort reads every key's small index fields, never the records.
    const subsetOfCurrent = q.status !== 'all' && q.status !== 'revoked';
    const infos = await infoOf(mc, account, subsetOfCurrent ? await currentIds(mc, account) : null);
    // Whether a key is rate-limited (and so not active) is in its rate windows: with rate limits, the
    // Active and Rate limited filters read the views of the current keys (at most the active-key limit).
    const rated = q.status === 'active' || q.status === 'rate_limited';
    const views = rated ? new Map((await Promise.all(infos.map((k) => mc.getKeyView(k.id)))).map((v) => [v.id, v])) : null;
    const page = selectPage(infos, q, (k) => stateOf(views?.get(k.id) ?? k));
    ids = page.keys.map((k) => k.id);
    next = page.next;
    total = page.total;
  }
  const views = await Promise.all(ids.map((id) => mc.getKeyView(id)));
  return {
    keys: views.map((v) => ({ ...v, ...stateOf(v) })),
    next,
    total,
    activeKeys: active,
    maxActiveKeys: LIMITS.activeKeysPerAccount,
  };
}
