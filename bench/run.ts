/**
 * `npm run bench` — keygate against the floor of its own gRPC stack, in one run on one machine.
 *
 * Starts its own redis-server, the sidecar (in a child process) and a no-op ext_authz server on
 * @grpc/grpc-js (the floor), seeds keys, builds gRPC-framed Envoy CheckRequest bodies, and drives
 * every target in turn with h2load (same connections and streams, interleaved over rounds). Cases:
 *   1. valid key, cached                 2. malformed-checksum key; unknown well-formed key
 *   3. model-restricted key, 1 KiB / 64 KiB / 1 MiB bodies, `model` first and last
 *   4. cold keys (a different seeded key per request; Redis round trips per decision)
 *   5. latency at a fixed offered load of half the floor's peak (p50/p99/p99.9)
 * plus resident memory (100k and 1M keys cached; a flood of 1M random unknown keys), and the
 * propagation and model-scan benches when present. Writes a markdown report under bench/results/.
 *
 *   npm run bench                  full run (about 15 minutes)
 *   npm run bench -- --quick       smoke run (about 1 minute, small numbers, indicative only)
 *   npm run bench -- --profile     CPU profile of the sidecar under case 1 (bench/tmp/prof)
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, hostname, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.ts';
import { DEFAULT_KEY_PREFIX } from '../src/keys/format.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { destroyRedis, startRedis } from '../test/helpers/redis-server.ts';
import { chatBody, decodeCheckResponse, encodeCheck, fastKeys, keyTemplate, malformedKey } from './lib/bodies.ts';
import { ensureH2load, runH2load, type H2loadResult } from './lib/h2load.ts';
import { runLoad, verdictOf, type LoadResult } from './lib/loadgen.ts';
import { loadAverage, loadgen, startTarget, type Target } from './lib/procs.ts';
import { commandCalls, roundTripsPerDecision, seedKeys, writeKeysFile } from './lib/seed.ts';
import { summarizeProfile } from './lib/profile.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    connections: { type: 'string', default: '4' },
    streams: { type: 'string', default: '16' },
    'skip-memory': { type: 'boolean', default: false },
    'skip-extra': { type: 'boolean', default: false },
    'latency-only': { type: 'boolean', default: false },
    transports: { type: 'string' },
    out: { type: 'string' },
  },
});

const quick = opt.quick!;
const P = {
  rounds: Number(opt.rounds ?? (quick ? 1 : 3)),
  duration: Number(opt.duration ?? (quick ? 1 : 5)),
  warmup: quick ? 0.3 : 1,
  connections: Number(opt.connections),
  streams: Number(opt.streams),
  coldKeys: quick ? 4000 : 100_000,
  memCached: quick ? [2000, 10_000] : [100_000, 1_000_000],
  flood: quick ? 10_000 : 1_000_000,
  accounts: quick ? 100 : 1000,
};
const PREFIX = DEFAULT_KEY_PREFIX;
/** Envoy sends the ext_authz filter's timeout as grpc-timeout. */
const ENVOY_HEADERS = { 'grpc-timeout': '250m', 'user-agent': 'envoy/1.34.1' };

export interface TargetDef {
  name: string;
  kind: string;
  env?: Record<string, string>;
  /** The floor and references are driven only with the body sizes, not every case. */
  reference?: boolean;
  /** Only the headers-only cases, the single-stream run and the paced run (a transport already ruled out). */
  lite?: boolean;
}

/** Sidecar variants to compare (transport selectable by config); the floor and references always run. */
function targetDefs(): TargetDef[] {
  const transports = (opt.transports ?? 'grpc-js,h2,connect').split(',').map((s) => s.trim()).filter(Boolean);
  const sidecars: TargetDef[] = transports.length
    ? transports.map((t) => ({ name: `keygate[${t}]`, kind: 'keygate', env: { KEYGATE_GRPC_TRANSPORT: t }, lite: t === 'connect' && !opt.transports }))
    : [{ name: 'keygate', kind: 'keygate' }];
  return [
    { name: 'floor: grpc-js no-op', kind: 'noop-grpcjs', reference: true },
    { name: 'ref: node:http2 no-op', kind: 'noop-h2', reference: true },
    { name: 'ref: connect-node no-op', kind: 'noop-connect', reference: true },
    ...sidecars,
  ];
}

interface Case {
  id: string;
  label: string;
  file: string;
  expect: string;
  /** Which floor body this case compares with (same size). */
  size: string;
}

const log = (s: string) => process.stderr.write(`bench: ${s}\n`);
const ms = (us: number) => (Number.isNaN(us) ? '–' : (us / 1000).toFixed(us < 10_000 ? 2 : 1));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2) : NaN;
};

async function verifySample(t: Target, file: string): Promise<string> {
  const r: LoadResult = await runLoad({ port: t.port, connections: 1, streams: 1, requests: 1, bodyFile: file, sampleEvery: 1, headers: ENVOY_HEADERS });
  if (r.errors > 0) return `error:${r.firstError}`;
  const gs = Object.keys(r.grpcStatus)[0];
  if (gs !== '0') return `grpc-status:${gs}`;
  return Object.keys(r.sampled)[0] ?? 'no-body';
}

async function runExtra(script: string, args: string[]): Promise<string> {
  const path = join(HERE, script);
  if (!existsSync(path)) return `_not run: bench/${script} is not in this tree yet_`;
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', path, ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT });
    let out = '';
    let err = '';
    p.stdout.on('data', (c) => (out += c));
    p.stderr.on('data', (c) => (err += c));
    const t = setTimeout(() => p.kill('SIGTERM'), 15 * 60_000);
    p.on('exit', (code) => {
      clearTimeout(t);
      resolve(code === 0 ? out.trim() : `_bench/${script} failed (exit ${code})_\n\n\`\`\`\n${(err || out).trim().slice(-1500)}\n\`\`\``);
    });
  });
}

async function main(): Promise<void> {
  ensureH2load();
  const tmp = join(HERE, 'tmp', `run-${process.pid}`);
  mkdirSync(tmp, { recursive: true });
  const startedAt = new Date();
  const loadBefore = loadAverage();
  log(`load average ${loadBefore}; ${quick ? 'QUICK (indicative only)' : 'full'} run, ${P.rounds} round(s) of ${P.duration}s per run`);

  const redis = await startRedis();
  const db = redis.client();
  const s = schema();
  const env = { REDIS_URL: redis.url };
  const targets: Target[] = [];
  const report: string[] = [];
  try {
    // ---- keys and bodies
    const [valid] = await seedKeys(db, s, { prefix: PREFIX, count: 1, accounts: 1, tag: 'valid' });
    const [restricted] = await seedKeys(db, s, { prefix: PREFIX, count: 1, accounts: 1, tag: 'model', models: ['gpt-4o-mini', 'anthropic/*'] });
    const unknown = fastKeys(PREFIX, 1)[0]!;
    const file = (name: string, b: Buffer) => {
      const p = join(tmp, `${name}.bin`);
      writeFileSync(p, b);
      return p;
    };
    const cases: Case[] = [
      { id: 'valid', label: '1. valid key, cached', file: file('valid', encodeCheck({ key: valid })), expect: 'allow', size: 'headers only' },
      { id: 'malformed', label: '2a. malformed checksum', file: file('malformed', encodeCheck({ key: malformedKey(valid!) })), expect: 'deny:INVALID_API_KEY', size: 'headers only' },
      { id: 'unknown', label: '2b. unknown well-formed key', file: file('unknown', encodeCheck({ key: unknown })), expect: 'deny:INVALID_API_KEY', size: 'headers only' },
    ];
    const floorFiles: Record<string, string> = { 'headers only': cases[0]!.file };
    for (const [size, n] of [['1 KiB', 1024], ['64 KiB', 64 * 1024], ['1 MiB', 1024 * 1024]] as const) {
      for (const where of ['first', 'last'] as const) {
        const f = file(`model-${n}-${where}`, encodeCheck({ key: restricted, body: chatBody(n, 'gpt-4o-mini', where) }));
        cases.push({ id: `model-${n}-${where}`, label: `3. restricted key, ${size}, model ${where}`, file: f, expect: 'allow', size });
        floorFiles[size] ??= f;
      }
    }

    // ---- targets
    const defs = targetDefs();
    for (const d of defs) targets.push(await startTarget(d.name, d.kind, { ...env, ...d.env }));
    const floor = targets[0]!;
    const sidecars = targets.filter((_, i) => !defs[i]!.reference);
    const refs = targets.filter((_, i) => defs[i]!.reference);
    const isLite = (t: Target) => defs[targets.indexOf(t)]!.lite === true;

    // ---- correctness of what is measured: one decoded answer per case and target
    const verify: string[] = ['| case | target | expected | got |', '|---|---|---|---|'];
    for (const c of cases) {
      for (const t of sidecars) {
        const got = await verifySample(t, c.file);
        verify.push(`| ${c.label} | ${t.name} | ${c.expect} | ${got} |`);
        if (got !== c.expect) throw new Error(`${t.name} answered ${got} to "${c.label}", expected ${c.expect}`);
      }
    }
    for (const t of refs) {
      const got = await verifySample(t, cases[0]!.file);
      if (got !== 'allow') throw new Error(`${t.name} answered ${got}, expected allow`);
    }

    if (opt.profile) {
      await profileRun(env, cases[0]!.file, tmp);
      return;
    }

    // ---- throughput, interleaved: every round drives every (case, target) once, in turn
    const results = new Map<string, H2loadResult[]>();
    const rec = (k: string, r: H2loadResult) => results.set(k, [...(results.get(k) ?? []), r]);
    /** CPU µs the target spent per request in each run (robust to other load on the machine). */
    const cpu = new Map<H2loadResult, number>();
    const drive = async (t: Target, f: string, c: number, m: number) => {
      const c0 = t.cpuMs();
      const r = await runH2load({ port: t.port, bodyFile: f, connections: c, streams: m, durationSec: P.duration, warmupSec: P.warmup, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS });
      cpu.set(r, ((t.cpuMs() - c0) * 1000) / Math.max(1, r.allRequests));
      return r;
    };
    const check = (name: string, r: H2loadResult) => {
      if (r.non2xx > 0 || r.succeeded < r.done) throw new Error(`${name}: ${r.non2xx} non-2xx, ${r.done - r.succeeded} failed of ${r.done}`);
    };
    const latencyOnly = opt['latency-only']!;
    for (let round = 0; round < P.rounds && latencyOnly; round++) {
      const r = await drive(floor, cases[0]!.file, P.connections, P.streams);
      check(floor.name, r);
      rec(`${floor.name}|headers only`, r);
    }
    for (let round = 0; round < P.rounds && !latencyOnly; round++) {
      log(`round ${round + 1}/${P.rounds} (load ${loadAverage()})`);
      // one stream on one connection: the per-request cost without concurrency
      for (const t of [...refs, ...sidecars]) {
        const r = await drive(t, cases[0]!.file, 1, 1);
        check(t.name, r);
        rec(`1x1|${t.name}|valid`, r);
      }
      for (const c of cases) {
        if (cases.find((x) => x.size === c.size) === c) {
          // the floor (and references) for this body size, right before the cases that use it
          for (const ref of refs) {
            if (ref !== floor && c.size !== 'headers only') continue;
            const r = await drive(ref, floorFiles[c.size]!, P.connections, P.streams);
            check(ref.name, r);
            rec(`${ref.name}|${c.size}`, r);
          }
        }
        for (const t of sidecars) {
          if (isLite(t) && c.size !== 'headers only') continue;
          const r = await drive(t, c.file, P.connections, P.streams);
          check(`${t.name} ${c.id}`, r);
          rec(`${t.name}|${c.id}`, r);
        }
      }
    }
    const sum = (k: string) => {
      const rs = results.get(k) ?? [];
      return {
        rps: median(rs.map((r) => r.rps)),
        p50: median(rs.map((r) => r.p50us)),
        p99: median(rs.map((r) => r.p99us)),
        cpu: median(rs.map((r) => cpu.get(r) ?? NaN)),
      };
    };

    const cm = `${P.connections} connections x ${P.streams} streams`;
    const table: string[] = [
      `Throughput: h2load, ${cm}, ${P.duration}s per run after ${P.warmup}s warm-up, median of ${P.rounds} interleaved round(s). ` +
        `"x floor" = requests/s over the grpc-js no-op floor driven with a body of the same size in the same round(s). ` +
        `"CPU µs/req" = CPU time of the target process per request (/proc, user + system), and "x floor (CPU)" = the floor's ` +
        `CPU per request over the target's: the capacity ratio on one core, much less sensitive to other load on the machine.`,
      '',
      '| case | target | req/s | p50 ms | p99 ms | x floor | CPU µs/req | x floor (CPU) |',
      '|---|---|---:|---:|---:|---:|---:|---:|',
    ];
    for (const size of Object.keys(floorFiles)) {
      for (const ref of refs) {
        const v = sum(`${ref.name}|${size}`);
        if (Number.isNaN(v.rps)) continue;
        const f = sum(`${floor.name}|${size}`);
        table.push(`| ${size} body | ${ref.name} | ${v.rps.toFixed(0)} | ${ms(v.p50)} | ${ms(v.p99)} | ${(v.rps / f.rps).toFixed(2)} | ${v.cpu.toFixed(0)} | ${(f.cpu / v.cpu).toFixed(2)} |`);
      }
      for (const c of cases.filter((x) => x.size === size)) {
        for (const t of sidecars) {
          if (isLite(t) && c.size !== 'headers only') continue;
          const v = sum(`${t.name}|${c.id}`);
          const f = sum(`${floor.name}|${size}`);
          table.push(`| ${c.label} | ${t.name} | ${v.rps.toFixed(0)} | ${ms(v.p50)} | ${ms(v.p99)} | **${(v.rps / f.rps).toFixed(2)}** | ${v.cpu.toFixed(0)} | **${(f.cpu / v.cpu).toFixed(2)}** |`);
        }
      }
    }
    table.push('', `One connection, one stream (case 1, per-request cost without concurrency):`, '', '| target | req/s | p50 ms | p99 ms | x floor | CPU µs/req | x floor (CPU) |', '|---|---:|---:|---:|---:|---:|---:|');
    const f11 = sum(`1x1|${floor.name}|valid`);
    for (const t of [...refs, ...sidecars]) {
      const v = sum(`1x1|${t.name}|valid`);
      table.push(`| ${t.name} | ${v.rps.toFixed(0)} | ${ms(v.p50)} | ${ms(v.p99)} | ${(v.rps / f11.rps).toFixed(2)} | ${v.cpu.toFixed(0)} | ${(f11.cpu / v.cpu).toFixed(2)} |`);
    }

    // ---- 5. latency at half the floor's peak
    const floorPeak = sum(`${floor.name}|headers only`).rps;
    const offered = Math.round(floorPeak / 2);
    log(`latency at ${offered} req/s (half the floor's ${floorPeak.toFixed(0)})`);
    const latency: string[] = [
      `Latency at a fixed offered load of ${offered} req/s (half the floor's peak of ${floorPeak.toFixed(0)} req/s), case 1, h2load --rps, ${P.duration * 2}s per run. ` +
        `h2load paces each connection by sending its share in bursts on a timer, so with 16 streams per connection a burst queues behind itself; ` +
        `with one stream per connection the requests go one at a time per connection (closer to a decision's own latency):`,
      '',
      '| connections x streams | target | achieved req/s | p50 ms | p99 ms | p99.9 ms | max ms |',
      '|---|---|---:|---:|---:|---:|---:|',
    ];
    for (const [c, m] of [[P.connections, P.streams], [P.connections, 1]] as const) {
      for (const t of [floor, ...sidecars]) {
        const r = await runH2load({
          port: t.port, bodyFile: cases[0]!.file, connections: c, streams: m, durationSec: P.duration * 2,
          warmupSec: P.warmup, rps: offered, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS,
        });
        check(`${t.name} paced`, r);
        latency.push(`| ${c} x ${m} | ${t.name} | ${r.rps.toFixed(0)} | ${ms(r.p50us)} | ${ms(r.p99us)} | ${ms(r.p999us)} | ${ms(r.maxus)} |`);
      }
    }
    if (latencyOnly) table.splice(0, table.length, `_Not run (--latency-only): only the floor's peak was measured, ${P.rounds} run(s), for the offered load below._`);

    // ---- 4. cold keys
    const tpl = keyTemplate(PREFIX);
    const tplFile = join(tmp, 'template.bin');
    writeFileSync(tplFile, tpl.frame);
    writeFileSync(tplFile + '.json', JSON.stringify({ offset: tpl.offset, keyLength: tpl.keyLength }));
    const cold: string[] = [];
    if (!latencyOnly) {
    log(`cold keys: seeding ${P.coldKeys}`);
    const coldKeys = await seedKeys(db, s, { prefix: PREFIX, count: P.coldKeys, accounts: P.accounts, tag: 'cold' });
    const keysFile = join(tmp, 'cold-keys.txt');
    writeKeysFile(keysFile, coldKeys);
    cold.push(
      `Cold keys: ${P.coldKeys} seeded keys over ${P.accounts} accounts, each sent once (a fresh sidecar per run, so none is cached), node:http2 load generator, ${cm}:`,
      '',
      '| target | req/s | p50 ms | p99 ms | x floor | Redis commands per decision | sampled answers |',
      '|---|---:|---:|---:|---:|---|---|',
    );
    const coldSpec = { connections: P.connections, streams: P.streams, requests: P.coldKeys, templateFile: tplFile, keysFile, headers: ENVOY_HEADERS };
    const coldFloor = await loadgen({ ...coldSpec, port: floor.port });
    cold.push(`| ${floor.name} | ${coldFloor.rps.toFixed(0)} | ${ms(coldFloor.p50us)} | ${ms(coldFloor.p99us)} | 1.00 | – | ${fmtCounts(coldFloor.sampled)} |`);
    for (const d of defs.filter((x) => !x.reference && !x.lite)) {
      const t = await startTarget(d.name, d.kind, { ...env, ...d.env });
      try {
        const before = await commandCalls(db);
        const r = await loadgen({ ...coldSpec, port: t.port });
        const after = await commandCalls(db);
        const rt = roundTripsPerDecision(before, after, r.requests);
        if (r.errors || r.grpcStatus['0'] !== r.requests) throw new Error(`cold run ${d.name}: ${JSON.stringify(r)}`);
        cold.push(
          `| ${d.name} | ${r.rps.toFixed(0)} | ${ms(r.p50us)} | ${ms(r.p99us)} | ${(r.rps / coldFloor.rps).toFixed(2)} | ` +
            `${Object.entries(rt).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ') || '0'} | ${fmtCounts(r.sampled)} |`,
        );
      } finally {
        await t.stop();
      }
    }
    }

    // ---- memory
    const memory: string[] = [];
    if (!opt['skip-memory'] && !latencyOnly) memory.push(...(await memoryRun(db, s, env, tplFile, tmp)));

    // ---- other benches
    const extra: string[] = [];
    if (!opt['skip-extra'] && !latencyOnly) {
      const args = quick ? ['--quick'] : [];
      log('propagation bench');
      extra.push('### Revocation propagation (bench/propagation.ts)', '', await runExtra('propagation.ts', args), '');
      log('model-scan bench');
      extra.push('### Model scanner (bench/model-scan.ts)', '', await runExtra('model-scan.ts', args), '');
    }

    // ---- report
    const date = startedAt.toISOString();
    report.push(
      `# keygate benchmark ${quick ? '(quick: indicative only)' : ''}`,
      '',
      `- date: ${date}`,
      `- machine: ${hostname()}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
      `- Node ${process.version}, ${h2loadVersion()}, ${await redisVersion(db)}`,
      `- load average at start ${loadBefore}, at end ${loadAverage()}`,
      `- keygate default gRPC transport: ${loadConfigDefaults().grpcTransport} (KEYGATE_GRPC_TRANSPORT); memory and propagation use it`,
      `- command: \`npm run bench${process.argv.slice(2).length ? ' -- ' + process.argv.slice(2).join(' ') : ''}\``,
      '',
      '## Throughput (cases 1-3)',
      '',
      ...table,
      '',
      '## Latency at half the floor\'s peak (case 5)',
      '',
      ...latency,
      '',
      ...(cold.length ? ['## Cold keys (case 4)', '', ...cold, ''] : []),
      ...(memory.length ? ['## Resident memory', '', ...memory, ''] : []),
      ...(extra.length ? ['## Other benches', '', ...extra] : []),
      '## What was verified',
      '',
      'Before timing, one request per case and target was decoded (grpc-status and CheckResponse):',
      '',
      ...verify,
      '',
      'During timing: h2load counted every response as HTTP 200 (it does not read grpc-status); the node:http2',
      'load generator checked grpc-status 0 on every response and decoded every 997th.',
      '',
    );
    const md = report.join('\n');
    process.stdout.write(md + '\n');
    const out = opt.out ?? (quick ? join(HERE, 'tmp', 'quick-latest.md') : join(HERE, 'results' , `${date.slice(0, 16).replace(':', '')}.md`));
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, md + '\n');
    log(`report written to ${out}`);
  } finally {
    for (const t of targets) await t.stop();
    await destroyRedis(redis);
  }
}

function loadConfigDefaults() {
  return loadConfig({}, {});
}

function fmtCounts(c: Record<string, number>): string {
  return Object.entries(c).map(([k, v]) => `${k} ×${v}`).join(', ') || '–';
}

function h2loadVersion(): string {
  try {
    return `h2load ${execFileSync('h2load', ['--version'], { encoding: 'utf8' }).match(/nghttp2\/([\d.]+)/)?.[1] ?? '?'}`;
  } catch {
    return 'h2load ?';
  }
}

async function redisVersion(db: import('ioredis').Redis): Promise<string> {
  const info = await db.info('server');
  return `redis ${/redis_version:(\S+)/.exec(info)?.[1] ?? '?'}`;
}

async function memoryRun(db: import('ioredis').Redis, s: ReturnType<typeof schema>, env: Record<string, string>, tplFile: string, tmp: string): Promise<string[]> {
  const [small, large] = P.memCached as [number, number];
  log(`memory: seeding ${large} keys`);
  const keys = await seedKeys(db, s, { prefix: PREFIX, count: large, accounts: P.accounts, tag: 'mem' });
  const keysFile = join(tmp, 'mem-keys.txt');
  writeKeysFile(keysFile, keys);
  keys.length = 0;
  const out = [
    'RSS of the sidecar process (VmRSS from /proc) right after the load shown and after a full GC (what is retained), and its peak (VmHWM); ' +
      'default settings except the cache bound where noted.',
    '',
    '| state | RSS MiB | RSS after GC MiB | JS heap + external after GC MiB | peak RSS MiB | Redis commands per decision | sampled answers |',
    '|---|---:|---:|---:|---:|---|---|',
  ];
  const mib = (k: number) => (k / 1024).toFixed(0);
  const measure = async (t: Target) => {
    const before = t.memory();
    const usage = await t.gc();
    const after = t.memory();
    const heap = usage ? ((usage.heapUsed + usage.external) / 2 ** 20).toFixed(0) : '?';
    return `${mib(before.rssKiB)} | ${mib(after.rssKiB)} | ${heap} | ${mib(after.hwmKiB)}`;
  };
  const expectOnly = (r: LoadResult, verdict: string, what: string) => {
    const other = Object.keys(r.sampled).filter((k) => k !== verdict);
    if (r.errors || other.length) throw new Error(`memory run "${what}": expected only ${verdict}, got ${JSON.stringify(r.sampled)} errors=${r.errors}`);
  };
  const spec = { connections: P.connections, streams: P.streams, templateFile: tplFile, headers: ENVOY_HEADERS, sampleEvery: 4999 };
  // cached keys: a cache bound above the largest set, so every key stays cached
  const t = await startTarget('keygate', 'keygate', { ...env, KEYGATE_CACHE_MAX_ENTRIES: String(large + 100_000) }, ['--expose-gc']);
  try {
    out.push(`| idle, after start | ${await measure(t)} | – | – |`);
    let from = 0;
    for (const n of [small, large]) {
      log(`memory: ${n} distinct keys`);
      const before = await commandCalls(db);
      const r = await loadgen({ ...spec, port: t.port, requests: n - from, keysFile, keysFrom: from });
      const after = await commandCalls(db);
      from = n;
      expectOnly(r, 'allow', `${n} keys`);
      const rt = roundTripsPerDecision(before, after, r.requests);
      out.push(`| ${n.toLocaleString('en')} distinct valid keys sent (KEYGATE_CACHE_MAX_ENTRIES=${large + 100_000}) | ${await measure(t)} | ${fmtRt(rt)} | ${fmtCounts(r.sampled)} |`);
    }
  } finally {
    await t.stop();
  }
  // flood of unknown keys against default settings
  const f = await startTarget('keygate', 'keygate', env, ['--expose-gc']);
  try {
    out.push(`| idle, fresh sidecar, default settings | ${await measure(f)} | – | – |`);
    for (const n of [P.flood / 2, P.flood / 2]) {
      log(`memory: flood of ${n} random unknown keys`);
      const before = await commandCalls(db);
      const r = await loadgen({ ...spec, port: f.port, requests: n, randomKeysPrefix: PREFIX });
      const after = await commandCalls(db);
      expectOnly(r, 'deny:INVALID_API_KEY', 'flood');
      out.push(`| + ${n.toLocaleString('en')} random unknown well-formed keys | ${await measure(f)} | ${fmtRt(roundTripsPerDecision(before, after, r.requests))} | ${fmtCounts(r.sampled)} |`);
    }
  } finally {
    await f.stop();
  }
  return out;
}

function fmtRt(rt: Record<string, number>): string {
  return Object.entries(rt).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ') || '0';
}

async function profileRun(env: Record<string, string>, file: string, tmp: string): Promise<void> {
  const dir = join(tmp, 'prof');
  mkdirSync(dir, { recursive: true });
  const defs = targetDefs().filter((d) => !d.reference);
  for (const d of defs) {
    const t = await startTarget(d.name, d.kind, { ...env, ...d.env }, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
    const r = await runH2load({ port: t.port, bodyFile: file, connections: P.connections, streams: P.streams, durationSec: P.duration * 2, warmupSec: P.warmup, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS });
    await t.stop();
    const prof = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).map((f) => join(dir, f)).sort().at(-1)!;
    process.stdout.write(`\n## ${d.name}: ${r.rps.toFixed(0)} req/s under the profiler; ${prof}\n\n${summarizeProfile(readFileSync(prof, 'utf8'), 40)}\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
