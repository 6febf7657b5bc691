/**
 * `npm run bench` — keygate against the floor of its own gRPC stack, in one run on one machine.
 *
 * Starts its own redis-server, the sidecar (in a child process), the floor (a no-op ext_authz server
 * on @grpc/grpc-js) and the limit (a bare node:http2 handler answering a fixed gRPC OK after reading
 * the request), and OPA-Envoy on the same decision when OPA_ENVOY_BIN names its binary; seeds keys,
 * builds gRPC-framed Envoy CheckRequest bodies, and drives every target with h2load at 4 x 16 and
 * 1 x 1 streams: a JIT warm-up pass, then rounds, every run once per round (interleaved). Cases:
 *   1. valid key, cached                 2. malformed-checksum key; unknown well-formed key
 *   3. model-restricted key, 1 KiB / 64 KiB / 1 MiB bodies, `model` first and last
 *   4. cold keys (a different seeded key per request; Redis round trips per decision)
 *   5. latency at a fixed offered load of half the floor's peak (p50/p99/p99.9)
 * plus resident memory (100k and 1M keys cached; a flood of 1M random unknown keys), and the
 * propagation, model-scan and money (wallet, limits, usage counting, usage records/s) benches. Writes a markdown report under bench/results/.
 *
 *   npm run bench                  full run (about 15 minutes)
 *   npm run bench -- --preset round4 --baseline DIR
 *                                  every target of the fourth round (#39) in one table (bench/round4.ts)
 *   npm run bench -- --quick       smoke run (about 1 minute, small numbers, indicative only)
 *   npm run bench -- --profile     CPU profile of the sidecar under case 1 (bench/tmp/prof);
 *                                  --profile-case <id> for another case, --connections/--streams
 *   OPA_ENVOY_BIN=/path/to/opa npm run bench    adds OPA-Envoy (bench/opa/policy.rego)
 *   npm run bench -- --only hot,metering,rate,money,ab --sizes 64 --baseline DIR
 *                                  selected parts (hot, cold, memory, extra, metering, rate, money,
 *                                  events, ab), case 3 with the 64 KiB bodies only, and the A/B
 *                                  against the tree in DIR
 *   npm run bench -- --only events --rounds 3 --duration 2
 *                                  events beside the hot path (bench/events.ts): a cached Check of an
 *                                  account with webhooks, thresholds and undelivered events against
 *                                  one without, and usage bookings with thresholds against without
 *   npm run bench -- --tracing     adds the sidecar with OpenTelemetry tracing on (OTLP/HTTP to a sink
 *                                  on loopback, bench/lib/otlp-sink.ts) and case 1t, the valid key
 *                                  with a sampled `traceparent` (a span per Check), beside the default
 *   npm run bench -- --cases valid,valid-traced    only these throughput cases (ids as in --profile-case)
 *   --skip-cold, --skip-memory, --skip-extra       leave out case 4, the memory phase, the other benches
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, hostname, totalmem } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.ts';
import { DEFAULT_KEY_PREFIX, keyDigest } from '../src/core/key-format.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { startRedis } from './lib/redis.ts';
import { chatBody, decodeCheckResponse, encodeCheck, fastKeys, keyTemplate, malformedKey } from './lib/bodies.ts';
import { ensureH2load, runH2load, type H2loadResult } from './lib/h2load.ts';
import { runLoad, verdictOf, type LoadResult } from './lib/loadgen.ts';
import { loadAverage, loadgen, startTarget, type Target } from './lib/procs.ts';
import { commandCalls, roundTripsPerDecision, seedKeys, writeKeysFile } from './lib/seed.ts';
import { summarizeProfile } from './lib/profile.ts';
import { startOpaEnvoy } from './lib/opa.ts';
import { startOtlpSink, type OtlpSink } from './lib/otlp-sink.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');

// `--preset round4`: every target of the fourth performance round in one table (bench/round4.ts;
// the other arguments are its own: --baseline, --rounds, --duration, --quick, --out, --skip-ledger)
const presetAt = process.argv.findIndex((a) => a === '--preset' || a.startsWith('--preset='));
if (presetAt >= 0) {
  const arg = process.argv[presetAt]!;
  const preset = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : process.argv[presetAt + 1];
  if (preset !== 'round4') throw new Error(`--preset: ${preset} is not one of round4`);
  const pass = process.argv.slice(2).filter((_, i) => i + 2 !== presetAt && (arg.includes('=') || i + 2 !== presetAt + 1));
  const child = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', join(HERE, 'round4.ts'), ...pass], { stdio: 'inherit' });
  process.exit(child.status ?? 1);
}

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    /** With --profile: which case (id: valid, malformed, unknown, model-65536-first, …), default valid. */
    'profile-case': { type: 'string', default: 'valid' },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    'jit-warmup': { type: 'string' },
    /** A keygate tree from before the wallet work, for bench/money.ts's side-by-side baseline. */
    'money-baseline': { type: 'string' },
    connections: { type: 'string', default: '4' },
    streams: { type: 'string', default: '16' },
    'skip-memory': { type: 'boolean', default: false },
    'skip-extra': { type: 'boolean', default: false },
    'skip-cold': { type: 'boolean', default: false },
    'latency-only': { type: 'boolean', default: false },
    transports: { type: 'string' },
    /** Adds the sidecar with OpenTelemetry tracing on and the case with a sampled traceparent. */
    tracing: { type: 'boolean', default: false },
    /** Comma-separated case ids: only these throughput cases. */
    cases: { type: 'string' },
    out: { type: 'string' },
    /**
     * Which parts to run, comma-separated (default all): hot (cases 1-3 and 5, the targets table),
     * cold, memory, extra (propagation, model scan), metering (bench/ext-proc.ts), rate
     * (bench/rate.ts), money (bench/money.ts), events (bench/events.ts), ledger (bench/ledger-booking.ts), ab (bench/ab.ts against --baseline).
     */
    only: { type: 'string' },
    /** Body sizes of case 3, comma-separated KiB (default 1,64,1024). */
    sizes: { type: 'string' },
    /** Another keygate checkout (with its node_modules) for the `ab` part. */
    baseline: { type: 'string' },
  },
});
const GROUPS = ['hot', 'cold', 'memory', 'extra', 'metering', 'rate', 'money', 'events', 'ledger', 'ab'];
const only = opt.only ? opt.only.split(',').map((x) => x.trim()) : GROUPS;
for (const g of only) if (!GROUPS.includes(g)) throw new Error(`--only: ${g} is not one of ${GROUPS.join(', ')}`);
const has = (g: string) => only.includes(g);
const SIZES_KIB = (opt.sizes ?? '1,64,1024').split(',').map(Number);

const quick = opt.quick!;
const P = {
  rounds: Number(opt.rounds ?? (quick ? 1 : 3)),
  duration: Number(opt.duration ?? (quick ? 1 : 5)),
  warmup: quick ? 0.3 : 1,
  /** Seconds of the JIT warm-up pass (every run once before the measured rounds; 0 skips it). */
  jitWarmup: Number(opt['jit-warmup'] ?? (quick ? 0 : 1)),
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
}

/** Sidecar variants to compare (transport selectable by config); the floor and references always run. */
function targetDefs(): TargetDef[] {
  const transports = (opt.transports ?? 'h2').split(',').map((s) => s.trim()).filter(Boolean);
  const sidecars: TargetDef[] = transports.length
    ? transports.map((t) => ({ name: `keygate[${t}]`, kind: 'keygate', env: { KEYGATE_GRPC_TRANSPORT: t }, }))
    : [{ name: 'keygate', kind: 'keygate' }];
  return [
    { name: 'floor: grpc-js no-op', kind: 'noop-grpcjs', reference: true },
    { name: 'limit: node:http2 fixed OK', kind: 'noop-h2', reference: true },
    ...sidecars,
    ...(opt.tracing && otlpSink ? [{ name: 'keygate, tracing on', kind: 'keygate', env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlpSink.url, OTEL_METRICS_EXPORTER: 'none' } }] : []),
  ];
}

/** Where the tracing-on sidecar exports its spans (--tracing). */
let otlpSink: OtlpSink | undefined;

type Shape = readonly [connections: number, streams: number];

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

/**
 * Target rows the other bench scripts print (`TARGET| what | shape | figures | met`), moved from
 * their output into the report's one Targets table.
 */
const extraTargets: string[] = [];
function takeTargets(text: string): string {
  const keep: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('TARGET|')) extraTargets.push(`|${line.slice(7)}`);
    else keep.push(line);
  }
  return keep.join('\n');
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
      resolve(code === 0 ? takeTargets(out.trim()) : `_bench/${script} failed (exit ${code})_\n\n\`\`\`\n${(err || out).trim().slice(-1500)}\n\`\`\``);
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
    // A rate-limited key (docs/rate-limits.md): a rate no run reaches, so every answer is an allow
    // decided from its lease (one TAKE per lease), with per-request x-ratelimit-* headers.
    const [rated] = await seedKeys(db, s, { prefix: PREFIX, count: 1, accounts: 1, tag: 'rated' });
    await db.hset(s.keyRecord(keyDigest(rated!)), 'rate', '1000000000/d');
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
      { id: 'rated', label: '1r. rate-limited key, cached', file: file('rated', encodeCheck({ key: rated })), expect: 'allow', size: 'headers only' },
    ];
    if (opt.tracing) {
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      cases.push({ id: 'valid-traced', label: '1t. valid key, cached, sampled traceparent', file: file('valid-traced', encodeCheck({ key: valid, headers: { traceparent } })), expect: 'allow', size: 'headers only' });
    }
    const floorFiles: Record<string, string> = { 'headers only': cases[0]!.file };
    for (const [size, n] of ([['1 KiB', 1024], ['64 KiB', 64 * 1024], ['1 MiB', 1024 * 1024]] as const).filter(([, b]) => SIZES_KIB.includes(b / 1024))) {
      for (const where of ['first', 'last'] as const) {
        const f = file(`model-${n}-${where}`, encodeCheck({ key: restricted, body: chatBody(n, 'gpt-4o-mini', where) }));
        cases.push({ id: `model-${n}-${where}`, label: `3. restricted key, ${size}, model ${where}`, file: f, expect: 'allow', size });
        floorFiles[size] ??= f;
      }
    }

    if (opt.cases) {
      // Case 1 (the valid key) always runs: the latency phase and the references use it.
      const keep = new Set(['valid', ...opt.cases.split(',').map((x) => x.trim())]);
      const unknownIds = [...keep].filter((id) => !cases.some((c) => c.id === id));
      if (unknownIds.length) throw new Error(`--cases: unknown ${unknownIds.join(', ')}; one of ${cases.map((c) => c.id).join(', ')}`);
      cases.splice(0, cases.length, ...cases.filter((c) => keep.has(c.id)));
      for (const size of Object.keys(floorFiles)) if (size !== 'headers only' && !cases.some((c) => c.size === size)) delete floorFiles[size];
    }

    // ---- targets
    if (opt.tracing) otlpSink = await startOtlpSink();
    const defs = targetDefs();
    for (const d of defs) targets.push(await startTarget(d.name, d.kind, { ...env, ...d.env }));
    const floor = targets[0]!;
    const sidecars = targets.filter((_, i) => !defs[i]!.reference);
    const refs = targets.filter((_, i) => defs[i]!.reference);

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

    // ---- OPA-Envoy on the same decision, when a binary is given
    const opaBin = process.env.OPA_ENVOY_BIN;
    const opaCases = ['valid', 'malformed', 'unknown', 'model-1024-first', 'model-65536-first'];
    let opa: Target | undefined;
    if (opaBin) {
      const rec = (key: string, tag: string, models: string[] | null) => ({ digest: keyDigest(key), id: `key_${tag}${'0'.padStart(16, '0')}`, account: 'acct-bench-0', models });
      opa = await startOpaEnvoy(opaBin, [rec(valid!, 'valid', null), rec(restricted!, 'model', ['openai/gpt-4o-mini', 'anthropic/*'])], tmp, async (port) => {
        const got = await verifySample({ port } as Target, cases[0]!.file);
        return got === 'allow';
      });
      targets.push(opa);
      for (const c of cases.filter((y) => opaCases.includes(y.id))) {
        const got = await verifySample(opa, c.file);
        const ok = c.expect === 'allow' ? got === 'allow' : got.startsWith('deny');
        verify.push(`| ${c.label} | ${opa.name} | ${c.expect === 'allow' ? 'allow' : 'deny'} | ${got} |`);
        if (!ok) throw new Error(`${opa.name} answered ${got} to "${c.label}", expected ${c.expect}`);
      }
    }

    if (opt.profile) {
      const pc = cases.find((c) => c.id === opt['profile-case']);
      if (!pc) throw new Error(`--profile-case: one of ${cases.map((c) => c.id).join(', ')}`);
      await profileRun(env, pc.file, tmp);
      return;
    }

    const table: string[] = [];
    const latency: string[] = [];
    const goals: string[] = [];
    const tracing: string[] = [];
    const latencyOnly = opt['latency-only']!;
    const cm = `${P.connections} connections x ${P.streams} streams`;
    if (has('hot')) {
    // ---- throughput: a JIT warm-up pass, then rounds; every round drives every (shape, case, target)
    // once, in turn, the order reversed every other round; medians over the rounds
    const shapes: Shape[] = [[P.connections, P.streams], [1, 1]];
    const sh = ([c, m]: Shape) => `${c}x${m}`;
    const sizes = Object.keys(floorFiles);
    interface Run { key: string; t: Target; file: string; shape: Shape }
    const plan: Run[] = [];
    for (const shape of shapes) {
      for (const size of sizes) {
        for (const ref of refs) plan.push({ key: `${sh(shape)}|${ref.name}|${size}`, t: ref, file: floorFiles[size]!, shape });
        for (const c of cases.filter((x) => x.size === size)) {
          for (const t of sidecars) plan.push({ key: `${sh(shape)}|${t.name}|${c.id}`, t, file: c.file, shape });
          if (opa && opaCases.includes(c.id)) plan.push({ key: `${sh(shape)}|${opa.name}|${c.id}`, t: opa, file: c.file, shape });
        }
      }
    }
    const results = new Map<string, H2loadResult[]>();
    const rec = (k: string, r: H2loadResult) => results.set(k, [...(results.get(k) ?? []), r]);
    /** CPU µs the target spent per request in each run (robust to other load on the machine). */
    const cpu = new Map<H2loadResult, number>();
    const drive = async (t: Target, f: string, [c, m]: Shape, durationSec = P.duration) => {
      const c0 = t.cpuMs();
      const r = await runH2load({ port: t.port, bodyFile: f, connections: c, streams: m, durationSec, warmupSec: P.warmup, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS });
      cpu.set(r, ((t.cpuMs() - c0) * 1000) / Math.max(1, r.allRequests));
      return r;
    };
    const check = (name: string, r: H2loadResult) => {
      if (r.non2xx > 0 || r.succeeded < r.done) throw new Error(`${name}: ${r.non2xx} non-2xx, ${r.done - r.succeeded} failed of ${r.done}`);
    };
    for (let round = 0; round < P.rounds && latencyOnly; round++) {
      for (const shape of shapes) {
        const r = await drive(floor, cases[0]!.file, shape);
        check(floor.name, r);
        rec(`${sh(shape)}|${floor.name}|headers only`, r);
      }
    }
    if (!latencyOnly && P.jitWarmup > 0) {
      log(`JIT warm-up: every run once, ${P.jitWarmup}s each, not counted`);
      for (const run of plan) check(`warm-up ${run.key}`, await drive(run.t, run.file, run.shape, P.jitWarmup));
    }
    for (let round = 0; round < P.rounds && !latencyOnly; round++) {
      log(`round ${round + 1}/${P.rounds} (load ${loadAverage()})`);
      for (const run of round % 2 ? [...plan].reverse() : plan) {
        const r = await drive(run.t, run.file, run.shape);
        check(run.key, r);
        rec(run.key, r);
      }
    }
    const sum = (k: string) => {
      const rs = results.get(k) ?? [];
      return {
        rps: median(rs.map((r) => r.rps)),
        p50: median(rs.map((r) => r.p50us)),
        p99: median(rs.map((r) => r.p99us)),
        cpu: median(rs.map((r) => cpu.get(r) ?? NaN)),
        n: rs.length,
      };
    };
    const x = (a: number, b: number) => (Number.isFinite(a / b) ? (a / b).toFixed(2) : '–');
    const limit = refs.find((r) => r !== floor)!;
    /** A case's figures against the floor and the limit driven with a body of the same size in the same rounds. */
    const vs = (shape: Shape, name: string, id: string, size: string) => {
      const v = sum(`${sh(shape)}|${name}|${id}`);
      const f = sum(`${sh(shape)}|${floor.name}|${size}`);
      const l = sum(`${sh(shape)}|${limit.name}|${size}`);
      return { v, f, l, rpsFloor: v.rps / f.rps, rpsLimit: v.rps / l.rps, cpuFloor: f.cpu / v.cpu, cpuLimit: l.cpu / v.cpu };
    };

    table.push(
      `h2load, ${P.duration}s per run after ${P.warmup}s of warm-up inside the run, a JIT warm-up pass of every run (${P.jitWarmup}s each) before the measured rounds, ` +
        `median of ${P.rounds} interleaved round(s) (every run once per round, in reverse order every other round). ` +
        `"x floor" and "x limit": requests/s over those of the floor (grpc-js no-op) and of the limit (bare node:http2 fixed OK), each driven with a body of the same size in the same rounds. ` +
        `"CPU µs/req": CPU time of the target process per request (/proc, user + system, all its threads), and "(CPU)" the floor's or limit's CPU per request over the target's: ` +
        `the capacity ratio per core, much less sensitive to other load on the machine than requests/s.`,
    );
    for (const shape of shapes) {
      table.push(
        '',
        `### ${shape[0]} connection(s) x ${shape[1]} stream(s)${shape[0] === 1 && shape[1] === 1 ? ' (one request at a time)' : ''}`,
        '',
        '| case | target | req/s | p50 ms | p99 ms | x floor | x limit | CPU µs/req | x floor (CPU) | x limit (CPU) |',
        '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
      );
      for (const size of sizes) {
        for (const ref of refs) {
          const r = vs(shape, ref.name, size, size);
          if (Number.isNaN(r.v.rps)) continue;
          table.push(`| ${size} body | ${ref.name} | ${r.v.rps.toFixed(0)} | ${ms(r.v.p50)} | ${ms(r.v.p99)} | ${x(r.v.rps, r.f.rps)} | ${x(r.v.rps, r.l.rps)} | ${r.v.cpu.toFixed(0)} | ${x(r.f.cpu, r.v.cpu)} | ${x(r.l.cpu, r.v.cpu)} |`);
        }
        for (const c of cases.filter((y) => y.size === size)) {
          for (const t of [...sidecars, ...(opa && opaCases.includes(c.id) ? [opa] : [])]) {
            const r = vs(shape, t.name, c.id, size);
            table.push(`| ${c.label} | ${t.name} | ${r.v.rps.toFixed(0)} | ${ms(r.v.p50)} | ${ms(r.v.p99)} | **${x(r.v.rps, r.f.rps)}** | ${x(r.v.rps, r.l.rps)} | ${r.v.cpu.toFixed(0)} | **${x(r.f.cpu, r.v.cpu)}** | ${x(r.l.cpu, r.v.cpu)} |`);
          }
        }
      }
    }

    // ---- 5. latency at half the floor's peak
    const floorPeak = sum(`${sh(shapes[0]!)}|${floor.name}|headers only`).rps;
    const floorPeak1 = sum(`1x1|${floor.name}|headers only`).rps;
    const offered = Math.round(floorPeak / 2);
    const offered1 = Math.round(floorPeak1 / 2);
    log(`latency at ${offered} req/s (half the floor's ${floorPeak.toFixed(0)}) and ${offered1} req/s on one stream`);
    latency.push(
      `Latency at a fixed offered load of half the floor's peak, case 1, h2load --rps, ${P.duration * 2}s per run: ${offered} req/s (half of ${floorPeak.toFixed(0)}) ` +
        `on ${P.connections} connections, and ${offered1} req/s (half the floor's one-stream peak of ${floorPeak1.toFixed(0)}) on one connection with one stream. ` +
        `h2load paces each connection by sending its share in bursts on a timer, so with 16 streams per connection a burst queues behind itself; ` +
        `with one stream per connection the requests go one at a time per connection (closer to a decision's own latency):`,
      '',
      '| connections x streams | offered req/s | target | achieved req/s | p50 ms | p99 ms | p99.9 ms | max ms |',
      '|---|---:|---|---:|---:|---:|---:|---:|',
    );
    const paced: Record<string, H2loadResult> = {};
    for (const [c, m, rps] of [[P.connections, P.streams, offered], [P.connections, 1, offered], [1, 1, offered1]] as const) {
      for (const t of [floor, ...sidecars]) {
        const r = await runH2load({
          port: t.port, bodyFile: cases[0]!.file, connections: c, streams: m, durationSec: P.duration * 2,
          warmupSec: P.warmup, rps, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS,
        });
        check(`${t.name} paced`, r);
        paced[`${c}x${m}|${t.name}`] = r;
        latency.push(`| ${c} x ${m} | ${rps} | ${t.name} | ${r.rps.toFixed(0)} | ${ms(r.p50us)} | ${ms(r.p99us)} | ${ms(r.p999us)} | ${ms(r.maxus)} |`);
      }
    }

    // ---- the targets, met or missed (from the figures above)
    goals.length = 0;
    if (!latencyOnly) {
      const main = sidecars.find((t) => t.name === `keygate[${loadConfigDefaults().grpcTransport}]`) ?? sidecars.at(-1)!;
      goals.push(
        `For ${main.name} (the default transport). Each ratio is given by requests/s and by CPU per request (the steadier one on this shared machine); "met" needs both.`,
        '',
        '| target | shape | by req/s | by CPU/req | met |',
        '|---|---|---:|---:|---|',
      );
      const row = (what: string, shape: Shape, id: string, size: string, need: number, against: 'floor' | 'limit' = 'floor') => {
        if (!cases.some((c) => c.id === id)) return;
        const r = vs(shape, main.name, id, size);
        const a = against === 'floor' ? r.rpsFloor : r.rpsLimit;
        const b = against === 'floor' ? r.cpuFloor : r.cpuLimit;
        goals.push(`| ${what} | ${sh(shape)} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${a >= need && b >= need ? 'yes' : a >= need || b >= need ? 'partly' : 'no'} |`);
      };
      for (const shape of shapes) row('cached valid key ≥ 1.5x floor', shape, 'valid', 'headers only', 1.5);
      for (const shape of shapes) row('cached valid key: aim 0.8x limit', shape, 'valid', 'headers only', 0.8, 'limit');
      if (cases.some((c) => c.id === 'rated')) for (const shape of shapes) row('rate-limited cached key ≥ 1.2x floor', shape, 'rated', 'headers only', 1.2);
      for (const id of ['malformed', 'unknown'].filter((i) => cases.some((c) => c.id === i))) for (const shape of shapes) row(`deny (${cases.find((c) => c.id === id)!.label.replace(/^\S+ /, '')}) ≥ 1.2x floor`, shape, id, 'headers only', 1.2);
      for (const id of ['model-65536-first', 'model-65536-last'].filter((i) => cases.some((c) => c.id === i))) for (const shape of shapes) row(`${cases.find((c) => c.id === id)!.label.replace(/^\S+ /, '')} ≥ 1x floor`, shape, id, '64 KiB', 1);
      if (opa) {
        for (const shape of shapes) {
          const k = vs(shape, main.name, 'valid', 'headers only');
          const o = vs(shape, opa.name, 'valid', 'headers only');
          const a = k.v.rps / o.v.rps;
          const b = o.v.cpu / k.v.cpu;
          goals.push(`| ≥ 3x OPA-Envoy, cached valid key | ${sh(shape)} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${a >= 3 && b >= 3 ? 'yes' : a >= 3 || b >= 3 ? 'partly' : 'no'} |`);
        }
      } else {
        goals.push(`| ≥ 3x OPA-Envoy | – | – | – | not run here (no OPA_ENVOY_BIN) |`);
      }
      for (const [c, m] of [[P.connections, 1], [1, 1]] as const) {
        const r = paced[`${c}x${m}|${main.name}`];
        if (r) goals.push(`| p99 < 1 ms at half the floor's peak | ${c}x${m} paced | p99 ${ms(r.p99us)} ms | – | ${r.p99us < 1000 ? 'yes' : 'no'} |`);
      }
    }
    // ---- tracing: the default sidecar (tracing off) beside the one with tracing on, with and without a sampled traceparent
    const traced = sidecars.find((t) => t.name === 'keygate, tracing on');
    const plain = sidecars.find((t) => t !== traced && t.name.startsWith('keygate'));
    if (traced && plain && !latencyOnly) {
      tracing.push(
        `The default sidecar (no OTLP endpoint: no OpenTelemetry module loaded, no observer installed) and one with \`OTEL_EXPORTER_OTLP_ENDPOINT\` set (spans to a sink on loopback that answers every export 200), ` +
          `on case 1 (no traceparent: the span is skipped after one header lookup) and case 1t (a sampled traceparent: a span per Check, exported in batches). Same rounds as above; ` +
          `"CPU vs off" is the CPU per request over that of the default sidecar on case 1.`,
        '',
        '| shape | case | target | req/s | p50 ms | p99 ms | CPU µs/req | CPU vs off |',
        '|---|---|---|---:|---:|---:|---:|---:|',
      );
      for (const shape of shapes) {
        const base = sum(`${sh(shape)}|${plain.name}|valid`);
        for (const id of ['valid', 'valid-traced']) {
          for (const t of [plain, traced]) {
            const v = sum(`${sh(shape)}|${t.name}|${id}`);
            if (Number.isNaN(v.rps)) continue;
            tracing.push(`| ${sh(shape)} | ${cases.find((c) => c.id === id)!.label} | ${t.name} | ${v.rps.toFixed(0)} | ${ms(v.p50)} | ${ms(v.p99)} | ${v.cpu.toFixed(1)} | ${x(v.cpu, base.cpu)} |`);
          }
        }
      }
      tracing.push('', `Export requests received by the sink: ${otlpSink!.requests} (${(otlpSink!.bytes / 1024).toFixed(0)} KiB of OTLP protobuf).`);
    }

    if (latencyOnly) table.splice(0, table.length, `_Not run (--latency-only): only the floor's peaks were measured, ${P.rounds} run(s), for the offered loads below._`);

    }
    // ---- 4. cold keys
    const tpl = keyTemplate(PREFIX);
    const tplFile = join(tmp, 'template.bin');
    writeFileSync(tplFile, tpl.frame);
    writeFileSync(tplFile + '.json', JSON.stringify({ offset: tpl.offset, keyLength: tpl.keyLength }));
    const cold: string[] = [];
    if (!latencyOnly && has('cold') && !opt['skip-cold']) {
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
    for (const d of defs.filter((x) => !x.reference)) {
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
    if (!opt['skip-memory'] && !latencyOnly && has('memory')) memory.push(...(await memoryRun(db, s, env, tplFile, tmp)));

    // ---- other benches
    const extra: string[] = [];
    if (!opt['skip-extra'] && !latencyOnly) {
      const args = quick ? ['--quick'] : [];
      const timing = [...(opt.rounds ? ['--rounds', opt.rounds] : []), ...(opt.duration ? ['--duration', opt.duration] : [])];
      if (has('extra')) {
        log('propagation bench');
        extra.push('### Revocation propagation (bench/propagation.ts)', '', await runExtra('propagation.ts', args), '');
        log('model-scan bench');
        extra.push('### Model scanner (bench/model-scan.ts)', '', await runExtra('model-scan.ts', args), '');
      }
      if (has('metering')) {
        log('metering bench (ext_proc)');
        // with --baseline, the tree before runs beside this one in the same rounds
        const before = opt.baseline ? ['--baseline', opt.baseline] : [];
        extra.push('## Metering through ext_proc (bench/ext-proc.ts)', '', await runExtra('ext-proc.ts', [...args, ...timing, ...before]), '');
      }
      if (has('rate')) {
        log('rate-limit bench');
        // with the hot part, case 1r measures the rated key's cost: rate.ts adds the shared count
        const parts = has('hot') && cases.some((c) => c.id === 'rated') ? ['--parts', 'bound'] : [];
        extra.push('## Rate limits (bench/rate.ts)', '', await runExtra('rate.ts', [...args, ...timing, ...parts]), '');
      }
      if (has('money')) {
        log('money bench');
        const baseline = opt['money-baseline'] ? ['--baseline', opt['money-baseline']] : [];
        extra.push('## The money gate: wallet, limits and usage counting (bench/money.ts)', '', await runExtra('money.ts', [...args, ...timing, ...baseline]), '');
      }
      if (has('events')) {
        log('events bench');
        extra.push('## Events beside the hot path (bench/events.ts)', '', await runExtra('events.ts', [...args, ...timing]), '');
      }
      if (has('ledger')) {
        log('usage ledger bench');
        extra.push('## The usage ledger beside booking (bench/ledger-booking.ts)', '', await runExtra('ledger-booking.ts', [...args, ...timing]), '');
      }
      if (has('ab') && opt.baseline) {
        for (const [c, shape] of [['valid', '4x16'], ['valid', '1x1'], ['malformed', '4x16']] as const) {
          log(`A/B against the baseline tree: ${c} ${shape}`);
          const ab = await runExtra('ab.ts', ['--baseline', opt.baseline, '--case', c, '--shape', shape, '--rounds', String(quick ? 1 : P.rounds + 1), '--duration', String(Math.min(2, P.duration))]);
          extra.push(`### A/B: ${c} key, ${shape} (bench/ab.ts)`, '', ab.replace(/^# .*\n/, ''), '');
        }
      } else if (has('ab')) {
        extra.push('### A/B against a baseline tree', '', '_not run: give `--baseline DIR` (a checkout of the tree to compare with, with its node_modules)_', '');
      }
    }

    // ---- report
    const date = startedAt.toISOString();
    report.push(
      `# keygate benchmark ${quick ? '(quick: indicative only)' : ''}`,
      '',
      `- date: ${date}`,
      `- machine: ${hostname()}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
      `- Node ${process.version}, ${h2loadVersion()}, ${await redisVersion(db)}`,
      `- load average at start ${loadBefore}, at end ${loadAverage()} (2 cores shared with other work: compare within this run only)`,
      `- OPA-Envoy: ${opa ? `${process.env.OPA_ENVOY_BIN} with bench/opa/policy.rego (the same decision; data: the run's seeded keys)` : 'not run here (no OPA_ENVOY_BIN given; bench/opa/policy.rego is the same decision in Rego)'}`,
      `- keygate default gRPC transport: ${loadConfigDefaults().grpcTransport} (KEYGATE_GRPC_TRANSPORT); memory and propagation use it`,
      `- command: \`npm run bench${process.argv.slice(2).length ? ' -- ' + commandArgs().join(' ') : ''}\``,
      '',
      ...(goals.length || extraTargets.length
        ? ['## Targets', '', ...(goals.length ? goals : ['| target | shape | by req/s | by CPU/req | met |', '|---|---|---:|---:|---|']), ...extraTargets, '']
        : []),
      '## Throughput (cases 1-3)',
      '',
      ...table,
      '',
      ...(tracing.length ? ['## OpenTelemetry tracing off and on (--tracing)', '', ...tracing, ''] : []),
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
    await redis.stop();
    await otlpSink?.close();
  }
}

/** The command line for the report, another tree's directory written as <dir> (no machine paths in results). */
function commandArgs(): string[] {
  const a = process.argv.slice(2);
  return a.map((v, i) => (['--baseline', '--money-baseline', '--out'].includes(a[i - 1] ?? '') ? '<dir>' : v.replace(/^(--(?:money-)?baseline=).*/, '$1<dir>')));
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
    process.stdout.write(`\n## ${d.name}: ${r.rps.toFixed(0)} req/s under the profiler; ${basename(prof)}\n\n${summarizeProfile(readFileSync(prof, 'utf8'), 40)}\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
