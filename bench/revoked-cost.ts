/**
 * Cold lookup cost of a revoked key against a never-issued one, with a large model list.
 *
 *   scripts/node bench/revoked-cost.ts [--rounds N]
 *
 * Starts its own redis-server, seeds revoked keys whose records carry 1000 model patterns, and
 * times ``RedisRecordSource.lookup(KEY_RECORD)`` (the uncached read: one HMGET plus the codec) for revoked and for
 * unknown digests, interleaved, plus the codec alone on the two replies. Prints markdown: what
 * is left of the difference is the reply's length on the wire, not parsing.
 */
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { DEFAULT_KEY_PREFIX, generateKey, keyDigest } from '../src/core/key-format.ts';
import { parseSidecarKey, schema, SIDECAR_KEY_FIELDS } from '../src/schema/redis-schema.ts';
import { connectRedis } from '../src/store/redis.ts';
import { KEY_RECORD } from '../src/schema/records.ts';
import { redisSource } from '../src/store/redis-source.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { startRedis } from './lib/redis.ts';
import { seedOne } from './lib/seed.ts';
import { percentile } from './lib/loadgen.ts';

const { values: opt } = parseArgs({ options: { rounds: { type: 'string', default: '3000' } } });
const ROUNDS = Number(opt.rounds);
const s = schema();
const models = Array.from({ length: 1000 }, (_, i) => `provider-${i}/model-${i}-with-a-long-name`);
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;

const redis = await startRedis();
try {
  const db = redis.client();
  const data = connectRedis(redis.url, { commandTimeoutMs: 5000 });
  data.on('error', () => {});
  // The store's connection queues nothing while offline: wait until it is up before timing reads.
  if (data.status !== 'ready') await once(data, 'ready');
  const store = redisSource(data, s, createLogger('silent'));
  const revoked = await Promise.all(Array.from({ length: 200 }, (_, i) => seedOne(db, s, DEFAULT_KEY_PREFIX, `revoked${i}`, { status: 'revoked', models })));
  const time = { revoked: [] as number[], unknown: [] as number[] };
  for (let i = 0; i < ROUNDS; i++) {
    for (const kind of i % 2 ? (['revoked', 'unknown'] as const) : (['unknown', 'revoked'] as const)) {
      const digest = kind === 'revoked' ? revoked[i % revoked.length]!.digest : keyDigest(generateKey());
      const t0 = nowUs();
      const r = await store.lookup(KEY_RECORD, digest);
      time[kind].push(nowUs() - t0);
      if (r.kind !== 'absent') throw new Error(`${kind}: ${r.kind}`);
    }
  }
  const replyRevoked = await db.hmget(s.keyRecord(revoked[0]!.digest), ...SIDECAR_KEY_FIELDS);
  const replyUnknown = await db.hmget(s.keyRecord(keyDigest(generateKey())), ...SIDECAR_KEY_FIELDS);
  const codec = (reply: (string | null)[]) => {
    const t0 = nowUs();
    for (let i = 0; i < 100_000; i++) parseSidecarKey(reply);
    return ((nowUs() - t0) * 1000) / 100_000;
  };
  const row = (k: 'revoked' | 'unknown') => {
    const v = time[k].sort((a, b) => a - b);
    return `| ${k} | ${percentile(v, 50).toFixed(1)} | ${percentile(v, 90).toFixed(1)} | ${percentile(v, 99).toFixed(1)} |`;
  };
  const bytes = (reply: (string | null)[]) => reply.reduce((n, v) => n + (v === null ? 5 : Buffer.byteLength(v) + 8), 4);
  console.log(`## Cold key lookup, ${ROUNDS} each (µs, RedisRecordSource.lookup(KEY_RECORD) on loopback)\n`);
  console.log('| key | p50 | p90 | p99 |\n|---|---|---|---|');
  console.log(row('revoked'));
  console.log(row('unknown'));
  console.log(`\ncodec alone: revoked ${codec(replyRevoked).toFixed(0)} ns, unknown ${codec(replyUnknown).toFixed(0)} ns per reply;`);
  console.log(`reply on the wire: revoked ~${bytes(replyRevoked)} bytes, unknown ~${bytes(replyUnknown)} bytes`);
  await store.close();
} finally {
  await redis.stop();
}
