/**
 * Roles are enforced by the API, route by route: a person signed in with SSO (a session in Redis, as
 * the sign-in makes it; the sign-in itself is test/console-web-sso.test.ts) calls every route of the
 * management API as an owner, a developer and a viewer. Where the role may not, the answer is 403
 * and nothing in Redis changed (every key compared, byte for byte); where it may, the route runs.
 * A developer changes the keys they created and no other; a viewer reveals nothing. The table
 * covers every route the server serves, and a person's changes are audited as the person.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { ROUTE_NEEDS, type Need } from '../src/console-api/roles.ts';
import { SessionStore, type SessionUser } from '../src/console-web/sessions.ts';
import type { Redis } from 'ioredis';
import { snapshot as redisSnapshot } from './helpers/redis-dump.ts';
import { destroyRedis, freePort, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startWebConsole, type WebConsole } from './helpers/web-console.ts';

const A = 'acct-roles';
const B = 'acct-other';
const ISS = 'http://127.0.0.1:9/issuer';
const person = (sub: string): SessionUser => ({ iss: ISS, sub, email: `${sub}@example.com`, emailVerified: true, name: `${sub}@example.com` });
const PEOPLE = { owner: person('olga'), developer: person('dev'), viewer: person('vic') } as const;
type Role = keyof typeof PEOPLE;

let redis: RedisServer;
let konsole: WebConsole;
let origin: string;
const cookies = new Map<Role, { cookie: string; csrf: string }>();

beforeAll(async () => {
  redis = await startRedis();
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  // SSO configured (its issuer is never reached here: the sessions are made as the sign-in makes them).
  konsole = await startWebConsole(redis.url, { KEYGATE_OIDC_ISSUER: ISS, KEYGATE_OIDC_CLIENT_ID: 'keygate', KEYGATE_OIDC_CLIENT_SECRET: 'secret', KEYGATE_CONSOLE_PUBLIC_ORIGIN: origin }, { port });
  const mc = konsole.server.console;
  for (const [role, p] of Object.entries(PEOPLE)) await mc.members.add(A, { subject: p.sub }, role, CLI_ACTOR);
  await mc.members.add(B, { subject: 'someone' }, 'owner', CLI_ACTOR);
  const sessions = new SessionStore(mc.redis, 'kg', 3600_000);
  for (const [role, p] of Object.entries(PEOPLE) as [Role, SessionUser][]) {
    const { id, record } = await sessions.create('', A, p.name, p);
    cookies.set(role, { cookie: `keygate_session=${id}`, csrf: record.csrf });
  }
}, 60_000);

afterAll(async () => {
  await konsole?.close();
  if (redis) await destroyRedis(redis);
});

async function call(role: Role, method: string, path: string, body?: unknown): Promise<{ status: number; json: any; headers: Headers }> {
  const c = cookies.get(role)!;
  const res = await fetch(`${konsole.url}${path}`, {
    method,
    headers: { cookie: c.cookie, origin, 'x-csrf-token': c.csrf, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null, headers: res.headers };
}

/** The webhook worker's own schedule (it runs in the background on earlier events): not a change a request made. */
const BACKGROUND = /:\{wh\}:(due|eventaccts)$/;

/** Every key of the store and its content (the helper's exact picture), to prove a refusal changed nothing. */
async function snapshot(): Promise<Map<string, string>> {
  const { values } = await redisSnapshot(konsole.server.console.redis as Redis);
  return new Map(Object.entries(values).filter(([k]) => !BACKGROUND.test(k)));
}

/** A key of account A created by `creator` (a person's sub) or by the CLI (null). */
async function keyBy(creator: string | null): Promise<string> {
  const mc = konsole.server.console;
  const k = await mc.createKey({ account: A, name: `k-${Math.random().toString(36).slice(2, 8)}` }, CLI_ACTOR);
  if (creator) await mc.members.setCreator(A, k.id, { iss: ISS, sub: creator });
  return k.id;
}

interface Case {
  route: string;
  /** The request; `key` is a key of account A (the developer's own when `own`). */
  request: (ids: { key: string; member: string }) => { path: string; body?: unknown };
}

const CASES: Case[] = [
  { route: 'GET /v1/accounts/:account/keys', request: () => ({ path: `/v1/accounts/${A}/keys` }) },
  { route: 'POST /v1/accounts/:account/keys', request: () => ({ path: `/v1/accounts/${A}/keys`, body: { name: 'made by a person' } }) },
  { route: 'GET /v1/keys/:id', request: ({ key }) => ({ path: `/v1/keys/${key}` }) },
  { route: 'PATCH /v1/keys/:id', request: ({ key }) => ({ path: `/v1/keys/${key}`, body: { name: 'renamed' } }) },
  { route: 'POST /v1/keys/:id/reveal', request: ({ key }) => ({ path: `/v1/keys/${key}/reveal`, body: {} }) },
  { route: 'POST /v1/keys/:id/revoke', request: ({ key }) => ({ path: `/v1/keys/${key}/revoke`, body: {} }) },
  { route: 'POST /v1/keys/:id/roll', request: ({ key }) => ({ path: `/v1/keys/${key}/roll`, body: {} }) },
  { route: 'GET /v1/keys/:id/usage', request: ({ key }) => ({ path: `/v1/keys/${key}/usage` }) },
  { route: 'GET /v1/accounts/:account', request: () => ({ path: `/v1/accounts/${A}` }) },
  { route: 'PATCH /v1/accounts/:account', request: () => ({ path: `/v1/accounts/${A}`, body: { rate: null } }) },
  { route: 'POST /v1/accounts/:account/disable', request: () => ({ path: `/v1/accounts/${A}/disable`, body: {} }) },
  { route: 'POST /v1/accounts/:account/enable', request: () => ({ path: `/v1/accounts/${A}/enable`, body: {} }) },
  { route: 'POST /v1/accounts/:account/credits', request: () => ({ path: `/v1/accounts/${A}/credits`, body: { amount_micros: 1_000_000, reference: 'self-funded' } }) },
  { route: 'GET /v1/accounts/:account/ledger', request: () => ({ path: `/v1/accounts/${A}/ledger` }) },
  { route: 'GET /v1/accounts/:account/usage', request: () => ({ path: `/v1/accounts/${A}/usage` }) },
  { route: 'POST /v1/usage', request: ({ key }) => ({ path: '/v1/usage', body: { key_id: key, amount_micros: 1, request_id: 'req-1' } }) },
  { route: 'GET /v1/usage', request: () => ({ path: `/v1/usage?since=2020-01-01T00:00:00Z&account=${A}` }) },
  { route: 'GET /v1/audit', request: () => ({ path: `/v1/audit?account=${A}` }) },
  { route: 'POST /v1/tokens', request: () => ({ path: '/v1/tokens', body: { name: 'mine', account: null } }) },
  { route: 'GET /v1/tokens', request: () => ({ path: '/v1/tokens' }) },
  { route: 'POST /v1/tokens/:id/revoke', request: () => ({ path: '/v1/tokens/tok_0000000000000000/revoke', body: {} }) },
  { route: 'GET /v1/prices', request: () => ({ path: '/v1/prices' }) },
  { route: 'PUT /v1/prices/:model', request: () => ({ path: '/v1/prices/openai%2Fgpt-4o', body: { input_micros: 1, output_micros: 1 } }) },
  { route: 'DELETE /v1/prices/:model', request: () => ({ path: '/v1/prices/openai%2Fgpt-4o' }) },
  { route: 'GET /v1/prices/:model', request: () => ({ path: '/v1/prices/openai%2Fgpt-4o' }) },
  { route: 'GET /v1/price-catalog', request: () => ({ path: '/v1/price-catalog' }) },
  { route: 'GET /v1/accounts/:account/credentials', request: () => ({ path: `/v1/accounts/${A}/credentials` }) },
  { route: 'PUT /v1/accounts/:account/credentials/:provider', request: () => ({ path: `/v1/accounts/${A}/credentials/openai`, body: { secret: 'sk-roles-test-0000' } }) },
  { route: 'DELETE /v1/accounts/:account/credentials/:provider', request: () => ({ path: `/v1/accounts/${A}/credentials/openai` }) },
  { route: 'POST /v1/webhooks', request: () => ({ path: '/v1/webhooks', body: { url: 'https://hooks.example.com/keygate', account: A } }) },
  { route: 'GET /v1/webhooks', request: () => ({ path: '/v1/webhooks' }) },
  { route: 'DELETE /v1/webhooks/:id', request: () => ({ path: '/v1/webhooks/wh_0000000000000000' }) },
  { route: 'GET /v1/webhooks/:id/dead', request: () => ({ path: '/v1/webhooks/wh_0000000000000000/dead' }) },
  { route: 'POST /v1/webhooks/:id/dead/:event_id/replay', request: () => ({ path: '/v1/webhooks/wh_0000000000000000/dead/evt_0000000000000000/replay', body: {} }) },
  { route: 'PUT /v1/accounts/:account/alerts', request: () => ({ path: `/v1/accounts/${A}/alerts`, body: { wallet_low_micros: 5_000_000 } }) },
  { route: 'GET /v1/accounts/:account/me', request: () => ({ path: `/v1/accounts/${A}/me` }) },
  { route: 'GET /v1/accounts/:account/members', request: () => ({ path: `/v1/accounts/${A}/members` }) },
  { route: 'POST /v1/accounts/:account/members', request: () => ({ path: `/v1/accounts/${A}/members`, body: { email: `new-${Math.random().toString(36).slice(2, 8)}@example.com`, role: 'viewer' } }) },
  { route: 'PATCH /v1/accounts/:account/members/:id', request: ({ member }) => ({ path: `/v1/accounts/${A}/members/${member}`, body: { role: 'developer' } }) },
  { route: 'DELETE /v1/accounts/:account/members/:id', request: ({ member }) => ({ path: `/v1/accounts/${A}/members/${member}` }) },
];

/** Whether `role` may use a route of this need (for own-key routes: on a key it created, `own`). */
function allowed(need: Need, role: Role, own: boolean): boolean {
  if (need === 'read') return true;
  if (need === 'operator') return false;
  if (need === 'owner') return role === 'owner';
  if (need === 'create') return role !== 'viewer';
  return role === 'owner' || (role === 'developer' && own);
}

const ROLE_REFUSAL = /you are (an owner|a developer|a viewer) of acct-roles/;

describe('roles, route by route', () => {
  it('the table names every /v1 route the server serves (a new route is refused to people until it is added)', () => {
    const served = konsole.server.routes.filter((r) => r.url.startsWith('/v1/') && r.url !== '/v1/key').map((r) => `${r.method} ${r.url}`);
    expect(served.length).toBeGreaterThan(30);
    expect(served.filter((r) => !(r in ROUTE_NEEDS))).toEqual([]);
    expect(CASES.map((c) => c.route).sort()).toEqual(Object.keys(ROUTE_NEEDS).sort());
  });

  for (const c of CASES) {
    const need = ROUTE_NEEDS[c.route]!;
    const variants = need === 'own-key' ? [true, false] : [true];
    for (const role of ['owner', 'developer', 'viewer'] as const) {
      for (const own of variants) {
        const label = `${c.route} as ${role}${need === 'own-key' ? (own ? ' (a key they created)' : " (a colleague's key)") : ''}`;
        it(`${label}: ${allowed(need, role, own) ? 'runs' : '403, nothing changed'}`, async () => {
          const mc = konsole.server.console;
          // The key: the role's own (or for the owner, any), or a colleague's; a member to change or remove.
          const key = await keyBy(own ? PEOPLE[role].sub : 'colleague');
          const member = (await mc.members.add(A, { email: `m-${Math.random().toString(36).slice(2, 8)}@example.com` }, 'viewer', CLI_ACTOR)).id;
          const { path, body } = c.request({ key, member });
          const method = c.route.split(' ')[0]!;
          const before = await snapshot();
          const r = await call(role, method, path, body ?? (method === 'GET' || method === 'DELETE' ? undefined : {}));
          const after = allowed(need, role, own) ? null : await snapshot();
          // The account stays below its 100 active keys: what the case made is revoked after it.
          for (const k of await mc.listKeys(A)) if (k.status === 'active') await mc.revokeKey(k.id);
          // A webhook the owner made goes too (its failing deliveries would change the store in the background).
          for (const w of (await call('owner', 'GET', '/v1/webhooks')).json.webhooks) await call('owner', 'DELETE', `/v1/webhooks/${w.id}`);
          if (allowed(need, role, own)) {
            expect(r.json?.error?.message ?? '', `${label}: ${JSON.stringify(r.json)}`).not.toMatch(ROLE_REFUSAL);
            if (/keys|members|alerts|\/me$/.test(c.route) && need !== 'operator') expect(r.status, `${label}: ${JSON.stringify(r.json)}`).toBeLessThan(300);
          } else {
            expect(r.status, `${label}: ${JSON.stringify(r.json)}`).toBe(403);
            expect(r.json.error.code).toBe('FORBIDDEN');
            expect(r.json.error.message).toMatch(/you are (an owner|a developer|a viewer) of acct-roles|operator/);
            expect([...after!].filter(([k, v]) => before.get(k) !== v).map(([k]) => k)).toEqual([]);
            expect(after!.size).toBe(before.size);
          }
        });
      }
    }
  }

  it("a person's change is audited as the person; the key they created is theirs (and a roll keeps it theirs)", async () => {
    const created = await call('developer', 'POST', `/v1/accounts/${A}/keys`, { name: 'audited' });
    expect(created.status).toBe(201);
    const audit = await call('owner', 'GET', `/v1/audit?account=${A}&limit=5`);
    const ev = audit.json.events.find((e: { action: string; key_id: string }) => e.action === 'create' && e.key_id === created.json.id);
    expect(ev.actor).toEqual({ type: 'user', id: 'dev', name: 'dev@example.com' });
    const rolled = await call('developer', 'POST', `/v1/keys/${created.json.id}/roll`, {});
    expect(rolled.status).toBe(201);
    expect((await call('developer', 'POST', `/v1/keys/${rolled.json.id}/reveal`, {})).status).toBe(200);
    const me = await call('developer', 'GET', `/v1/accounts/${A}/me`);
    expect(me.json).toMatchObject({ type: 'user', name: 'dev@example.com', role: 'developer' });
    expect(me.json.created_keys).toEqual(expect.arrayContaining([created.json.id, rolled.json.id]));
  });

  it('a key created or rolled while its creator cannot be recorded is still answered (201, the key shown), the creator reported unfinished', async () => {
    const members = konsole.server.console.members;
    const setCreator = members.setCreator;
    members.setCreator = async () => {
      throw new Error('the {mgmt} master is down');
    };
    try {
      const created = await call('developer', 'POST', `/v1/accounts/${A}/keys`, { name: 'creator-lost' });
      expect(created.status).toBe(201);
      expect(created.json.key).toEqual(expect.any(String));
      expect(created.headers.get('keygate-unfinished')).toBe('key creator');
      const rolled = await call('owner', 'POST', `/v1/keys/${created.json.id}/roll`, {});
      expect(rolled.status).toBe(201);
      expect(rolled.json.key).toEqual(expect.any(String));
      expect(rolled.headers.get('keygate-unfinished')).toBe('key creator');
    } finally {
      members.setCreator = setCreator;
    }
  });

  it("another account stays unknown to a person (404, as for a token), whatever their role", async () => {
    const other = await konsole.server.console.createKey({ account: B, name: 'not yours' }, CLI_ACTOR);
    for (const role of ['owner', 'developer', 'viewer'] as const) {
      expect((await call(role, 'GET', `/v1/accounts/${B}/keys`)).status).toBe(404);
      expect((await call(role, 'GET', `/v1/keys/${other.id}`)).status).toBe(404);
    }
    expect((await call('owner', 'POST', `/v1/keys/${other.id}/reveal`, {})).status).toBe(404);
  });

  it('a person removed from the account is signed out at their next request; another role applies at once', async () => {
    const mc = konsole.server.console;
    const sessions = new SessionStore(mc.redis, 'kg', 3600_000);
    const p = person('temp');
    const m = await mc.members.add(A, { subject: 'temp' }, 'owner', CLI_ACTOR);
    const { id, record } = await sessions.create('', A, p.name, p);
    cookies.set('temp' as Role, { cookie: `keygate_session=${id}`, csrf: record.csrf });
    expect((await call('temp' as Role, 'GET', `/v1/accounts/${A}/members`)).status).toBe(200);
    await mc.members.update(A, m.id, 'viewer', CLI_ACTOR);
    expect((await call('temp' as Role, 'GET', `/v1/accounts/${A}/members`)).status).toBe(403);
    await mc.members.remove(A, m.id, CLI_ACTOR);
    const r = await call('temp' as Role, 'GET', `/v1/accounts/${A}/keys`);
    expect(r.status).toBe(401);
    expect(r.json.error.message).toMatch(/no longer a member/);
    expect(await sessions.get(id)).toBeNull();
  });

  it('an unknown route is 404 to a person, as to a token; the Account select takes only an account the person is a member of', async () => {
    expect((await call('viewer', 'GET', '/v1/no-such-route')).status).toBe(404);
    const pick = async (role: Role, account: string) => {
      const c = cookies.get(role)!;
      const r = await fetch(`${konsole.url}/session/account`, { method: 'POST', headers: { cookie: c.cookie, origin, 'x-csrf-token': c.csrf, 'content-type': 'application/json' }, body: JSON.stringify({ account }) });
      return { status: r.status, json: await r.json() };
    };
    const before = await snapshot();
    expect((await pick('owner', B)).status).toBe(404); // a member of acct-roles only
    expect((await pick('owner', 'no-such-account')).status).toBe(404);
    expect(await snapshot()).toEqual(before);
    const same = await pick('owner', A);
    expect(same.status).toBe(200);
    expect(same.json).toMatchObject({ account: A, role: 'owner', user: { sub: 'olga' }, accounts: [{ account: A, role: 'owner' }] });
  });

  it('members: an email matches only when verified; CONFLICT on a second membership; bad input changes nothing', async () => {
    const mc = konsole.server.console;
    await mc.members.add(A, { email: 'Verified@Example.com' }, 'developer', CLI_ACTOR);
    const base = { iss: ISS, sub: 'x-1', email: 'verified@example.com' };
    expect(await mc.members.roleOf(A, { ...base, emailVerified: true })).toBe('developer');
    expect(await mc.members.roleOf(A, { ...base, emailVerified: false })).toBeNull();
    expect((await mc.members.accountsOf({ ...base, emailVerified: false })).length).toBe(0);
    const dup = await call('owner', 'POST', `/v1/accounts/${A}/members`, { email: 'verified@example.com', role: 'viewer' });
    expect(dup.status).toBe(409);
    const before = await snapshot();
    for (const bad of [{ role: 'viewer' }, { email: 'a@b.c', subject: 's', role: 'viewer' }, { email: 'not an email', role: 'viewer' }, { email: 'a@b.c', role: 'admin' }]) {
      const r = await call('owner', 'POST', `/v1/accounts/${A}/members`, bad);
      expect(r.status, JSON.stringify(bad)).toBe(400);
    }
    expect(await snapshot()).toEqual(before);
  });
});
