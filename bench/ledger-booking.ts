/**
 * What the usage ledger costs a booking (docs/ledger.md): booking throughput with the ledger's
 * group on the account's log and a sink copying to PostgreSQL, side by side with an account
 * without (also run by `npm run bench`, part `ledger`):
 *
 *   scripts/node bench/ledger-booking.ts [--quick] [--rounds N] [--duration S]
 *
 * One redis-server, one PostgreSQL (initdb in a temporary directory). Two accounts alike: `off`
 * (no group: the record script trims with MAXLEN ~ as without a ledger) and `on` (the group on its
 * log, a sink in this process copying, acknowledging and trimming). Each round books for DURATION
 * seconds on one side, then on the other (the order alternating), through the metering write
 * (`redisBookingWrite`: the usage-record script, pipelined, four clients, 250 a batch). Bookings/s
 * and redis-server's CPU per booking; the Check path does not change (the sidecar never loads the
 * ledger). Prints markdown.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { LedgerSink, migrate } from '../src/ledger/index.ts';
import { LEDGER_GROUP } from '../src/ledger/scripts.ts';
import { redisBookingWrite, type PricedBooking } from '../src/metering/booker.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { median } from './lib/common.ts';
import { startPostgres } from './lib/postgres.ts';
import { cpuMsOf } from './lib/procs.ts';
import { startRedis } from './lib/redis.ts';

const { values } = parseArgs({ options: { quick: { type: 'boolean', default: false }, rounds: { type: 'string' }, duration: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? (values.quick ? 1 : 3));
const DURATION = Number(values.duration ?? (values.quick ? 2 : 5)) * 1000;
const CLIENTS = 4;
const BATCH = 250;
const s = schema();

const redis = await startRedis();
const pgs = await startPostgres();
try {
  const pool = pgs.pool();
  await migrate(pool);
  const kc = new KeyConsole({ redis: redis.url, revealKey: `base64:${randomBytes(32).toString('base64')}` });
  const keys = { off: (await kc.createKey({ account: 'off', name: 'off' })).id, on: (await kc.createKey({ account: 'on', name: 'on' })).id };
  const port = Number(new URL(redis.url).port);
  const clients = Array.from({ length: CLIENTS }, () => new Redis(port, '127.0.0.1'));
  await clients[0]!.xgroup('CREATE', s.usageLog('on'), LEDGER_GROUP, '0', 'MKSTREAM');
  const sinkRedis = new Redis(port, '127.0.0.1');
  const sink = new LedgerSink(sinkRedis, pool, s, createLogger('silent'), { pollMs: 20, accountsEveryMs: 500 });
  sink.start();
  const writes = clients.map((c) => redisBookingWrite(c, s));
  let seq = 0;
  const booking = (account: 'on' | 'off'): PricedBooking => ({
    booking: { request_id: `q-${seq}`, booking_id: `q-${seq++}`, key_id: keys[account], account, model: 'gpt-4o-mini', family: 'openai', input_tokens: 120, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 40, reasoning_tokens: 0, estimated: false },
    amountMicros: 17,
    unpriced: false,
    endedAt: Date.now(),
  });
  const side = async (account: 'on' | 'off') => {
    const cpu0 = cpuMsOf(redis.pid);
    const t0 = Date.now();
    let n = 0;
    await Promise.all(
      writes.map(async (w) => {
        while (Date.now() - t0 < DURATION) {
          await w(Array.from({ length: BATCH }, () => booking(account)));
          n += BATCH;
        }
      }),
    );
    const secs = (Date.now() - t0) / 1000;
    return { perSecond: n / secs, cpuUsPerBooking: ((cpuMsOf(redis.pid) - cpu0) * 1000) / n };
  };
  const res: Record<'on' | 'off', { perSecond: number; cpuUsPerBooking: number }[]> = { on: [], off: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const account of r % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) res[account].push(await side(account));
  }
  const t = Date.now();
  while (sink.lagMs > 0 || (await clients[0]!.xlen(s.usageLog('on'))) > 0) {
    if (Date.now() - t > 120_000) break;
    await new Promise((r2) => setTimeout(r2, 100));
  }
  const rows = Number((await pool.query("SELECT count(*) AS n FROM keygate_usage WHERE account = 'on'")).rows[0].n);
  const med = (a: 'on' | 'off', k: 'perSecond' | 'cpuUsPerBooking') => median(res[a].map((x) => x[k]));
  const lines = [
    `# Usage ledger: booking cost (${ROUNDS} round(s) of ${DURATION / 1000} s a side${values.quick ? ', quick: indicative only' : ''})`,
    '',
    '| side | bookings/s (median) | redis-server CPU µs per booking |',
    '|---|---|---|',
    `| without the ledger (\`off\`) | ${Math.round(med('off', 'perSecond'))} | ${med('off', 'cpuUsPerBooking').toFixed(1)} |`,
    `| with the ledger (\`on\`: group, sink copying) | ${Math.round(med('on', 'perSecond'))} | ${med('on', 'cpuUsPerBooking').toFixed(1)} |`,
    '',
    `with / without: **${(med('on', 'perSecond') / med('off', 'perSecond')).toFixed(3)}×** bookings/s (target: within 10%). The sink wrote ${rows} rows for \`on\`; its lag at the end ${sink.lagMs} ms.`,
    `per round (with / without): ${res.on.map((x, i) => (x.perSecond / res.off[i]!.perSecond).toFixed(3)).join(', ')}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  await sink.stop();
  sinkRedis.disconnect();
  for (const c of clients) c.disconnect();
  await kc.close();
} finally {
  await pgs.destroy();
  await redis.stop();
}
