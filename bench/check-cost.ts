/**
 * keygate's own work per Check, in process, without sockets: the CheckRequest decoded (lazy headers, as
 * the h2 server does), `Authorizer.check` with the production wiring (`startSidecar`: cache, phases,
 * observers: metrics, decision log, usage counter), and the answer's frame (`CheckAnswers`). What the
 * h2 transport and node:http2 cost is not in it (`bench/ab.ts` and `npm run bench` measure that).
 *
 *   scripts/node bench/check-cost.ts [--tree DIR] [--mode valid|plain|money|rated|endpoint|malformed|body64|chat1k] [--batch N] [--checks N] [--rounds N]
 *
 * `--tree`: another checkout (its own modules are loaded; a tree without `CheckAnswers` skips the
 * frame). `--batch`: checks started together (1: one at a time; 64: as a 4x16 poll batch, sharing
 * the cache's one wait per loop turn). Modes: `valid` (a seeded key, usage counting on), `plain`
 * (counting off), `money` (a credited wallet and a daily spend limit, counting on), `rated` (a
 * request rate never reached), `endpoint` (the valid key on a path no catalog row opens: the
 * endpoint rule's deny), `malformed` (a malformed key's deny), `body64` and `chat1k` (a
 * model-restricted key with a 64 KiB chat body, a plain key with a 1 KiB one). Prints CPU ns per check per round (process.cpuUsage), min and median,
 * and the store reads made while timing (a cache that dropped under load reads records again; the
 * staleness bound is 5 s here so that a loaded machine's late heartbeat answer does not drop it).
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { KeyConsole } from '../src/console/service.ts';
import { DEFAULT_KEY_PREFIX } from '../src/core/key-format.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { chatBody, encodeCheck, malformedKey } from './lib/bodies.ts';
import { loadAverage } from './lib/procs.ts';
import { startRedis } from './lib/redis.ts';
import { commandCalls, seedConsoleKey, seedKeys } from './lib/seed.ts';

const { values: opt } = parseArgs({
  options: {
    tree: { type: 'string', default: resolve(import.meta.dirname, '..') },
    mode: { type: 'string', default: 'valid' },
    batch: { type: 'string', default: '1' },
    checks: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '5' },
  },
});
const tree = resolve(opt.tree!);
const batch = Number(opt.batch);
const checks = Number(opt.checks);
const rounds = Number(opt.rounds);
const MODES = ['valid', 'plain', 'money', 'rated', 'endpoint', 'malformed', 'body64', 'chat1k'];
if (!MODES.includes(opt.mode!)) throw new Error(`--mode ${MODES.join('|')}`);

const redis = await startRedis();
const db = redis.client();
// A staleness bound of 5 s (production: 250 ms): on a loaded machine a heartbeat answer can come
// late, and a sidecar whose cache dropped reads its records from the store: not the cached path.
const env: Record<string, string> = { REDIS_URL: redis.url, KEYGATE_COUNT_USAGE: opt.mode === 'plain' ? 'false' : 'true', KEYGATE_STALENESS_BOUND_MS: '5000' };
let key: string;
if (opt.mode === 'money') {
  const k = await seedConsoleKey(db, schema(), 'money');
  const kc = new KeyConsole({ redis: db });
  await kc.creditAccount(k.account, 1_000_000_000_000, 'bench');
  await kc.setKeyLimit(k.id, { amountMicros: 1_000_000_000_000, period: 'day' });
  key = k.key;
} else if (opt.mode === 'rated') {
  key = (await seedConsoleKey(db, schema(), 'rated', { rate: '1000000000/d' })).key;
} else {
  const models = opt.mode === 'body64' ? ['gpt-4o-mini', 'anthropic/*'] : undefined;
  [key] = (await seedKeys(db, schema(), { prefix: DEFAULT_KEY_PREFIX, count: 1, accounts: 1, tag: 'cost', models })) as [string];
}

const load = (p: string) => import(join(tree, p));
const { loadConfig } = await load('src/config.ts');
const { startSidecar } = await load('src/main.ts');
const { createLogger } = await load('src/telemetry/logger.ts');
const codec = await load('src/transport/grpc/codec.ts').catch(() => load('src/transport/h2/codec.ts'));
const { checkInputFromEnvoy } = await load('src/transport/envoy/check.ts');
const config = loadConfig({ grpcPort: 0, httpPort: 0, adminPort: 0 }, { ...process.env, ...env, KEYGATE_LOG_LEVEL: 'warn' });
const answers = await load('src/transport/envoy/services/check-answer.ts').then(
  (m) => new m.CheckAnswers({ accountHeader: config.accountHeader, keyIdHeader: config.keyIdHeader, stripKeyHeaders: config.stripKeyHeaders, errorDomain: config.errorDomain }),
  () => null,
);
const sidecar = await startSidecar(config, createLogger('warn'));
for (let i = 0; i < 500 && !sidecar.ready(); i++) await new Promise((r) => setTimeout(r, 20));

const message = (
  opt.mode === 'endpoint'
    ? encodeCheck({ key, path: '/v1/not-an-endpoint' })
    : opt.mode === 'malformed'
      ? encodeCheck({ key: malformedKey(key) })
      : opt.mode === 'body64' || opt.mode === 'chat1k'
        ? encodeCheck({ key, body: chatBody(opt.mode === 'body64' ? 64 * 1024 : 1024, 'gpt-4o-mini', 'first') })
        : encodeCheck({ key })
).subarray(5);
/** Checks not allowed (a loaded machine can stall the store past its bounds: 503s), by code. */
const notAllowed: Record<string, number> = {};
async function one(): Promise<void> {
  const input = checkInputFromEnvoy(codec.decodeCheckRequest(message, { lazyHeaders: true }));
  const outcome = await sidecar.authorizer.check(input);
  const d = outcome.decision;
  if (!d.allow) notAllowed[d.code] = (notAllowed[d.code] ?? 0) + 1;
  answers?.frame(outcome);
}
async function run(n: number): Promise<void> {
  const ps: Promise<void>[] = new Array(batch);
  for (let i = 0; i < n; i += batch) {
    for (let j = 0; j < batch; j++) ps[j] = one();
    await Promise.all(ps);
  }
}

await run(Math.min(checks, 50_000)); // JIT warm-up
const ns: number[] = [];
const reads = (c: Record<string, number>) => (c.hmget ?? 0) + (c.hget ?? 0) + (c.hgetall ?? 0);
const reads0 = reads(await commandCalls(db));
const loadAtStart = loadAverage();
for (let r = 0; r < rounds; r++) {
  const c0 = process.cpuUsage();
  await run(checks);
  const c = process.cpuUsage(c0);
  ns.push(((c.user + c.system) * 1000) / checks);
}
const storeReads = reads(await commandCalls(db)) - reads0;
const sorted = [...ns].sort((a, b) => a - b);
process.stdout.write(
  `${opt.mode} key, batch ${batch}: CPU ns per check min ${sorted[0]!.toFixed(0)}, median ${sorted[(sorted.length - 1) >> 1]!.toFixed(0)} ` +
    `(rounds: ${ns.map((x) => x.toFixed(0)).join(' ')}); store reads while timing ${storeReads}; not allowed ${JSON.stringify(notAllowed)}; load average ${loadAtStart} → ${loadAverage()}\n`,
);
await sidecar.close();
await redis.stop();
process.exit(0);
