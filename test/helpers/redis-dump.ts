/** Whole-database views of a test Redis: every value (to search for secrets) and a byte snapshot (to prove nothing changed). */
import type { Redis } from 'ioredis';

async function allKeys(redis: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys.sort();
}

/** Every key name and every value (hash fields and values, set members, strings) as text. */
export async function dumpAllText(redis: Redis): Promise<string[]> {
  const out: string[] = [];
  for (const key of await allKeys(redis)) {
    out.push(key);
    const type = await redis.type(key);
    if (type === 'string') out.push((await redis.get(key)) ?? '');
    else if (type === 'hash') out.push(...Object.entries(await redis.hgetall(key)).flat());
    else if (type === 'set') out.push(...(await redis.smembers(key)));
    else if (type === 'zset') out.push(...(await redis.zrange(key, '0', '-1', 'WITHSCORES')));
    else if (type === 'list') out.push(...(await redis.lrange(key, 0, -1)));
    else if (type === 'stream') out.push(...((await redis.xrange(key, '-', '+')) as [string, string[]][]).flat(2));
    else throw new Error(`unexpected type ${type} at ${key}`);
  }
  return out;
}

export interface Snapshot {
  /** key → type, exact content (hash fields and set members sorted, values hex) and whether it expires */
  readonly values: Record<string, string>;
  /** Writes since start (`rdb_changes_since_last_save`; the test servers never save). */
  readonly dirty: number;
}

const hex = (b: Buffer) => b.toString('hex');

/**
 * An exact picture of the database and its write counter. Content is compared in a canonical order:
 * DUMP bytes of a hash-table-encoded hash change without any write (active rehashing reorders it).
 */
export async function snapshot(redis: Redis): Promise<Snapshot> {
  const values: Record<string, string> = {};
  for (const key of await allKeys(redis)) {
    const type = await redis.type(key);
    let content: string;
    if (type === 'string') content = hex((await redis.getBuffer(key)) ?? Buffer.alloc(0));
    else if (type === 'hash') {
      const h = await redis.hgetallBuffer(key);
      content = Object.keys(h).sort().map((f) => `${hex(Buffer.from(f))}=${hex(h[f]!)}`).join(',');
    } else if (type === 'set') content = (await redis.smembersBuffer(key)).map(hex).sort().join(',');
    else content = hex((await redis.dumpBuffer(key)) ?? Buffer.alloc(0));
    // A TTL counts down without any write: only whether the key expires is compared.
    const pttl = await redis.pttl(key);
    values[key] = `${type}:${content}/${pttl > 0 ? 'expires' : pttl}`;
  }
  const info = await redis.info('persistence');
  const m = /rdb_changes_since_last_save:(\d+)/.exec(info);
  if (!m) throw new Error('no rdb_changes_since_last_save in INFO');
  return { values, dirty: Number(m[1]) };
}
