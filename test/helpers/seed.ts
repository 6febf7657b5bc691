/** Seeds key and account records directly through the schema module (tests of the read side). */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { generateKey, keyDigest } from '../../src/core/key-format.ts';
import { AccountField, encodeKeyRecord, type Schema } from '../../src/schema/redis-schema.ts';

export interface SeededKey {
  readonly key: string;
  readonly id: string;
  readonly digest: string;
  readonly account: string;
}

export async function seedKey(
  redis: Redis,
  s: Schema,
  o: { account?: string; models?: string[]; expiresAt?: number; status?: 'active' | 'revoked'; prefix?: string; key?: string } = {},
): Promise<SeededKey> {
  const key = o.key ?? generateKey(o.prefix);
  const id = `key_${randomBytes(12).toString('hex').slice(0, 20)}`;
  const digest = keyDigest(key);
  const account = o.account ?? `acct-${randomBytes(4).toString('hex')}`;
  const now = Date.now();
  const fields = encodeKeyRecord({
    id,
    account,
    name: 'test key',
    status: o.status ?? 'active',
    models: o.models ?? null,
    expiresAt: o.expiresAt ?? null,
    createdAt: now,
    updatedAt: now,
  });
  await redis.hset(s.keyRecord(digest), ...fields);
  await redis.set(s.keyIdIndex(id), digest);
  await redis.sadd(s.accountKeys(account), id);
  return { key, id, digest, account };
}

export async function setAccountStatus(redis: Redis, s: Schema, account: string, status: 'active' | 'disabled'): Promise<void> {
  await redis.hset(s.account(account), AccountField.status, status);
}
