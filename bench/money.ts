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
import { recordUsageUntil, seedConsoleKey as seedKey } from './lib/seed.ts';
import { percentile } from './lib/loadgen.ts';
import { startTarget } from './lib/procs.ts';
import { sideBySideChecks, type CheckSide, type Comparison } from './lib/side-by-side.ts';

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

    const sides: CheckSide[] = [{ name: 'plain', target: base, bodyFile: plainFile }, { name: 'money', target: withMoney, bodyFile: moneyFile }];
    const compare: Comparison[] = [{ side: 'money', base: 'plain', goal: 'money gate (credited wallet + spend limit) within 5% of a plain cached key (bench/money.ts)' }];
    if (before) {
      sides.push({ name: 'before', label: 'before wallets', target: before, bodyFile: plainFile });
      compare.push({ side: 'money', base: 'before' });
    }
    const checks = await sideBySideChecks({ sides, compare, rounds: ROUNDS, durationSec: DURATION, warmupSec: quick ? 0.3 : 1, tmp, log });
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
    out.push(...checks.rows);
    out.push('', ...checks.targets, ...checks.ratios.map((r) => `- ${r}`), `- requests the money sidecar counted and flushed for its key: ${counted}`, '');

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
    out.push(
      `Usage records one redis-server sustains through the console library: ${CLIENTS} clients x ${IN_FLIGHT} in flight, ${keys.length} keys in as many accounts, ${RECORD_SECONDS}s:`,
      '',
      '| records | records/s | p50 ms | p99 ms | books exact |',
      '|---:|---:|---:|---:|---|',
      `| ${n} | ${(n / secs).toFixed(0)} | ${percentile(lat, 50).toFixed(2)} | ${percentile(lat, 99).toFixed(2)} | yes (Σ debits = ${spent} µ) |`,
      '',
    );
    await Promise.all(cons.map((c) => c.close()));
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await bench.close();
  }
}

await main();
