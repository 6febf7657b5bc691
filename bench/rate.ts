/**
 * What rate limits cost, and whether the shared count holds under load (also run by `npm run bench`):
 *
 *   scripts/node bench/rate.ts [--quick] [--rounds N] [--duration S] [--parts cost,bound]
 *
 * 1. cost: the cached valid key without a rate ("plain") and with a request rate high enough never
 *    to refuse ("rated": counted through the shared limiter, whose leases allow without a Redis
 *    command), side by side with the floor (the no-op ext_authz server on @grpc/grpc-js): h2load at
 *    4x16 and 1x1, interleaved rounds, requests/s and the target's CPU µs per request.
 * 2. bound: a key with a rate of L requests per hour on 2 and then 4 sidecars sharing one
 *    redis-server, all driven at once (one node:http2 load generator per sidecar, 2 connections x
 *    16 streams, every answer decoded) with twice L requests in all; the requests allowed in the
 *    window against L.
 * Prints markdown.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { encodeCheck } from './lib/bodies.ts';
import { runH2load, type H2loadResult } from './lib/h2load.ts';
import { runLoad } from './lib/loadgen.ts';
import { loadAverage, loadgen, startTarget, type Target } from './lib/procs.ts';
import { startBench } from './lib/setup.ts';
import { ENVOY_HEADERS, median } from './lib/common.ts';
import { seedConsoleKey } from './lib/seed.ts';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    /** cost, bound (default both); `npm run bench` runs only `bound` beside its case 1r. */
    parts: { type: 'string', default: 'cost,bound' },
  },
});
const PARTS = new Set(opt.parts!.split(','));
const quick = opt.quick!;
const ROUNDS = Number(opt.rounds ?? (quick ? 1 : 3));
const DURATION = Number(opt.duration ?? (quick ? 1 : 4));
const LIMIT = quick ? 600 : 3000;
const log = (m: string) => process.stderr.write(`bench/rate: ${m}\n`);

async function main(): Promise<void> {
  const bench = await startBench('rate');
  const { tmp, redis, db, s, targets } = bench;
  const out: string[] = [];
  try {
    const env = { REDIS_URL: redis.url };
    const plain = await seedConsoleKey(db, s, 'plain');
    const rated = await seedConsoleKey(db, s, 'rated', { rate: '1000000000/h' });
    const files = { plain: join(tmp, 'plain.bin'), rated: join(tmp, 'rated.bin') };
    writeFileSync(files.plain, encodeCheck({ key: plain.key }));
    writeFileSync(files.rated, encodeCheck({ key: rated.key }));
    const floor = await startTarget('floor: grpc-js no-op', 'noop-grpcjs', env);
    const kg = await startTarget('keygate', 'keygate', env);
    targets.push(floor, kg);
    for (const f of Object.values(files)) {
      const r = await runLoad({ port: kg.port, connections: 1, streams: 1, requests: 1, bodyFile: f, sampleEvery: 1, headers: ENVOY_HEADERS });
      if (r.sampled.allow !== 1) throw new Error(`keygate answered ${JSON.stringify(r.sampled)} to ${f}, expected allow`);
    }

    // ---- 1. cost
    if (PARTS.has('cost')) {
    const runs = new Map<string, { r: H2loadResult; cpu: number }[]>();
    const sides: [string, Target, string][] = [['floor', floor, files.plain], ['plain', kg, files.plain], ['rated', kg, files.rated]];
    const drive = async (t: Target, f: string, c: number, m: number, dur: number) => {
      const c0 = t.cpuMs();
      const r = await runH2load({ port: t.port, bodyFile: f, connections: c, streams: m, durationSec: dur, warmupSec: quick ? 0.3 : 1, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS });
      if (r.non2xx > 0 || r.succeeded < r.done) throw new Error(`${t.name}: ${r.non2xx} non-2xx, ${r.done - r.succeeded} failed`);
      return { r, cpu: ((t.cpuMs() - c0) * 1000) / Math.max(1, r.allRequests) };
    };
    const shapes = [[4, 16], [1, 1]] as const;
    for (const [c, m] of shapes) for (const [, t, f] of sides) await drive(t, f, c, m, quick ? 0.5 : 1); // JIT warm-up
    for (let round = 0; round < ROUNDS; round++) {
      log(`round ${round + 1}/${ROUNDS} (load ${loadAverage()})`);
      for (const [c, m] of shapes) {
        for (const [name, t, f] of round % 2 ? [...sides].reverse() : sides) {
          const k = `${c}x${m}|${name}`;
          runs.set(k, [...(runs.get(k) ?? []), await drive(t, f, c, m, DURATION)]);
        }
      }
    }
    // the rated key's answers were still allows after the load
    const after = await runLoad({ port: kg.port, connections: 1, streams: 1, requests: 1, bodyFile: files.rated, sampleEvery: 1, headers: ENVOY_HEADERS });
    out.push(
      `Cached valid key, h2load ${DURATION}s per run, median of ${ROUNDS} interleaved rounds after a warm-up pass: "plain" has no rate, "rated" a request rate of 10^9 per hour ` +
        '(never refused: every request counted through the shared limiter). Ratios by requests/s and by CPU per request (floor CPU / target CPU).',
      '',
      '| shape | side | req/s | p99 ms | CPU µs/req | x floor (req/s) | x floor (CPU) |',
      '|---|---|---:|---:|---:|---:|---:|',
    );
    const notes: string[] = [];
    for (const [c, m] of shapes) {
      const v = (name: string) => {
        const rs = runs.get(`${c}x${m}|${name}`)!;
        return { rps: median(rs.map((x) => x.r.rps)), cpu: median(rs.map((x) => x.cpu)), p99: median(rs.map((x) => x.r.p99us)) };
      };
      const f = v('floor');
      for (const name of ['floor', 'plain', 'rated']) {
        const x = v(name);
        out.push(`| ${c}x${m} | ${name} | ${x.rps.toFixed(0)} | ${(x.p99 / 1000).toFixed(2)} | ${x.cpu.toFixed(1)} | ${(x.rps / f.rps).toFixed(2)} | ${(f.cpu / x.cpu).toFixed(2)} |`);
      }
      const r = v('rated');
      const p = v('plain');
      if (c === 4) {
        notes.push(`TARGET| rate-limited cached key ≥ 1.2x floor (bench/rate.ts) | ${c}x${m} | ${(r.rps / f.rps).toFixed(2)} | ${(f.cpu / r.cpu).toFixed(2)} | ${r.rps / f.rps >= 1.2 && f.cpu / r.cpu >= 1.2 ? 'yes' : r.rps / f.rps >= 1.2 || f.cpu / r.cpu >= 1.2 ? 'partly' : 'no'} |`);
        notes.push(`TARGET| (for reference) key without a rate, same run | ${c}x${m} | ${(p.rps / f.rps).toFixed(2)} | ${(f.cpu / p.cpu).toFixed(2)} | – |`);
      }
      notes.push(`${c}x${m}: rated key **${(r.rps / f.rps).toFixed(2)}x** the floor by req/s, **${(f.cpu / r.cpu).toFixed(2)}x** by CPU; rated / plain CPU per request ${(r.cpu / p.cpu).toFixed(2)}`);
    }
    out.push('', ...notes.map((n) => (n.startsWith('TARGET|') ? n : `- ${n}`)), `- the rated key after the load: ${Object.keys(after.sampled).join(', ')}`, '');
    }

    // ---- 2. the bound with 2 and 4 sidecars
    if (PARTS.has('bound')) {
    out.push(
      `The shared count: a key with a rate of ${LIMIT} per hour, N sidecars on one redis-server all driven at once (a node:http2 load generator per sidecar, 2 connections x 16 streams, every answer decoded), ${2 * LIMIT} requests in all:`,
      '',
      '| sidecars | requests | allowed | refused (429 RATE_LIMITED) | other | allowed / limit | load average |',
      '|---:|---:|---:|---:|---|---:|---|',
    );
    const bound: string[] = [];
    for (const n of [2, 4]) {
      const k = await seedConsoleKey(db, s, `window${n}`, { rate: `${LIMIT}/h` });
      const f = join(tmp, `window${n}.bin`);
      writeFileSync(f, encodeCheck({ key: k.key }));
      const cars: Target[] = [];
      for (let i = 0; i < n; i++) cars.push(await startTarget(`keygate ${i + 1}/${n}`, 'keygate', env));
      targets.push(...cars);
      const per = Math.ceil((2 * LIMIT) / n);
      // a deadline a loaded machine meets: this part counts, it does not time
      const results = await Promise.all(cars.map((t) => loadgen({ port: t.port, connections: 2, streams: 16, requests: per, bodyFile: f, sampleEvery: 1, headers: { ...ENVOY_HEADERS, 'grpc-timeout': '5S' } })));
      let allowed = 0;
      let refused = 0;
      const other: Record<string, number> = {};
      for (const r of results) {
        for (const [v, cnt] of Object.entries(r.sampled)) {
          if (v === 'allow') allowed += cnt;
          else if (v === 'deny:RATE_LIMITED') refused += cnt;
          else other[v] = (other[v] ?? 0) + cnt;
        }
        if (r.errors) other.errors = (other.errors ?? 0) + r.errors;
        for (const [code, cnt] of Object.entries(r.grpcStatus)) if (code !== '0') other[`grpc-status ${code}`] = (other[`grpc-status ${code}`] ?? 0) + cnt;
      }
      // docs/rate-limits.md: L − P ≤ allowed ≤ L once the window's demand exceeds L (P = floor(0.05 L), the lease pool)
      const pool = LIMIT >= 100 ? Math.floor(0.05 * LIMIT) : 0;
      bound.push(`TARGET| allowed in the window within the documented bound [L − P, L] = [${LIMIT - pool}, ${LIMIT}], ${n} sidecars on one Redis under load | ${n} sidecars | – | ${allowed} allowed (${(allowed / LIMIT).toFixed(3)}x) | ${allowed <= LIMIT && allowed >= LIMIT - pool ? 'yes' : 'no'} |`);
      out.push(`| ${n} | ${per * n} | ${allowed} | ${refused} | ${Object.entries(other).map(([a, b]) => `${a} ×${b}`).join(', ') || '–'} | ${(allowed / LIMIT).toFixed(3)} | ${loadAverage()} |`);
      for (const t of cars) await t.stop();
    }
    out.push('', ...bound, '');
    }
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await bench.close();
  }
}

await main();
