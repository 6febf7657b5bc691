/**
 * Web console sessions, in Redis with an expiry. A session is made by signing in with an
 * account-scoped management token; it remembers the token's id (never the token) and a CSRF token.
 * The session id travels only in an HttpOnly cookie; Redis holds its SHA-256 digest, so a copy of
 * the store does not give live sessions.
 *
 *   {ns}:v1:{mgmt}:websession:{sha256hex(session id)}  HASH  SessionField of src/schema/management.ts (epoch ms times); PEXPIRE = expiry
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { systemClock, type Clock } from '../core/clock.ts';
import type { RedisClient } from '../store/redis.ts';
import { managementSchema, SessionField as F } from '../schema/management.ts';

/** The person of a session made by OpenID Connect sign-in (none for a token's session). */
export interface SessionUser {
  iss: string;
  sub: string;
  email: string | null;
  emailVerified: boolean;
  /** What the page and the audit log show: the email, else the name, else the subject. */
  name: string;
}

export interface SessionRecord {
  /** The management token's id; '' for a person's session. */
  tokenId: string;
  account: string;
  tokenName: string;
  csrf: string;
  createdAt: number;
  expiresAt: number;
  user?: SessionUser;
}

/** 32 random bytes, base64url: the session id and the CSRF token. */
const SECRET_PATTERN = /^[A-Za-z0-9_-]{43}$/;
const newSecret = () => randomBytes(32).toString('base64url');
const digest = (s: string) => createHash('sha256').update(s).digest('hex');

export const isSessionId = (s: string) => SECRET_PATTERN.test(s);

/** Compares two secrets in constant time (for equal lengths; unequal lengths are simply unequal). */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class SessionStore {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly ttlMs: number;
  readonly #now: () => number;

  /** `clock`: what a session's creation and expiry are measured on (Redis also drops it at `expires_at`). */
  constructor(redis: RedisClient, namespace: string, ttlMs: number, clock: Pick<Clock, 'now'> = systemClock) {
    this.#redis = redis;
    this.#now = clock.now;
    this.#prefix = managementSchema(namespace).sessionPrefix();
    this.ttlMs = ttlMs;
  }

  #key(sessionId: string): string {
    return this.#prefix + digest(sessionId);
  }

  /** A new session for the token; returns its id (for the cookie only) and its record. */
  async create(tokenId: string, account: string, tokenName: string, user?: SessionUser): Promise<{ id: string; record: SessionRecord }> {
    const id = newSecret();
    const now = this.#now();
    const record: SessionRecord = { tokenId, account, tokenName, csrf: newSecret(), createdAt: now, expiresAt: now + this.ttlMs, ...(user && { user }) };
    await this.#redis
      .multi()
      .hset(this.#key(id), {
        [F.tokenId]: tokenId,
        [F.account]: account,
        [F.tokenName]: tokenName,
        [F.csrf]: record.csrf,
        [F.createdAt]: String(record.createdAt),
        [F.expiresAt]: String(record.expiresAt),
        ...(user && { [F.user]: JSON.stringify(user) }),
      })
      .pexpireat(this.#key(id), record.expiresAt)
      .exec();
    return { id, record };
  }

  /**
   * The live session with this id, or null (unknown, malformed, expired or ended). Expiry is checked
   * here, not left to Redis: a session is dead from its `expires_at` instant on, whatever Redis's
   * own expiry (a replica, a restored copy, a clock apart) still holds.
   */
  async get(sessionId: string): Promise<SessionRecord | null> {
    if (!isSessionId(sessionId)) return null;
    const h = await this.#redis.hgetall(this.#key(sessionId));
    const expiresAt = Number(h[F.expiresAt]);
    const [tokenId, account, csrf] = [h[F.tokenId], h[F.account], h[F.csrf]];
    const user = parseUser(h[F.user]);
    if ((!tokenId && !user) || !account || !csrf || !Number.isSafeInteger(expiresAt) || expiresAt <= this.#now()) return null;
    return { tokenId: tokenId ?? '', account, tokenName: h[F.tokenName] ?? '', csrf, createdAt: Number(h[F.createdAt]), expiresAt, ...(user && { user }) };
  }

  /** Moves a person's session to another account (the "Account" select; membership checked by the caller). */
  async setAccount(sessionId: string, account: string): Promise<void> {
    if (isSessionId(sessionId)) await this.#redis.hset(this.#key(sessionId), F.account, account);
  }

  async end(sessionId: string): Promise<void> {
    if (isSessionId(sessionId)) await this.#redis.del(this.#key(sessionId));
  }
}

function parseUser(s: string | undefined): SessionUser | undefined {
  if (!s) return undefined;
  try {
    const o = JSON.parse(s) as Partial<SessionUser>;
    if (typeof o.iss !== 'string' || typeof o.sub !== 'string' || typeof o.name !== 'string') return undefined;
    return { iss: o.iss, sub: o.sub, email: typeof o.email === 'string' ? o.email : null, emailVerified: o.emailVerified === true, name: o.name };
  } catch {
    return undefined;
  }
}
