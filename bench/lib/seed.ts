/**
 * Bulk seeding of key records for the benchmark, through the schema module (the records the sidecar
 * reads: version, id, account, status, models). Pipelined; a million keys take seconds.
 */
import { writeFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { DEFAULT_KEY_PREFIX, keyDigest } from '../../src/core/key-format.ts';
import { encodeKeyRecord, KeyField, type Schema } from '../../src/schema/redis-schema.ts';
import { RateField } from '../../src/schema/rates.ts';
import { fastKeys } from './bodies.ts';

export interface SeedSpec {
  prefix: string;
  count: number;
  /** Keys are spread over this many accounts. */
  accounts: number;
  /** Distinguishes key ids of separate batches. */
  tag: string;
  models?: string[];
}

/** Seeds `count` active keys; returns them (plaintext, for the load generator only). */
export async function seedKeys(redis: Redis, s: Schema, spec: SeedSpec): Promise<string[]> {
  const keys = fastKeys(spec.prefix, spec.count);
  const BATCH = 5000;
  for (let from = 0; from < keys.length; from += BATCH) {
    const p = redis.pipeline();
    for (let i = from; i < Math.min(keys.length, from + BATCH); i++) {
      const fields = encodeKeyRecord({
        id: `key_${spec.tag}${String(i).padStart(16, '0')}`,
        account: `acct-bench-${i % spec.accounts}`,
        name: 'bench',
        models: spec.models ?? null,
        expiresAt: null,
      });
      p.hset(s.keyRecord(keyDigest(keys[i]!)), ...fields);
    }
    await p.exec();
  }
  return keys;
}

/** One key (active unless told) on an account of its own (`acct-<tag>`): for trials that change the account. */
export async function seedOne(
  redis: Redis,
  s: Schema,
  prefix: string,
  tag: string,
  o: { status?: 'active' | 'revoked'; models?: string[] } = {},
): Promise<{ key: string; digest: string; account: string }> {
  const [key] = fastKeys(prefix, 1);
  const digest = keyDigest(key!);
  const account = `acct-${tag}`;
  const record = { id: `key_${tag.padStart(16, '0')}`, account, name: 'bench', status: o.status, models: o.models ?? null, expiresAt: null };
  await redis.hset(s.keyRecord(digest), ...encodeKeyRecord(record));
  return { key: key!, digest, account };
}

/**
 * One key on an account of its own (`acct-<tag>`), with the id index a usage record needs and the
 * times the console's view of a key reads (for credits, limits and usage through KeyConsole).
 */
export async function seedConsoleKey(db: Redis, s: Schema, tag: string, o: { rate?: string } = {}): Promise<{ key: string; id: string; account: string; digest: string }> {
  const k = await seedOne(db, s, DEFAULT_KEY_PREFIX, tag);
  const id = `key_${tag.padStart(16, '0')}`;
  await db.set(s.keyIdIndex(id), k.digest);
  await db.hset(s.keyRecord(k.digest), KeyField.createdAt, String(Date.now()), KeyField.updatedAt, String(Date.now()));
  // a request rate in its record form (`N/U`), the field the sidecar reads with the record
  if (o.rate) await db.hset(s.keyRecord(k.digest), RateField.rate, o.rate);
  return { key: k.key, id, account: k.account, digest: k.digest };
}

/** One key a line, fixed width (the load generator indexes by line). */
export function writeKeysFile(path: string, keys: readonly string[]): void {
  writeFileSync(path, keys.join('\n') + '\n', 'latin1');
}

/** Redis command calls by command name, from INFO commandstats. */
export async function commandCalls(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/** Calls per decision by command, between two commandstats snapshots (the bench's own INFO excluded). */
export function roundTripsPerDecision(before: Record<string, number>, after: Record<string, number>, decisions: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [cmd, n] of Object.entries(after)) {
    if (cmd === 'info') continue;
    const d = n - (before[cmd] ?? 0);
    if (d > 0) out[cmd] = d / decisions;
  }
  return out;
}

/**
 * Usage records through the console library until `deadline` (epoch ms): `inFlight` at a time on
 * each client, spread over `keys`, 7 µ each, request ids `<tag>-<client>-<worker>-<n>` (distinct).
 * → how many were booked and each one's latency (ms), sorted ascending (for `percentile`).
 */
export async function recordUsageUntil(
  clients: readonly { recordUsage(r: { keyId: string; amountMicros: number; requestId: string; model: string; inputTokens: number; outputTokens: number }): Promise<unknown> }[],
  keys: readonly { id: string }[],
  inFlight: number,
  deadline: number,
  tag: string,
): Promise<{ n: number; lat: number[] }> {
  let n = 0;
  const lat: number[] = [];
  await Promise.all(
    clients.flatMap((c, ci) =>
      Array.from({ length: inFlight }, async (_, w) => {
        for (let j = 0; Date.now() < deadline; j++) {
          const k = keys[(ci * inFlight + w + j) % keys.length]!;
          const start = performance.now();
          await c.recordUsage({ keyId: k.id, amountMicros: 7, requestId: `${tag}-${ci}-${w}-${j}`, model: 'openai/gpt-4o', inputTokens: 100, outputTokens: 20 });
          lat.push(performance.now() - start);
          n++;
        }
      }),
    ),
  );
  return { n, lat: lat.sort((a, b) => a - b) };
}
