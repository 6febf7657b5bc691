/**
 * The key a plaintext is, for `GET /v1/key` (the one API route a key authenticates itself): one read
 * of its record for any well-formed key (unknown, revoked or valid: the same work until the status
 * is known); null unless it is an active, unexpired key.
 */
import { isWellFormedKey, keyDigest } from '../core/key-format.ts';
import { KeyField } from '../schema/redis-schema.ts';
import type { ConsoleContext } from './context.ts';

export async function activeKeyIdOf(ctx: ConsoleContext, plaintext: string): Promise<string | null> {
  const prefix = ctx.keyPrefix;
  const wellFormed = isWellFormedKey(plaintext, prefix);
  const digest = keyDigest(wellFormed ? plaintext : `${prefix}invalid`);
  const [id, status, expiresAt] = await ctx.redis.hmget(ctx.schema.keyRecord(digest), KeyField.id, KeyField.status, KeyField.expiresAt);
  if (!wellFormed || id == null || status !== 'active' || (expiresAt !== null && Number(expiresAt) <= Date.now())) return null;
  return id;
}
