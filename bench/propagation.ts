/**
 * Revocation propagation.
 *
 *   scripts/node bench/propagation.ts [--quick] [--trials N]
 *
 * Starts its own redis-server and two sidecars (each in its own process, cache on), and for each
 * trial: seeds a key, warms it into both caches, fires Checks continuously at both sidecars
 * (4 in flight each), writes a revoke (or an account disable, alternately) and measures, per
 * sidecar, the time from the write's reply to the first denied answer. Any allow for a Check sent
 * after the write's reply is counted as a violation (there must be none). Prints markdown.
 */
import { parseArgs } from 'node:util';
import type { Redis } from 'ioredis';
import { DEFAULT_KEY_PREFIX } from '../src/core/key-format.ts';
import { AccountField, KeyField, schema } from '../src/schema/redis-schema.ts';
import { CheckClient } from './lib/check-client.ts';
import { startRedis } from './lib/redis.ts';
import { seedOne } from './lib/seed.ts';
import { percentile } from './lib/loadgen.ts';
import { startTarget, type Target } from './lib/procs.ts';

const { values: opt } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, trials: { type: 'string' } },
});
const TRIALS = Number(opt.trials ?? (opt.quick ? 40 : 300));
const IN_FLIGHT = 4;
const s = schema();
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

function allowed(res: { status?: { code?: number }; ok_response?: unknown }): boolean {
  return res.status?.code === 0 && res.ok_response !== undefined;
}

async function waitTracking(db: Redis, sidecars: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const list = String(await db.call('CLIENT', 'LIST'));
    const tracked = list.split('\n').filter((l) => / name=keygate-sidecar /.test(l) && / flags=\S*t/.test(l)).length;
    if (tracked >= sidecars) return;
    if (Date.now() > deadline) throw new Error('sidecars did not enable cache tracking');
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Trial {
  kind: 'revoke' | 'disable';
  /** ms from the write's reply to the first deny, per sidecar. */
  ms: number[];
  violations: number;
  /** Round trips of the Checks fired (the measurement's resolution). */
  rtt: number[];
}

let seeded = 0;

async function trial(db: Redis, clients: CheckClient[], kind: Trial['kind']): Promise<Trial> {
  const k = await seedOne(db, s, DEFAULT_KEY_PREFIX, `prop${seeded++}`);
  const req = { path: '/v1/chat/completions', key: k.key };
  for (const c of clients) for (let i = 0; i < 2; i++) if (!allowed(await c.check(req))) throw new Error('warm-up check was not allowed');

  let writeReplyAt = Infinity;
  let violations = 0;
  const rtt: number[] = [];
  const firstDeny: number[] = clients.map(() => NaN);
  const loops = clients.flatMap((c, i) =>
    Array.from({ length: IN_FLIGHT }, async () => {
      while (Number.isNaN(firstDeny[i]!)) {
        const sentAt = nowMs();
        const res = await c.check(req);
        const at = nowMs();
        rtt.push(at - sentAt);
        if (allowed(res)) {
          if (sentAt >= writeReplyAt) violations++;
        } else if (Number.isNaN(firstDeny[i]!)) {
          firstDeny[i] = at;
        }
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 2 + Math.random() * 3));
  if (kind === 'revoke') await db.hset(s.keyRecord(k.digest), KeyField.status, 'revoked');
  else await db.hset(s.account(k.account), AccountField.status, 'disabled');
  writeReplyAt = nowMs();
  await Promise.all(loops);
  return { kind, ms: firstDeny.map((t) => Math.max(0, t - writeReplyAt)), violations, rtt };
}

function row(label: string, values: number[]): string {
  const sorted = Float64Array.from(values).sort();
  const f = (x: number) => x.toFixed(2);
  return `| ${label} | ${values.length} | ${f(percentile(sorted, 50))} | ${f(percentile(sorted, 99))} | ${f(sorted[sorted.length - 1] ?? NaN)} |`;
}

async function main(): Promise<void> {
  const redis = await startRedis();
  const db = redis.client();
  const targets: Target[] = [];
  const clients: CheckClient[] = [];
  try {
    const env = { REDIS_URL: redis.url, KEYGATE_LOG_LEVEL: 'warn', KEYGATE_REDIS_TIMEOUT_MS: '1000' };
    targets.push(await startTarget('sidecar-a', 'keygate', env), await startTarget('sidecar-b', 'keygate', env));
    for (const t of targets) clients.push(new CheckClient(`127.0.0.1:${t.port}`));
    await waitTracking(db, targets.length);

    const trials: Trial[] = [];
    for (let i = 0; i < TRIALS; i++) trials.push(await trial(db, clients, i % 2 === 0 ? 'revoke' : 'disable'));

    const violations = trials.reduce((n, t) => n + t.violations, 0);
    const out = [
      `${TRIALS} trials (revoke and account disable alternately), two sidecars in their own processes on one`,
      `redis-server, Checks fired continuously (${IN_FLIGHT} in flight per sidecar). Time from the write's reply to the first`,
      'denied Check at each sidecar (the resolution is one Check round trip), ms:',
      '',
      '| sidecar / change | samples | p50 | p99 | max |',
      '|---|---|---|---|---|',
      ...targets.map((t, i) => row(t.name, trials.map((x) => x.ms[i]!))),
      row('revoke (both)', trials.filter((x) => x.kind === 'revoke').flatMap((x) => x.ms)),
      row('disable (both)', trials.filter((x) => x.kind === 'disable').flatMap((x) => x.ms)),
      row('all', trials.flatMap((x) => x.ms)),
      row('one Check round trip (resolution)', trials.flatMap((x) => x.rtt)),
      '',
      `Allowed Checks sent after the write's reply (must be 0): **${violations}**`,
    ];
    process.stdout.write(out.join('\n') + '\n');
    if (violations > 0) process.exitCode = 1;
  } finally {
    for (const c of clients) c.close();
    await Promise.all(targets.map((t) => t.stop()));
    await redis.stop();
  }
}

await main();
