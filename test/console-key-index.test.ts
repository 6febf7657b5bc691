/**
 * The per-account key list index and a key's daily usage, over real HTTP against a real Redis:
 * a page of the key list costs its own size in Redis commands (not the account's), the index
 * follows every create, revoke, roll and update, an account without the index gets it built on its
 * first list, a cursor survives its key leaving the list; `GET /v1/keys/{id}/usage` answers the
 * days the usage-record script counted.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import * as lua from '../src/console/scripts.ts';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { callApi, startTestConsole, type ApiResponse } from './helpers/console-api.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

let redis: RedisServer;
let r: Redis;
let srv: ConsoleServer;
let base: string;
let admin: string;
let owner: string;
const ACCT = `idx-${randomBytes(4).toString('hex')}`;
const s = schema();

beforeAll(async () => {
  redis = await startRedis();
  r = new Redis(redis.url);
  ({ srv, base, admin, owner } = await startTestConsole(redis.url, ACCT));
}, 60_000);

afterAll(async () => {
  r?.disconnect();
  await srv?.close();
  if (redis) await destroyRedis(redis);
});

const get = (path: string, token = owner): Promise<ApiResponse> => callApi(base, 'GET', path, { token });
const keysPath = (account: string, q: Record<string, string | number> = {}) =>
  `/v1/accounts/${account}/keys?${new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)]))}`;
const ids = (res: ApiResponse): string[] => res.body.keys.map((k: { id: string }) => k.id);

/** Redis commands run by the server while `fn` runs (INFO commandstats, less the INFO/CONFIG of the count itself). */
async function commandsDuring(fn: () => Promise<unknown>): Promise<number> {
  await r.config('RESETSTAT');
  await fn();
  const info = await r.info("commandstats");
  if (process.env.SHOW_STATS) console.log(info);
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) if (!['info', 'config|resetstat', 'config'].includes(m[1]!)) n += Number(m[2]);
  return n;
}

async function walk(account: string, q: Record<string, string | number>): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const res = await get(keysPath(account, cursor === null ? q : { ...q, cursor }));
    expect(res.status).toBe(200);
    out.push(...ids(res));
    cursor = res.body.next_cursor;
    if (cursor === null) break;
  }
  return out;
}

describe('the key list index', () => {
  const made: { id: string; createdAt: number; name?: string }[] = [];
  const revoked = new Set<string>();
  const order = () => [...made].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1)).map((k) => k.id);

  beforeAll(async () => {
    for (let i = 0; i < 160; i++) {
      const name = `svc ${String(i).padStart(3, '0')}`;
      const c = await srv.console.createKey({ account: ACCT, name }, CLI_ACTOR);
      made.push({ id: c.id, createdAt: c.record.createdAt, name });
      // 130 revoked, 30 current: an account holds at most 100 active keys, the rest pile up revoked.
      if (i < 130) {
        await srv.console.revokeKey(c.id, CLI_ACTOR);
        revoked.add(c.id);
      }
    }
  }, 120_000);

  it('a page by creation costs its own size in Redis commands, not the account', async () => {
    const small = await commandsDuring(() => get(keysPath(ACCT, { status: 'revoked', sort: '-created', limit: 5 })));
    const all = await commandsDuring(() => get(keysPath(ACCT, { status: 'all', limit: 5 })));
    const current = await commandsDuring(() => get(keysPath(ACCT, { limit: 5 })));
    const bigger = await commandsDuring(() => get(keysPath(ACCT, { status: 'revoked', sort: '-created', limit: 10 })));
    // Reading every record (the old way) was at least 2 commands per key of the account: 320 here.
    for (const n of [small, all, current]) expect(n).toBeLessThan(80);
    // Five more keys on the page cost a bounded number of commands per key.
    expect(bigger - small).toBeLessThanOrEqual(5 * 12);
    // A search reads the index's small fields once (one HGETALL), never a record per key.
    const search = await commandsDuring(() => get(keysPath(ACCT, { status: 'all', q: 'svc 15' })));
    expect(search).toBeLessThan(150);
  });

  it('pages every key once, in order, for All, Current and Revoked, both directions', async () => {
    const all = order();
    expect(await walk(ACCT, { status: 'all', limit: 17 })).toEqual(all);
    expect(await walk(ACCT, { status: 'all', limit: 23, sort: '-created' })).toEqual([...all].reverse());
    expect(await walk(ACCT, { status: 'revoked', limit: 19, sort: '-created' })).toEqual([...all].reverse().filter((id) => revoked.has(id)));
    expect(await walk(ACCT, { status: 'revoked', limit: 7 })).toEqual(all.filter((id) => revoked.has(id)));
    expect(await walk(ACCT, { status: 'current', limit: 4 })).toEqual(all.filter((id) => !revoked.has(id)));
    const first = await get(keysPath(ACCT, { status: 'revoked', limit: 1 }));
    expect(first.body.total).toBe(130);
    expect((await get(keysPath(ACCT, { status: 'current', limit: 1 }))).body.total).toBe(30);
  });

  it('follows updates, rolls and revokes: search by a new name, a rolled key, a cursor whose key was revoked', async () => {
    const cur = order().filter((id) => !revoked.has(id));
    // The oldest current key by (created, id): keys made in one millisecond are ordered by id, so
    // it is not always 'svc 130' — search for the name it had.
    const oldName = made.find((k) => k.id === cur[0])!.name!;
    expect(ids(await get(keysPath(ACCT, { q: oldName })))).toEqual([cur[0]]);
    await srv.console.updateKey(cur[0]!, { name: 'Renamed Billing' }, CLI_ACTOR);
    expect(ids(await get(keysPath(ACCT, { q: 'renamed billing' })))).toEqual([cur[0]]);
    expect(ids(await get(keysPath(ACCT, { q: oldName })))).toEqual([]);
    // Expiry sort reads the index's expires_at.
    await srv.console.updateKey(cur[5]!, { expiresAt: new Date(Date.now() + 3_600_000).toISOString() }, CLI_ACTOR);
    expect(ids(await get(keysPath(ACCT, { sort: 'expires', limit: 1 })))).toEqual([cur[5]]);
    const rolled = await srv.console.rollKey(cur[1]!, 0, CLI_ACTOR);
    revoked.add(cur[1]!);
    made.push({ id: rolled.id, createdAt: rolled.record.createdAt });
    const current = await walk(ACCT, { status: 'current', limit: 200 });
    expect(current).toContain(rolled.id);
    expect(current).not.toContain(cur[1]);
    expect(ids(await get(keysPath(ACCT, { status: 'revoked', sort: '-created', limit: 200 })))).toContain(cur[1]);
    // Paging Current newest first; the last key of page one is revoked before page two is asked.
    const p1 = await get(keysPath(ACCT, { status: 'current', sort: '-created', limit: 6 }));
    const gone = ids(p1)[5]!;
    await srv.console.revokeKey(gone, CLI_ACTOR);
    revoked.add(gone);
    const rest = await walk(ACCT, { status: 'current', sort: '-created', limit: 6, cursor: p1.body.next_cursor });
    const expected = order().reverse().filter((id) => !revoked.has(id));
    expect([...ids(p1).slice(0, 5), ...rest]).toEqual(expected);
  });

  it('an account without the index (made before it) gets it built on its first list, the same pages', async () => {
    const before = await walk(ACCT, { status: 'all', limit: 50, sort: '-created' });
    const byName = await walk(ACCT, { status: 'all', limit: 200, sort: 'name' });
    await r.del(s.keyOrder(ACCT), s.keyCurrent(ACCT), s.keyInfo(ACCT));
    expect(await walk(ACCT, { status: 'all', limit: 50, sort: '-created' })).toEqual(before);
    expect(await walk(ACCT, { status: 'all', limit: 200, sort: 'name' })).toEqual(byName);
    expect(await r.zcard(s.keyOrder(ACCT))).toBe(made.length);
    expect(await r.hget(s.keyInfo(ACCT), '~built')).toBe('0');
    // Built once: the next list runs no script and costs its page.
    const n = await commandsDuring(() => get(keysPath(ACCT, { limit: 5 })));
    expect(await r.info('commandstats')).not.toMatch(/cmdstat_eval/);
    expect(n).toBeLessThan(80);
  });

  it('an index entry is only replaced by a newer rev (a late build never undoes a revoke)', async () => {
    const id = order().find((x) => revoked.has(x))!;
    const held = await r.hget(s.keyInfo(ACCT), id);
    const n = await r.eval(lua.INDEX_PUT, 3, s.keyOrder(ACCT), s.keyCurrent(ACCT), s.keyInfo(ACCT), '', id, '1', '1', '', 'active', 'kg_x', 'stale');
    expect(n).toBe(0);
    expect(await r.hget(s.keyInfo(ACCT), id)).toBe(held);
    expect(await r.zscore(s.keyCurrent(ACCT), id)).toBeNull();
  });
});

describe("a key's daily usage", () => {
  it('GET /v1/keys/{id}/usage: 30 UTC days, oldest first, today with the spend, requests and tokens booked', async () => {
    const k = await srv.console.createKey({ account: ACCT, name: 'metered' }, CLI_ACTOR);
    // A day older than the 35 kept, left from long ago: dropped when today's first usage is booked.
    const kd = s.keyDays(ACCT, k.id);
    const today = Math.floor(Date.now() / 86_400_000);
    await r.hset(kd, String(today - 40), '5 1 1 1');
    const book = (n: number, body: Record<string, unknown>) =>
      callApi(base, 'POST', '/v1/usage', { token: admin, body: { key_id: k.id, request_id: `req-${k.id}-${n}`, ...body } });
    expect((await book(1, { amount_micros: 1200, input_tokens: 100, output_tokens: 20 })).status).toBe(200);
    expect((await book(2, { amount_micros: 800, input_tokens: 50 })).status).toBe(200);
    expect((await book(2, { amount_micros: 800, input_tokens: 50 })).status).toBe(200); // a repeat changes nothing
    expect((await book(3, { amount_micros: 1 })).status).toBe(200);
    const res = await get(`/v1/keys/${k.id}/usage?days=30`);
    expect(res.status).toBe(200);
    expect(res.body.key_id).toBe(k.id);
    expect(res.body.days).toHaveLength(30);
    const last = res.body.days[29];
    expect(last).toEqual({ day: new Date(today * 86_400_000).toISOString().slice(0, 10), amount_micros: 2001, requests: 3, input_tokens: 150, output_tokens: 20 });
    expect(res.body.days.slice(0, 29).every((d: { amount_micros: number; requests: number }) => d.amount_micros === 0 && d.requests === 0)).toBe(true);
    expect(res.body.days[0].day < res.body.days[29].day).toBe(true);
    expect(await r.hkeys(kd)).toEqual([String(today)]);
    const ttl = await r.ttl(kd);
    expect(ttl).toBeGreaterThan(34 * 86400);
    expect(ttl).toBeLessThanOrEqual(35 * 86400);
    // The operator sees it too; the default is 30 days; 7 days gives 7.
    expect((await get(`/v1/keys/${k.id}/usage`, admin)).body.days).toHaveLength(30);
    expect((await get(`/v1/keys/${k.id}/usage?days=7`)).body.days).toHaveLength(7);
  });

  it('refuses bad days with 400, and a key of another account or an unknown one with 404', async () => {
    const other = `o-${randomBytes(4).toString('hex')}`;
    const k = await srv.console.createKey({ account: other, name: 'theirs' }, CLI_ACTOR);
    expect((await get(`/v1/keys/${k.id}/usage`)).status).toBe(404);
    expect((await get(`/v1/keys/key_${'A'.repeat(20)}/usage`)).status).toBe(404);
    const mine = await srv.console.createKey({ account: ACCT, name: 'mine' }, CLI_ACTOR);
    for (const q of ['days=0', 'days=32', 'days=x', 'bogus=1']) expect((await get(`/v1/keys/${mine.id}/usage?${q}`)).status).toBe(400);
  });

  it('is in the OpenAPI document', async () => {
    const doc = (await get('/openapi.json')).body;
    expect(doc.paths['/v1/keys/{id}/usage'].get.operationId).toBe('getKeyUsage');
  });
});
