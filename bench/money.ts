/**
 * What the money side costs, in one run on one machine (also run by `npm run bench`):
 *
 *   scripts/node bench/money.ts [--quick] [--rounds N] [--duration S]
 *
 * 1. The cached valid-key case side by side: a sidecar with usage counting off and a key of an
 *    account without a wallet or limits ("plain"), against a sidecar with counting on and a key with
 *    a spend limit in a credited (enforced) wallet ("money"). Interleaved h2load runs (4x16 and 1x1),
 *    requests/s and the target's CPU µs per request; the target is within 5% of plain.
 * 2. Usage records one redis-server sustains through the console library: several clients, each
 *    with many records in flight, distinct request ids over many keys and accounts; the books are
 *    checked exactly afterwards.
 * With `--baseline DIR` (a checkout of keygate from before wallets, with its node_modules), a third
 * side runs that tree's sidecar on the plain key: the figure without any of the money code.
 * Prints markdown.
 */
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { KeyConsole } from '../src/console/service.ts';
import { encodeCheck } from './lib/bodies.ts';
import { startBench } from './lib/setup.ts';
import { ENVOY_HEADERS, median } from './lib/common.ts';
import { recordUsageUntil, seedConsoleKey as seedKey } from './lib/seed.ts';
import { runH2load, type H2loadResult } from './lib/h2load.ts';
import { startTarget, type Target } from './lib/procs.ts';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    baseline: { type: 'string' },
  },
});
const quick = opt.quick!;
const ROUNDS = Number(opt.rounds ?? (quick ? 2 : 5));
const DURATION = Number(opt.duration ?? (quick ? 2 : 5));
const RECORD_SECONDS = quick ? 3 : 10;
const log = (m: string) => process.stderr.write(`bench/money: ${m}\n`);

async function main(): Promise<void> {
  const bench = await startBench('money');
  const { tmp, redis, db, s, targets } = bench;
  const out: string[] = [];
  try {
    const plain = await seedKey(db, s, 'plain');
    const money = await seedKey(db, s, 'money');
    const kc = new KeyConsole({ redis: db });
    await kc.creditAccount(money.account, 1_000_000_000_000, 'bench');
    await kc.setKeyLimit(money.id, { amountMicros: 1_000_000_000_000, period: 'day' });
    await kc.recordUsage({ keyId: money.id, amountMicros: 1, requestId: 'bench-warm' });

    const env = { REDIS_URL: redis.url };
    const base = await startTarget('keygate plain (no wallet, no limit, counting off)', 'keygate', { ...env, KEYGATE_COUNT_USAGE: 'false' });
    targets.push(base);
    const withMoney = await startTarget('keygate money (enforced wallet, key limit, counting on)', 'keygate', { ...env, KEYGATE_COUNT_USAGE: 'true' });
    targets.push(withMoney);
    const before = opt.baseline
      ? await startTarget('keygate before wallets', 'keygate', env, [], join(opt.baseline, 'bench/lib/target.ts'))
      : null;
    if (before) targets.push(before);
    const plainFile = join(tmp, 'plain.bin');
    const moneyFile = join(tmp, 'money.bin');
    writeFileSync(plainFile, encodeCheck({ key: plain.key }));
    writeFileSync(moneyFile, encodeCheck({ key: money.key }));

    const runs = new Map<string, { r: H2loadResult; cpu: number }[]>();
    const drive = async (t: Target, file: string, c: number, m: number, label: string) => {
      const c0 = t.cpuMs();
      const r = await runH2load({ port: t.port, bodyFile: file, connections: c, streams: m, durationSec: DURATION, warmupSec: quick ? 0.3 : 1, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS });
      if (r.non2xx > 0 || r.succeeded < r.done) throw new Error(`${t.name}: ${r.non2xx} non-2xx, ${r.done - r.succeeded} failed`);
      const cpu = ((t.cpuMs() - c0) * 1000) / Math.max(1, r.allRequests);
      runs.set(label, [...(runs.get(label) ?? []), { r, cpu }]);
    };
    for (let round = 0; round < ROUNDS; round++) {
      log(`round ${round + 1}/${ROUNDS}`);
      // Alternate which goes first, so that drift in the machine's load does not favour one side.
      const sides: [Target, string, string][] = [[base, plainFile, 'plain'], [withMoney, moneyFile, 'money']];
      if (before) sides.push([before, plainFile, 'before']);
      const order = round % 2 ? [...sides].reverse() : sides;
      for (const [c, m] of [[4, 16], [1, 1]] as const) {
        for (const [t, f, name] of order as [Target, string, string][]) await drive(t, f, c, m, `${c}x${m}|${name}`);
      }
    }
    // The counts reached Redis (at most a second later) while the money side was driven.
    await new Promise((r) => setTimeout(r, 1500));
    const counted = (await kc.getKeyView(money.id)).usage.requests.today;

    out.push(
      `Cached valid key, side by side in one run: h2load ${DURATION}s per run, median of ${ROUNDS} interleaved rounds (order alternating). ` +
        '"plain": an account without a wallet, a key without a limit, usage counting off (`KEYGATE_COUNT_USAGE=false`); ' +
        '"money": a credited (enforced) wallet, a key with a daily limit, usage counting on. "money / plain" > 0.95 (req/s) and < 1.05 (CPU) meet the 5% target.',
      '',
      '| streams | side | req/s | p99 ms | CPU µs/req |',
      '|---|---|---:|---:|---:|',
    );
    const ratios: string[] = [];
    const goals: string[] = [];
    for (const cm of ['4x16', '1x1']) {
      const v = (name: string) => {
        const rs = runs.get(`${cm}|${name}`)!;
        return { rps: median(rs.map((x) => x.r.rps)), p99: median(rs.map((x) => x.r.p99us)), cpu: median(rs.map((x) => x.cpu)) };
      };
      const p = v('plain');
      const m = v('money');
      out.push(`| ${cm} | plain | ${p.rps.toFixed(0)} | ${(p.p99 / 1000).toFixed(2)} | ${p.cpu.toFixed(1)} |`);
      out.push(`| ${cm} | money | ${m.rps.toFixed(0)} | ${(m.p99 / 1000).toFixed(2)} | ${m.cpu.toFixed(1)} |`);
      const [rr, rc] = [m.rps / p.rps, m.cpu / p.cpu];
      goals.push(`TARGET| money gate (credited wallet + spend limit) within 5% of a plain cached key (bench/money.ts) | ${cm} | ${rr.toFixed(3)} | ${rc.toFixed(3)} | ${rr >= 0.95 && rc <= 1.05 ? 'yes' : rr >= 0.95 || rc <= 1.05 ? 'partly' : 'no'} |`);
      ratios.push(`${cm}: money / plain = **${(m.rps / p.rps).toFixed(3)}** (req/s), **${(m.cpu / p.cpu).toFixed(3)}** (CPU per request)`);
      if (before) {
        const b = v('before');
        out.push(`| ${cm} | before wallets | ${b.rps.toFixed(0)} | ${(b.p99 / 1000).toFixed(2)} | ${b.cpu.toFixed(1)} |`);
        ratios.push(`${cm}: money / before wallets = **${(m.rps / b.rps).toFixed(3)}** (req/s), **${(m.cpu / b.cpu).toFixed(3)}** (CPU per request)`);
      }
    }
    out.push('', ...goals, ...ratios.map((r) => `- ${r}`), `- requests the money sidecar counted and flushed for its key: ${counted}`, '');

    // ---- 2. usage records per second
    const CLIENTS = 4;
    const IN_FLIGHT = 64;
    const ACCOUNTS = 100;
    const keys: { id: string; account: string }[] = [];
    for (let i = 0; i < ACCOUNTS; i++) keys.push(await seedKey(db, s, `rate${i}`));
    const cons = Array.from({ length: CLIENTS }, () => new KeyConsole({ redis: redis.url }));
    for (const k of keys) await kc.creditAccount(k.account, 1_000_000_000_000, 'bench');
    const t0 = Date.now();
    const { n, lat } = await recordUsageUntil(cons, keys, IN_FLIGHT, t0 + RECORD_SECONDS * 1000, 'rate');
    const secs = (Date.now() - t0) / 1000;
    let spent = 0;
    for (const k of keys) spent += 1_000_000_000_000 - (await kc.accountInfo(k.account)).wallet.balance_micros;
    if (spent !== n * 7) throw new Error(`books do not balance: ${spent} != ${n * 7}`);
    lat.sort((a, b) => a - b);
    out.push(
      `Usage records one redis-server sustains through the console library: ${CLIENTS} clients x ${IN_FLIGHT} in flight, ${keys.length} keys in as many accounts, ${RECORD_SECONDS}s:`,
      '',
      '| records | records/s | p50 ms | p99 ms | books exact |',
      '|---:|---:|---:|---:|---|',
      `| ${n} | ${(n / secs).toFixed(0)} | ${lat[Math.floor(lat.length * 0.5)]!.toFixed(2)} | ${lat[Math.floor(lat.length * 0.99)]!.toFixed(2)} | yes (Σ debits = ${spent} µ) |`,
      '',
    );
    await Promise.all(cons.map((c) => c.close()));
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await bench.close();
  }
}

await main();
