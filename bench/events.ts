/**
 * Events do not slow the hot path: both sides in one run, interleaved (also run by `npm run bench`,
 * part `events`):
 *
 *   scripts/node bench/events.ts [--quick] [--rounds N] [--duration S]
 *
 * 1. Cached Check, one sidecar, two keys alike in every money respect (a credited wallet, a daily
 *    spend limit): "quiet", an account with no event settings at all, against "eventful", an account
 *    with webhook endpoints, a wallet-low threshold, key thresholds (50, 80, 100 %) and thousands of
 *    undelivered events in its stream (no delivery worker runs). h2load 4x16 and 1x1, requests/s and
 *    the sidecar's CPU µs per request.
 * 2. Usage bookings through the console library (the usage script, which a metered booking reuses):
 *    accounts whose keys have no thresholds and no wallet-low threshold, against accounts with both
 *    (checked on every booking; none is crossed, so what is measured is the checking). Records/s,
 *    p50/p99, and redis-server's CPU µs per record (the script runs there).
 * Every measured run of one side is followed by the other's (order alternating by round). Prints markdown.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KeyConsole } from '../src/console/service.ts';
import { eventsSchema } from '../src/schema/events.ts';
import { encodeCheck } from './lib/bodies.ts';
import { median } from './lib/common.ts';
import { percentile } from './lib/loadgen.ts';
import { cpuMsOf, startTarget } from './lib/procs.ts';
import { recordUsageUntil, seedConsoleKey } from './lib/seed.ts';
import { startBench } from './lib/setup.ts';
import { sideBySideChecks } from './lib/side-by-side.ts';

const { values: opt } = parseArgs({ options: { quick: { type: 'boolean', default: false }, rounds: { type: 'string' }, duration: { type: 'string' } } });
const quick = opt.quick!;
const ROUNDS = Number(opt.rounds ?? (quick ? 1 : 3));
const DURATION = Number(opt.duration ?? (quick ? 1 : 2));
const UNDELIVERED = quick ? 1000 : 5000;
const BIG = 1_000_000_000_000;
const log = (m: string) => process.stderr.write(`bench/events: ${m}\n`);

async function main(): Promise<void> {
  const bench = await startBench('events');
  const { tmp, redis, db, s, targets } = bench;
  const reveal = `k1:${randomBytes(32).toString('base64')}`;
  const kc = new KeyConsole({ redis: db, revealKey: reveal });
  const es = eventsSchema('kg');
  const out: string[] = [];
  try {
    // ---- the two accounts of the Check part
    const quiet = await seedConsoleKey(db, s, 'quiet');
    const eventful = await seedConsoleKey(db, s, 'eventful');
    for (const k of [quiet, eventful]) {
      await kc.creditAccount(k.account, BIG, 'bench');
      await kc.setKeyLimit(k.id, { amountMicros: BIG, period: 'day' });
    }
    await kc.setWalletLow(eventful.account, 1_000_000);
    await kc.setKeyAlertThresholds(eventful.id, [50, 80, 100]);
    for (let i = 0; i < 3; i++) await kc.createWebhook({ url: `http://127.0.0.1:9/hook-${i}`, account: eventful.account }, undefined, { allowPrivate: true });
    for (let i = 0; i < UNDELIVERED; i++) await kc.events.publish(eventful.account, 'wallet.credited', { amount_micros: 1, reference: `bench-${i}`, balance_micros: BIG });
    const undelivered = await db.xlen(es.stream(eventful.account));
    // The quiet account as one that never had an event: its set-up credit's event removed.
    await db.del(es.stream(quiet.account), es.alerts(quiet.account));
    await db.srem(es.accounts(), quiet.account);
    await db.zrem(es.due(), quiet.account);
    const quietEvents = await db.exists(es.stream(quiet.account), es.alerts(quiet.account));

    const kg = await startTarget('keygate', 'keygate', { REDIS_URL: redis.url });
    targets.push(kg);
    const files = { quiet: join(tmp, 'quiet.bin'), eventful: join(tmp, 'eventful.bin') };
    writeFileSync(files.quiet, encodeCheck({ key: quiet.key }));
    writeFileSync(files.eventful, encodeCheck({ key: eventful.key }));

    const checks = await sideBySideChecks({
      sides: [{ name: 'quiet', target: kg, bodyFile: files.quiet }, { name: 'eventful', target: kg, bodyFile: files.eventful }],
      compare: [{ side: 'eventful', base: 'quiet', goal: 'cached Check of an account with webhooks, thresholds and undelivered events within 5% of one without (bench/events.ts)' }],
      rounds: ROUNDS,
      durationSec: DURATION,
      warmupSec: quick ? 0.3 : 0.5,
      tmp,
      log: (m) => log(`checks: ${m}`),
    });
    out.push(
      `### Cached Check: an account with webhooks, thresholds and undelivered events, and one without`,
      '',
      `One sidecar, both keys in the same rounds: h2load ${DURATION}s per run, median of ${ROUNDS} interleaved rounds (order alternating). ` +
        `Both keys: a credited wallet and a daily spend limit. "eventful": 3 webhook endpoints, wallet-low threshold, key thresholds 50/80/100 %, ${undelivered} undelivered events in its stream (no delivery worker running); "quiet": no endpoint, no alert setting, no event stream (${quietEvents === 0 ? 'checked' : 'NOT so'}).`,
      '',
      '| streams | account | req/s | p99 ms | CPU µs/req |',
      '|---|---|---:|---:|---:|',
    );
    out.push(...checks.rows);
    out.push('', ...checks.targets, ...checks.ratios.map((r) => `- ${r}`), '');

    // ---- 2. usage bookings with thresholds and without
    const ACCOUNTS = 20;
    const sides = { plain: [] as { id: string; account: string }[], thresholds: [] as { id: string; account: string }[] };
    for (const side of ['plain', 'thresholds'] as const) {
      for (let i = 0; i < ACCOUNTS; i++) {
        const k = await seedConsoleKey(db, s, `${side}${i}`);
        await kc.creditAccount(k.account, BIG, 'bench');
        await kc.setKeyLimit(k.id, { amountMicros: BIG, period: 'day' });
        if (side === 'plain') await kc.setKeyAlertThresholds(k.id, []);
        else {
          await kc.setKeyAlertThresholds(k.id, [50, 80, 100]);
          await kc.setWalletLow(k.account, 1_000_000);
        }
        sides[side].push(k);
      }
    }
    const CLIENTS = 2;
    const IN_FLIGHT = 32;
    const cons = Array.from({ length: CLIENTS }, () => new KeyConsole({ redis: redis.url }));
    const booked = { plain: 0, thresholds: 0 };
    const bk = new Map<string, { rps: number; p50: number; p99: number; cpu: number }[]>();
    const book = async (side: 'plain' | 'thresholds', round: number) => {
      const keys = sides[side];
      const c0 = cpuMsOf(redis.pid);
      const t0 = performance.now();
      const { n, lat } = await recordUsageUntil(cons, keys, IN_FLIGHT, Date.now() + DURATION * 1000, `${side}-${round}`);
      const secs = (performance.now() - t0) / 1000;
      const cpu = ((cpuMsOf(redis.pid) - c0) * 1000) / Math.max(1, n);
      booked[side] += n;
      bk.set(side, [...(bk.get(side) ?? []), { rps: n / secs, p50: percentile(lat, 50), p99: percentile(lat, 99), cpu }]);
    };
    for (let round = 0; round < ROUNDS; round++) {
      log(`bookings: round ${round + 1}/${ROUNDS}`);
      for (const side of round % 2 ? (['thresholds', 'plain'] as const) : (['plain', 'thresholds'] as const)) await book(side, round);
    }
    // The books are exact, and nothing was crossed: no event written by a booking.
    for (const side of ['plain', 'thresholds'] as const) {
      let spent = 0;
      for (const k of sides[side]) spent += BIG - (await kc.accountInfo(k.account)).wallet.balance_micros;
      if (spent !== booked[side] * 7) throw new Error(`${side}: books do not balance (${spent} != ${booked[side] * 7})`);
    }
    let eventsWritten = 0;
    for (const k of sides.thresholds) eventsWritten += await db.xlen(es.stream(k.account)).catch(() => 0);
    const credited = sides.thresholds.length; // one wallet.credited each, from the set-up credit
    out.push(
      `### Usage bookings with thresholds and without`,
      '',
      `The usage script through the console library (a metered booking runs the same script): ${CLIENTS} clients x ${IN_FLIGHT} in flight, ${ACCOUNTS} keys in as many accounts per side, ${DURATION}s per run, median of ${ROUNDS} interleaved rounds (order alternating). ` +
        '"plain": keys with a daily limit and no thresholds, no wallet-low threshold; "thresholds": the same with key thresholds 50/80/100 % and a wallet-low threshold, checked on every booking (none crossed). redis-server\'s CPU per record: the script runs there.',
      '',
      '| side | records/s | p50 ms | p99 ms | redis-server CPU µs/record |',
      '|---|---:|---:|---:|---:|',
    );
    const m = (side: string) => {
      const rs = bk.get(side)!;
      return { rps: median(rs.map((x) => x.rps)), p50: median(rs.map((x) => x.p50)), p99: median(rs.map((x) => x.p99)), cpu: median(rs.map((x) => x.cpu)) };
    };
    const [p, t] = [m('plain'), m('thresholds')];
    for (const [name, v] of [['plain', p], ['thresholds', t]] as const) out.push(`| ${name} | ${v.rps.toFixed(0)} | ${v.p50.toFixed(2)} | ${v.p99.toFixed(2)} | ${v.cpu.toFixed(1)} |`);
    out.push(
      '',
      `- thresholds / plain = **${(t.rps / p.rps).toFixed(3)}** (records/s), **${(t.cpu / p.cpu).toFixed(3)}** (redis-server CPU per record)`,
      `- books exact on both sides (Σ debits = records × 7 µ: ${booked.plain} and ${booked.thresholds} records); events in the threshold accounts' streams: ${eventsWritten} (the ${credited} set-up credits: no booking crossed a threshold)`,
      '',
    );
    await Promise.all(cons.map((c) => c.close()));
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await kc.close().catch(() => {});
    await bench.close();
  }
}

await main();
