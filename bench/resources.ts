/**
 * What the sidecar (metering on, the default) and the console use, for the Kubernetes requests and
 * limits (deploy/k8s, docs/kubernetes.md):
 *
 *   scripts/node bench/resources.ts [--duration 10] [--burst 3000] [--out bench/results/NAME.md]
 *
 * Sidecar, in its own process on its own redis-server: idle; then h2load phases of --duration
 * seconds one after the other: cached Checks (4x16); metered 2 KiB JSON responses through ext_proc
 * (4x16); metered streams of 300 SSE events (4x16); and the three at once (2x8 each: a gateway's
 * mix). Every metered stream is booked (a credited wallet, a price for every model; checked).
 * Console (`keygate console` in its own process): idle for 5 s; then --burst management API calls,
 * 16 at a time, a fifth each of key creations, key lists, usage records, key reads and usage
 * exports, all answered 2xx (checked); then 5 s idle again.
 * Per phase: requests/s, CPU used (cores: CPU time over wall time, and µs per request) and RSS
 * (sampled every 100 ms: the peak, and VmHWM, the process's high-water mark). Prints markdown.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ConsoleService, KeyConsole } from '../src/console/service.ts';
import { pricesKey } from '../src/schema/prices.ts';
import { encodeCheck } from './lib/bodies.ts';
import { ENVOY_HEADERS } from './lib/common.ts';
import { exchangeBody, json2k, PROCESS_PATH, sse300 } from './lib/ext-proc.ts';
import { runH2load, type H2loadResult } from './lib/h2load.ts';
import { loadAverage, startTarget, type Target } from './lib/procs.ts';
import { seedConsoleKey } from './lib/seed.ts';
import { startBench } from './lib/setup.ts';

const { values: opt } = parseArgs({ options: { duration: { type: 'string', default: '10' }, burst: { type: 'string', default: '3000' }, out: { type: 'string' } } });
const DURATION = Number(opt.duration);
const BURST = Number(opt.burst);
const PRICE = { input: 1_000_000, output: 1_000_000 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (kib: number) => (kib / 1024).toFixed(0);
const log = (m: string) => process.stderr.write(`bench/resources: ${m}\n`);

interface Phase { name: string; requests: number; wallMs: number; cpuMs: number; rssPeakKiB: number; rssEndKiB: number; hwmKiB: number }

/** Runs `work` while sampling the target's RSS every 100 ms; CPU and wall time around it. */
async function measure(t: Target, name: string, work: () => Promise<number>): Promise<Phase> {
  let peak = t.memory().rssKiB;
  const timer = setInterval(() => (peak = Math.max(peak, t.memory().rssKiB)), 100);
  const c0 = t.cpuMs();
  const w0 = performance.now();
  try {
    const requests = await work();
    const wallMs = performance.now() - w0;
    const cpuMs = t.cpuMs() - c0;
    const m = t.memory();
    return { name, requests, wallMs, cpuMs, rssPeakKiB: Math.max(peak, m.rssKiB), rssEndKiB: m.rssKiB, hwmKiB: m.hwmKiB };
  } finally {
    clearInterval(timer);
  }
}

const row = (p: Phase) =>
  `| ${p.name} | ${p.requests > 0 ? ((p.requests * 1000) / p.wallMs).toFixed(0) : '–'} | ${(p.cpuMs / p.wallMs).toFixed(2)} | ${p.requests > 0 ? ((p.cpuMs * 1000) / p.requests).toFixed(0) : '–'} | ${mib(p.rssPeakKiB)} | ${mib(p.rssEndKiB)} | ${mib(p.hwmKiB)} |`;
const HEAD = ['| phase | requests/s | CPU (cores) | CPU µs per request | RSS peak MiB | RSS at end MiB | VmHWM MiB |', '|---|---:|---:|---:|---:|---:|---:|'];

async function sidecar(): Promise<string[]> {
  const bench = await startBench('resources-sidecar');
  const { tmp, redis, db, s, targets } = bench;
  const kc = new KeyConsole({ redis: db });
  try {
    const k = await seedConsoleKey(db, s, 'resources');
    await kc.creditAccount(k.account, 1_000_000_000_000, 'bench');
    await db.hset(pricesKey(s.ns), '*', JSON.stringify(PRICE));
    const t = await startTarget('keygate', 'keygate', { REDIS_URL: redis.url });
    targets.push(t);
    const json = json2k();
    const identity = { keyId: k.id, accountId: k.account, model: String(JSON.parse(json.toString()).model) };
    const file = (name: string, b: Buffer) => {
      const p = join(tmp, `${name}.bin`);
      writeFileSync(p, b);
      return p;
    };
    const check = file('check', encodeCheck({ key: k.key }));
    const jsonF = file('json', exchangeBody({ identity, contentType: 'application/json', chunks: [json] }));
    const sseF = file('sse', exchangeBody({ identity: { ...identity, model: 'gpt-4o-mini' }, contentType: 'text/event-stream', chunks: sse300() }));
    const drive = async (bodyFile: string, path: string | undefined, c: number, m: number, tag: string): Promise<H2loadResult> => {
      const r = await runH2load({ port: t.port, path, bodyFile, connections: c, streams: m, durationSec: DURATION, warmupSec: 0, logFile: join(tmp, `h2load-${tag}.log`), headers: ENVOY_HEADERS });
      if (r.non2xx > 0 || r.succeeded < r.done) throw new Error(`${tag}: ${r.non2xx} non-2xx, ${r.done - r.succeeded} failed of ${r.done}`);
      return r;
    };
    await sleep(2000);
    const phases: Phase[] = [await measure(t, 'idle (5 s, after start)', async () => (await sleep(5000), 0))];
    const spent0 = (await kc.getKeyView(k.id)).usage.spend.totalMicros;
    phases.push(await measure(t, 'cached Checks, 4x16', async () => (await drive(check, undefined, 4, 16, 'check')).allRequests));
    phases.push(await measure(t, 'metered 2 KiB JSON responses, 4x16', async () => (await drive(jsonF, PROCESS_PATH, 4, 16, 'json')).allRequests));
    phases.push(await measure(t, 'metered 300-event SSE streams, 4x16', async () => (await drive(sseF, PROCESS_PATH, 4, 16, 'sse')).allRequests));
    phases.push(
      await measure(t, 'the three at once, 2x8 each', async () => {
        const rs = await Promise.all([drive(check, undefined, 2, 8, 'mix-check'), drive(jsonF, PROCESS_PATH, 2, 8, 'mix-json'), drive(sseF, PROCESS_PATH, 2, 8, 'mix-sse')]);
        return rs.reduce((n, r) => n + r.allRequests, 0);
      }),
    );
    phases.push(await measure(t, 'idle again (5 s)', async () => (await sleep(5000), 0)));
    await sleep(1000);
    const spent = (await kc.getKeyView(k.id)).usage.spend.totalMicros - spent0;
    if (!(spent > 0)) throw new Error('no metered stream was booked');
    return [
      '## Sidecar, metering on',
      '',
      `Its own process and redis-server; h2load phases of ${DURATION} s one after the other (no warm-up pass: the first phase includes the JIT warming). A request is a Check or a whole ext_proc stream (a metered response).`,
      '',
      ...HEAD,
      ...phases.map(row),
      '',
      `- booked by metering during the phases: ${spent} µ (every metered stream is written to the books)`,
    ];
  } finally {
    await kc.close().catch(() => {});
    await bench.close();
  }
}

async function consoleBurst(): Promise<string[]> {
  const bench = await startBench('resources-console');
  const { redis, targets } = bench;
  const revealKey = `k1:${randomBytes(32).toString('base64')}`;
  const mc = new ConsoleService({ redis: redis.url, revealKey });
  try {
    const t = await startTarget('console', 'console', { REDIS_URL: redis.url, KEYGATE_REVEAL_KEY: revealKey, KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_CONSOLE_RATE_LIMIT: '1000000', KEYGATE_CONSOLE_BOOKING_RATE_LIMIT: '1000000' });
    targets.push(t);
    const base = `http://127.0.0.1:${t.port}`;
    const token = (await mc.createToken({ name: 'bench', account: null })).token;
    const accounts = Array.from({ length: 50 }, (_, i) => `bench-res-${i}`);
    const keyIds: string[] = [];
    for (const a of accounts.slice(0, 10)) keyIds.push((await mc.createKey({ account: a, name: 'seed' })).id);
    const api = async (method: string, path: string, body?: unknown): Promise<number> => {
      const r = await fetch(base + path, { method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
      await r.arrayBuffer();
      return r.status;
    };
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const call = (i: number): Promise<number> => {
      const a = accounts[i % accounts.length]!;
      const id = keyIds[i % keyIds.length]!;
      switch (i % 5) {
        case 0: return api('POST', `/v1/accounts/${a}/keys`, { name: `burst ${i}` });
        case 1: return api('GET', `/v1/accounts/${a}/keys`);
        case 2: return api('POST', '/v1/usage', { key_id: id, amount_micros: 1000, request_id: `burst-${i}`, model: 'gpt-4o-mini', input_tokens: 10, output_tokens: 20 });
        case 3: return api('GET', `/v1/keys/${id}`);
        default: return api('GET', `/v1/usage?${new URLSearchParams({ account: accounts[i % 10]!, since })}`);
      }
    };
    await sleep(2000);
    const phases: Phase[] = [await measure(t, 'idle (5 s, after start)', async () => (await sleep(5000), 0))];
    const statuses = new Map<number, number>();
    phases.push(
      await measure(t, `${BURST} API calls, 16 at a time`, async () => {
        let next = 0;
        await Promise.all(
          Array.from({ length: 16 }, async () => {
            while (next < BURST) {
              const st = await call(next++);
              statuses.set(st, (statuses.get(st) ?? 0) + 1);
            }
          }),
        );
        return BURST;
      }),
    );
    phases.push(await measure(t, 'idle again (5 s)', async () => (await sleep(5000), 0)));
    const bad = [...statuses].filter(([st]) => st >= 300);
    if (bad.length > 0) throw new Error(`console burst: answers ${JSON.stringify(Object.fromEntries(statuses))}`);
    return [
      '## Console (`keygate console`)',
      '',
      'Its own process and redis-server; an admin token; key creations over 50 accounts, key lists, usage records on 10 keys (no wallet), key reads and usage exports of an account, in turn.',
      '',
      ...HEAD,
      ...phases.map(row),
      '',
      `- answers: ${[...statuses].map(([st, n]) => `${n} × ${st}`).join(', ')}`,
    ];
  } finally {
    await mc.close().catch(() => {});
    await bench.close();
  }
}

const load0 = loadAverage();
const started = new Date().toISOString();
log('sidecar');
const sc = await sidecar();
log('console');
const con = await consoleBurst();
const out = [
  '# keygate resources: sidecar (metering on) and console',
  '',
  `- date: ${started}`,
  `- machine: ${cpus().length} x ${cpus()[0]?.model.split(' ').slice(0, 2).join(' ')}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB; Node ${process.version}`,
  `- load average at start ${load0}, at end ${loadAverage()} (a shared machine: CPU µs per request is the figure to carry over, cores are what this machine gave)`,
  `- command: \`scripts/node bench/resources.ts --duration ${DURATION} --burst ${BURST}\``,
  '',
  ...sc,
  '',
  ...con,
  '',
].join('\n');
process.stdout.write(out);
if (opt.out) writeFileSync(opt.out, out);
