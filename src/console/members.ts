/**
 * Members of an account, one resource of the console service (`ConsoleService.members`): the people
 * who sign in on the page with OpenID Connect (docs/web-console.md, "Sign-in with SSO"), each named by
 * an email (matched only when the ID token says `email_verified: true`) or by a subject (the ID
 * token's `sub` at the configured issuer), with a role:
 *
 *   owner      everything the account-scoped token may do, plus members and webhooks
 *   developer  create keys; reveal, edit, roll and revoke the keys they created; read the rest
 *   viewer     read only (no reveal)
 *
 * Records (src/schema/management.ts, hash tag `{mgmt}`: every script runs on one Cluster slot):
 *
 *   {ns}:v1:{mgmt}:members:{account}       HASH  m:{member id} → MemberRecord JSON; e:{email} / s:{subject} → member id
 *   {ns}:v1:{mgmt}:memberof:{e|s}:{value}  SET   accounts the email / subject is a member of
 *   {ns}:v1:{mgmt}:keyby:{account}         HASH  key id → {"iss","sub"} of the person who created the key
 *
 * Every change is one script (record, index and reverse index together) and is audited
 * (`member_add`, `member_update`, `member_remove`) with the actor given.
 */
import { randomInt } from 'node:crypto';
import { BASE62 } from '../core/key-format.ts';
import type { ConsoleContext } from './context.ts';
import { ConsoleError } from './errors.ts';
import { audit, type Actor } from './management.ts';
import { validateAccountId } from './validate.ts';

export const ROLES = ['owner', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];
/** Members per account at most (a bound on the hash and on a sign-in's reads). */
export const MAX_MEMBERS = 1000;
export const MEMBER_ID_PATTERN = /^mem_[0-9A-Za-z]{16}$/;
const EMAIL = /^[^\s@\p{Cc}]{1,64}@[^\s@\p{Cc}]{1,189}$/u;
const SUBJECT = /^[\x21-\x7e]{1,255}$/;

export interface MemberRecord {
  readonly id: string;
  readonly account: string;
  /** Lower-cased; null when named by subject. */
  readonly email: string | null;
  readonly subject: string | null;
  readonly role: Role;
  /** `manual` (the CLI, the API, the page) or `claim` (added at sign-in from KEYGATE_OIDC_ROLES_CLAIM). */
  readonly source: 'manual' | 'claim';
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** A signed-in person as the ID token names them. */
export interface Person {
  readonly iss: string;
  readonly sub: string;
  readonly email: string | null;
  readonly emailVerified: boolean;
}

export function validateRole(role: unknown): Role {
  if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role)) throw new ConsoleError('INVALID_INPUT', `role must be one of ${ROLES.join(', ')}`);
  return role as Role;
}

export function validateEmail(email: unknown): string {
  if (typeof email !== 'string' || email.length > 254 || !EMAIL.test(email.trim())) throw new ConsoleError('INVALID_INPUT', 'email is invalid: give an address like ada@example.com');
  return email.trim().toLowerCase();
}

export function validateSubject(subject: unknown): string {
  if (typeof subject !== 'string' || !SUBJECT.test(subject)) throw new ConsoleError('INVALID_INPUT', 'subject is invalid: the ID token `sub`, 1-255 printable characters without spaces');
  return subject;
}

export function validateMemberId(id: unknown): string {
  if (typeof id !== 'string' || !MEMBER_ID_PATTERN.test(id)) throw new ConsoleError('INVALID_INPUT', 'member id is invalid: member ids look like mem_ followed by 16 letters and digits');
  return id;
}

const RANK: Record<Role, number> = { owner: 3, developer: 2, viewer: 1 };
/** The stronger of two roles. */
export const stronger = (a: Role, b: Role): Role => (RANK[a] >= RANK[b] ? a : b);

/** KEYS: members hash, reverse index set. ARGV: member id, index field, record JSON, account, max members. */
const ADD = `
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then return 'EXISTS' end
if redis.call('HLEN', KEYS[1]) >= 2 * tonumber(ARGV[5]) then return 'FULL' end
redis.call('HSET', KEYS[1], 'm:' .. ARGV[1], ARGV[3], ARGV[2], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[4])
return 'OK'`;

/** KEYS: members hash. ARGV: member id, the record as read, the new record. Refuses when it changed since. */
const UPDATE = `
local cur = redis.call('HGET', KEYS[1], 'm:' .. ARGV[1])
if not cur then return 'NOTFOUND' end
if cur ~= ARGV[2] then return 'RACE' end
redis.call('HSET', KEYS[1], 'm:' .. ARGV[1], ARGV[3])
return 'OK'`;

/** KEYS: members hash, reverse index set. ARGV: member id, the record as read, index field, account. */
const REMOVE = `
local cur = redis.call('HGET', KEYS[1], 'm:' .. ARGV[1])
if not cur then return 'NOTFOUND' end
if cur ~= ARGV[2] then return 'RACE' end
redis.call('HDEL', KEYS[1], 'm:' .. ARGV[1], ARGV[3])
redis.call('SREM', KEYS[2], ARGV[4])
return 'OK'`;

function newMemberId(): string {
  let s = 'mem_';
  for (let i = 0; i < 16; i++) s += BASE62[randomInt(62)];
  return s;
}

const indexOf = (m: { email: string | null; subject: string | null }): ['e' | 's', string] => (m.email !== null ? ['e', m.email] : ['s', m.subject!]);

function toJson(m: MemberRecord): string {
  return JSON.stringify({ id: m.id, email: m.email, subject: m.subject, role: m.role, source: m.source, created_at: m.createdAt, updated_at: m.updatedAt });
}

function parse(account: string, s: string | null | undefined): MemberRecord | null {
  if (!s) return null;
  try {
    const o = JSON.parse(s) as Record<string, unknown>;
    if (typeof o.id !== 'string' || !(ROLES as readonly string[]).includes(o.role as string)) return null;
    return {
      id: o.id,
      account,
      email: typeof o.email === 'string' ? o.email : null,
      subject: typeof o.subject === 'string' ? o.subject : null,
      role: o.role as Role,
      source: o.source === 'claim' ? 'claim' : 'manual',
      createdAt: Number(o.created_at) || 0,
      updatedAt: Number(o.updated_at) || 0,
    };
  } catch {
    return null;
  }
}

/** The JSON form of a member (the API's and `members list --json`'s). */
export function memberJson(m: MemberRecord) {
  return { id: m.id, account: m.account, email: m.email, subject: m.subject, role: m.role, source: m.source, created_at: new Date(m.createdAt).toISOString(), updated_at: new Date(m.updatedAt).toISOString() };
}

export class Members {
  readonly #c: ConsoleContext;
  constructor(ctx: ConsoleContext) {
    this.#c = ctx;
  }

  /** Adds a member named by email or subject (one of them). CONFLICT when that person is already a member. */
  async add(accountIn: string, who: { email?: string | null; subject?: string | null }, roleIn: string, actor: Actor, source: 'manual' | 'claim' = 'manual'): Promise<MemberRecord> {
    const account = validateAccountId(accountIn);
    const role = validateRole(roleIn);
    const hasEmail = who.email !== undefined && who.email !== null;
    const hasSubject = who.subject !== undefined && who.subject !== null;
    if (hasEmail === hasSubject) throw new ConsoleError('INVALID_INPUT', 'name the member by email or by subject (one of them)');
    const email = hasEmail ? validateEmail(who.email) : null;
    const subject = hasSubject ? validateSubject(who.subject) : null;
    const now = Date.now();
    const m: MemberRecord = { id: newMemberId(), account, email, subject, role, source, createdAt: now, updatedAt: now };
    const [kind, value] = indexOf(m);
    const r = String(await this.#c.redis.eval(ADD, 2, this.#c.m.members(account), this.#c.m.memberOf(kind, value), m.id, `${kind}:${value}`, toJson(m), account, String(MAX_MEMBERS)));
    if (r === 'EXISTS') throw new ConsoleError('CONFLICT', `${email !== null ? `email ${email}` : `subject ${subject}`} is already a member of ${account}`);
    if (r === 'FULL') throw new ConsoleError('LIMIT', `account ${account} has ${MAX_MEMBERS} members already`);
    await audit(this.#c, actor, 'member_add', account, null, { member_id: m.id, ...(email !== null ? { email } : { subject }), role, ...(source === 'claim' && { source }) });
    return m;
  }

  async list(accountIn: string): Promise<MemberRecord[]> {
    const account = validateAccountId(accountIn);
    const h = await this.#c.redis.hgetall(this.#c.m.members(account));
    const out: MemberRecord[] = [];
    for (const [f, v] of Object.entries(h)) {
      if (!f.startsWith('m:')) continue;
      const m = parse(account, v);
      if (m) out.push(m);
    }
    return out.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  async get(accountIn: string, idIn: string): Promise<MemberRecord> {
    const account = validateAccountId(accountIn);
    const id = validateMemberId(idIn);
    const m = parse(account, await this.#c.redis.hget(this.#c.m.members(account), `m:${id}`));
    if (!m) throw new ConsoleError('NOT_FOUND', `no member ${id} in account ${account}`);
    return m;
  }

  /** Changes a member's role. */
  async update(account: string, id: string, roleIn: string, actor: Actor): Promise<MemberRecord> {
    const role = validateRole(roleIn);
    const cur = await this.get(account, id);
    const next: MemberRecord = { ...cur, role, source: 'manual', updatedAt: Date.now() };
    const r = String(await this.#c.redis.eval(UPDATE, 1, this.#c.m.members(cur.account), cur.id, toJson(cur), toJson(next)));
    if (r === 'NOTFOUND') throw new ConsoleError('NOT_FOUND', `no member ${cur.id} in account ${cur.account}`);
    if (r === 'RACE') throw new ConsoleError('CONFLICT', `member ${cur.id} changed meanwhile; try again`);
    if (cur.role !== role) await audit(this.#c, actor, 'member_update', cur.account, null, { member_id: cur.id, role: { from: cur.role, to: role } });
    return next;
  }

  async remove(account: string, id: string, actor: Actor): Promise<MemberRecord> {
    const cur = await this.get(account, id);
    const [kind, value] = indexOf(cur);
    const r = String(await this.#c.redis.eval(REMOVE, 2, this.#c.m.members(cur.account), this.#c.m.memberOf(kind, value), cur.id, toJson(cur), `${kind}:${value}`, cur.account));
    if (r === 'NOTFOUND') throw new ConsoleError('NOT_FOUND', `no member ${cur.id} in account ${cur.account}`);
    if (r === 'RACE') throw new ConsoleError('CONFLICT', `member ${cur.id} changed meanwhile; try again`);
    await audit(this.#c, actor, 'member_remove', cur.account, null, { member_id: cur.id, ...(cur.email !== null ? { email: cur.email } : { subject: cur.subject }) });
    return cur;
  }

  /** The person's role in the account (the stronger of their email's and subject's), or null. */
  async roleOf(account: string, p: Person): Promise<Role | null> {
    try {
      validateAccountId(account);
    } catch {
      return null;
    }
    const fields = [`s:${p.sub}`, ...(p.email !== null && p.emailVerified ? [`e:${p.email.toLowerCase()}`] : [])];
    const ids = await this.#c.redis.hmget(this.#c.m.members(account), ...fields);
    let role: Role | null = null;
    for (const id of ids) {
      if (!id) continue;
      const m = parse(account, await this.#c.redis.hget(this.#c.m.members(account), `m:${id}`));
      if (m) role = role === null ? m.role : stronger(role, m.role);
    }
    return role;
  }

  /** Every account the person is a member of, with their role there, by account id. */
  async accountsOf(p: Person): Promise<{ account: string; role: Role }[]> {
    const sets = [this.#c.m.memberOf('s', p.sub), ...(p.email !== null && p.emailVerified ? [this.#c.m.memberOf('e', p.email.toLowerCase())] : [])];
    const accounts = new Set<string>();
    for (const s of sets) for (const a of await this.#c.redis.smembers(s)) accounts.add(a);
    const out: { account: string; role: Role }[] = [];
    for (const account of [...accounts].sort()) {
      const role = await this.roleOf(account, p);
      if (role !== null) out.push({ account, role });
    }
    return out;
  }

  /**
   * Memberships from the identity provider (KEYGATE_OIDC_ROLES_CLAIM entries `account:role`): each
   * adds the subject as a member (source `claim`), or sets the role of a member the claim added
   * before; a member added by hand is left as it is.
   */
  async applyClaim(p: Person, entries: readonly { account: string; role: Role }[], actor: Actor): Promise<void> {
    for (const e of entries) {
      const id = await this.#c.redis.hget(this.#c.m.members(e.account), `s:${p.sub}`);
      if (id === null) {
        await this.add(e.account, { subject: p.sub }, e.role, actor, 'claim').catch((err: unknown) => {
          if (!(err instanceof ConsoleError && (err.code === 'CONFLICT' || err.code === 'LIMIT'))) throw err;
        });
        continue;
      }
      const cur = parse(e.account, await this.#c.redis.hget(this.#c.m.members(e.account), `m:${id}`));
      if (cur && cur.source === 'claim' && cur.role !== e.role) {
        const next: MemberRecord = { ...cur, role: e.role, updatedAt: Date.now() };
        const r = String(await this.#c.redis.eval(UPDATE, 1, this.#c.m.members(e.account), cur.id, toJson(cur), toJson(next)));
        if (r === 'OK') await audit(this.#c, actor, 'member_update', e.account, null, { member_id: cur.id, role: { from: cur.role, to: e.role }, source: 'claim' });
      }
    }
  }

  /** Records the person who created a key (a developer manages the keys they created). */
  async setCreator(account: string, keyId: string, p: { iss: string; sub: string }): Promise<void> {
    await this.#c.redis.hset(this.#c.m.keyCreators(account), keyId, JSON.stringify({ iss: p.iss, sub: p.sub }));
  }

  /** The ids of the account's keys this person created (a scan of the account's creators; bounded by its keys). */
  async keysCreatedBy(accountIn: string, p: { iss: string; sub: string }): Promise<string[]> {
    const account = validateAccountId(accountIn);
    const out: string[] = [];
    let cursor = '0';
    do {
      const [next, flat] = await this.#c.redis.hscan(this.#c.m.keyCreators(account), cursor, 'COUNT', 500);
      cursor = next;
      for (let i = 0; i + 1 < flat.length; i += 2) {
        try {
          const o = JSON.parse(flat[i + 1]!) as { iss?: unknown; sub?: unknown };
          if (o.iss === p.iss && o.sub === p.sub) out.push(flat[i]!);
        } catch {
          /* a malformed entry names nobody */
        }
      }
    } while (cursor !== '0');
    return out.sort();
  }

  /** The person who created the key on the page, or null (a token, the CLI or the library created it). */
  async creatorOf(account: string, keyId: string): Promise<{ iss: string; sub: string } | null> {
    const s = await this.#c.redis.hget(this.#c.m.keyCreators(account), keyId);
    if (!s) return null;
    try {
      const o = JSON.parse(s) as { iss?: unknown; sub?: unknown };
      return typeof o.iss === 'string' && typeof o.sub === 'string' ? { iss: o.iss, sub: o.sub } : null;
    } catch {
      return null;
    }
  }
}
