/**
 * Every target of the fourth performance round (#39) in one run and one table:
 *
 *   npm run bench -- --preset round4 --baseline DIR [--rounds 3] [--duration 4] [--quick] [--out FILE]
 *   scripts/node bench/round4.ts --baseline DIR …                    (the same, directly)
 *   OPA_ENVOY_BIN=/path/to/opa …                                      adds OPA-Envoy beside keygate
 *
 * DIR is a checkout of the tree before the round's rules (`git worktree add ../keygate-before 462d0cc^`
 * with a symlink to this tree's node_modules, as for bench/ab.ts); without it the rows that need it
 * say "not run". One redis-server; every target in its own process: keygate (this tree), keygate
 * (the tree before), the grpc-js no-op Check floor, the bare node:http2 Check limit, the bare
 * node:http2 ext_proc limit (a prebuilt CONTINUE per message, nothing decoded beyond the framing),
 * and OPA-Envoy when its binary is given. h2load drives every run of the plan once per round (a JIT
 * warm-up pass first, the order reversed every other round); each figure is the median of the
 * rounds with its min and max, and each target's ratio is taken per round (the two sides of a
 * ratio ran in the same round) and given as median [min–max]; a spread ((max − min) / median)
 * above 15% is flagged. Both keygate sidecars run with a 5 s staleness bound (bench/ab.ts: a loaded
 * machine's late heartbeat drops the cache at the production 250 ms; the figures are the cached
 * path's). A metered keygate run (either tree) ends when its bookings have landed: driven at
 * saturation the booker's queue outgrows Redis's writes, and the bookings would otherwise land
 * during (and be charged to) the process's next run; its CPU and bookings/s include the drain.
 * Then bench/ledger-booking.ts (bookings with the ledger's sink on and off).
 * Writes the markdown report to bench/results/<date>-round4.md (--quick: bench/tmp/round4-quick.md).
 * About 8-9 minutes at the defaults on a quiet 2-core machine (25 runs of 4 s + 1 s each per round,
 * 3 rounds, the warm-up pass, the ledger part).
 */
import { spawn } from 'node:child_process';
import * as http2 from 'node:http2';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { KeyConsole } from '../src/console/service.ts';
import { DEFAULT_KEY_PREFIX, keyDigest } from '../src/core/key-format.ts';
import { pricesKey } from '../src/schema/prices.ts';
import { WalletField } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { chatBody, encodeCheck, malformedKey } from './lib/bodies.ts';
import { bookingsLanded, ENVOY_HEADERS, median, treeCommit } from './lib/common.ts';
import { exchangeBody, exchangeMessages, json2k, processStream, PROCESS_PATH, sse300, type ExchangeSpec } from './lib/ext-proc.ts';
import { ensureH2load, runH2load } from './lib/h2load.ts';
import { runLoad } from './lib/loadgen.ts';
import { startOpaEnvoy } from './lib/opa.ts';
import { loadAverage, startTarget, type Target } from './lib/procs.ts';
import { startRedis } from './lib/redis.ts';
import { seedConsoleKey, seedKeys } from './lib/seed.ts';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    'jit-warmup': { type: 'string' },
    baseline: { type: 'string' },
    'staleness-bound': { type: 'string', default: '5000' },
    'skip-ledger': { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});
const quick = opt.quick!;
const ROUNDS = Number(opt.rounds ?? (quick ? 1 : 3));
const DURATION = Number(opt.duration ?? (quick ? 1 : 4));
const WARMUP = quick ? 0.3 : 1;
const JIT = Number(opt['jit-warmup'] ?? (quick ? 0.5 : 1));
const SPREAD = 0.15;
const HERE = import.meta.dirname;
const ROOT = resolve(HERE, '..');
const log = (m: string) => process.stderr.write(`bench/round4: ${m}\n`);

type Shape = '4x16' | '1x1';
interface Run {
  readonly key: string;
  readonly t: Target;
  readonly file: string;
  readonly shape: Shape;
  readonly path?: string;
}
interface Figure {
  readonly rps: number;
  readonly cpu: number;
}

async function verdict(t: Target, file: string): Promise<string> {
  const r = await runLoad({ port: t.port, connections: 1, streams: 1, requests: 1, bodyFile: file, sampleEvery: 1, headers: ENVOY_HEADERS });
  if (r.errors > 0) return `error:${r.firstError}`;
  const gs = Object.keys(r.grpcStatus)[0];
  if (gs !== '0') return `grpc-status:${gs}`;
  return Object.keys(r.sampled)[0] ?? 'no-body';
}

/** One metered exchange on a fresh connection: every message answered and OK at the end. */
async function meters(t: Target, x: ExchangeSpec): Promise<boolean> {
  const session = http2.connect(`http://127.0.0.1:${t.port}`);
  try {
    const msgs = exchangeMessages(x);
    const r = await processStream(session, msgs).done;
    return r.grpcStatus === '0' && r.answers === msgs.length;
  } catch {
    return false;
  } finally {
    session.close();
  }
}

const fmt = (v: number, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : '–');
const stats = (xs: readonly number[]) => {
  const m = median(xs);
  const [lo, hi] = [Math.min(...xs), Math.max(...xs)];
  return { m, lo, hi, spread: xs.length > 1 && m !== 0 ? (hi - lo) / Math.abs(m) : 0 };
};
/** `median [min–max]`, flagged when the spread exceeds 15%. */
const mmm = (xs: readonly number[], d = 2) => {
  if (xs.length === 0 || xs.some((x) => !Number.isFinite(x))) return '–';
  const s = stats(xs);
  return `${s.m.toFixed(d)} [${s.lo.toFixed(d)}–${s.hi.toFixed(d)}]${s.spread > SPREAD ? ` ⚠ spread ${(s.spread * 100).toFixed(0)}%` : ''}`;
};

async function main(): Promise<void> {
  ensureH2load();
  const tmp = join(HERE, 'tmp', `round4-${process.pid}`);
  mkdirSync(tmp, { recursive: true });
  const startedAt = new Date();
  const loadStart = loadAverage();
  log(`load average ${loadStart}; ${ROUNDS} round(s) of ${DURATION}s per run${quick ? ' (quick: indicative only)' : ''}`);
  const redis = await startRedis();
  const db = redis.client();
  const s = schema();
  const kc = new KeyConsole({ redis: db });
  const targets: Target[] = [];
  const notes: string[] = [];
  try {
    // ---- keys, prices and bodies
    const [valid] = await seedKeys(db, s, { prefix: DEFAULT_KEY_PREFIX, count: 1, accounts: 1, tag: 'valid' });
    const [restricted] = await seedKeys(db, s, { prefix: DEFAULT_KEY_PREFIX, count: 1, accounts: 1, tag: 'model', models: ['gpt-4o-mini', 'anthropic/*'] });
    const meter = await seedConsoleKey(db, s, 'meter');
    await kc.creditAccount(meter.account, 1_000_000_000_000, 'bench');
    // only the wildcard in the operator's table: a tree with the price catalog resolves the
    // response's model by the catalog's name rules (step 2 comes before the wildcard), the tree before takes `*`
    await db.hset(pricesKey(s.ns), '*', JSON.stringify({ input: 1_000_000, output: 1_000_000 }));
    const file = (name: string, b: Buffer) => {
      const p = join(tmp, `${name}.bin`);
      writeFileSync(p, b);
      return p;
    };
    const f = {
      valid: file('valid', encodeCheck({ key: valid })),
      malformed: file('malformed', encodeCheck({ key: malformedKey(valid!) })),
      // a valid key on a path no catalog row opens: the endpoint rule's deny
      endpoint: file('endpoint', encodeCheck({ key: valid, path: '/v1/not-an-endpoint' })),
      body64: file('body64', encodeCheck({ key: restricted, body: chatBody(64 * 1024, 'gpt-4o-mini', 'first') })),
      // the shipped envoy.yaml sends the body to the Check: the valid key with a 1 KiB chat body
      chat1k: file('chat1k', encodeCheck({ key: valid, body: chatBody(1024, 'gpt-4o-mini', 'first') })),
    };
    const identity = { keyId: meter.id, accountId: meter.account, model: 'gpt-4o-mini' };
    const json = json2k();
    const xJson: ExchangeSpec = { identity: { ...identity, model: String(JSON.parse(json.toString()).model) }, contentType: 'application/json', chunks: [json] };
    const xSse: ExchangeSpec = { identity, contentType: 'text/event-stream', chunks: sse300() };
    const sseMessages = exchangeMessages(xSse).length;
    const mf = { json: file('json', exchangeBody(xJson)), sse: file('sse', exchangeBody(xSse)) };

    // ---- targets
    const env = { REDIS_URL: redis.url };
    const kgEnv = { ...env, KEYGATE_GRPC_TRANSPORT: 'h2', KEYGATE_STALENESS_BOUND_MS: opt['staleness-bound']! };
    const start = async (name: string, kind: string, e: Record<string, string>, script?: string) => {
      const t = await startTarget(name, kind, e, [], script);
      targets.push(t);
      return t;
    };
    const kg = await start('keygate', 'keygate', kgEnv);
    const before = opt.baseline ? await start('keygate, tree before', 'keygate', kgEnv, join(resolve(opt.baseline), 'bench/lib/target.ts')) : null;
    const floor = await start('floor: grpc-js no-op Check', 'noop-grpcjs', env);
    const limit = await start('limit: node:http2 fixed OK', 'noop-h2', env);
    const xlimit = await start('ext_proc limit: node:http2 prebuilt CONTINUE', 'noop-extproc-h2', env);
    let opa: Target | null = null;
    if (process.env.OPA_ENVOY_BIN) {
      const rec = (key: string, tag: string, models: string[] | null) => ({ digest: keyDigest(key), id: `key_${tag}${'0'.padStart(16, '0')}`, account: 'acct-bench-0', models });
      opa = await startOpaEnvoy(process.env.OPA_ENVOY_BIN, [rec(valid!, 'valid', null), rec(restricted!, 'model', ['openai/gpt-4o-mini', 'anthropic/*'])], tmp, async (port) => (await verdict({ port } as Target, f.valid)) === 'allow');
      targets.push(opa);
    }

    // ---- what is measured answers as expected
    const verified: string[] = [];
    const expect = async (t: Target, file: string, what: string, ok: (v: string) => boolean) => {
      const v = await verdict(t, file);
      verified.push(`| ${t.name} | ${what} | ${v} |`);
      if (!ok(v)) throw new Error(`${t.name} answered ${v} to ${what}`);
    };
    await expect(kg, f.valid, 'cached valid key', (v) => v === 'allow');
    await expect(kg, f.malformed, 'malformed key', (v) => v.startsWith('deny'));
    await expect(kg, f.endpoint, 'valid key, an endpoint no row opens', (v) => v.startsWith('deny') && v !== 'deny:INVALID_API_KEY');
    await expect(kg, f.body64, 'restricted key, 64 KiB body', (v) => v === 'allow');
    for (const t of [floor, limit]) await expect(t, f.valid, 'any Check', (v) => v === 'allow');
    await expect(kg, f.chat1k, 'cached valid key, 1 KiB chat body', (v) => v === 'allow');
    if (before) await expect(before, f.valid, 'cached valid key', (v) => v === 'allow');
    if (before) await expect(before, f.chat1k, 'cached valid key, 1 KiB chat body', (v) => v === 'allow');
    if (opa) await expect(opa, f.valid, 'cached valid key', (v) => v === 'allow');
    for (const [t, x, what] of [[kg, xJson, 'metered 2 KiB JSON'], [kg, xSse, 'metered 300 SSE events'], [xlimit, xSse, '300 SSE events']] as const) {
      const ok = await meters(t, x);
      verified.push(`| ${t.name} | ${what} | ${ok ? 'every message answered, grpc-status 0' : 'FAILED'} |`);
      if (!ok) throw new Error(`${t.name}: ${what} not answered`);
    }
    const beforeMeters = before ? await meters(before, xJson) : false;
    if (before) verified.push(`| ${before.name} | metered 2 KiB JSON | ${beforeMeters ? 'every message answered, grpc-status 0' : 'not answered: the bookings row is not run'} |`);

    // ---- the plan: every run once per round
    const plan: Run[] = [];
    for (const shape of ['4x16', '1x1'] as const) {
      plan.push(
        { key: `${shape}|kg|valid`, t: kg, file: f.valid, shape },
        { key: `${shape}|kg|malformed`, t: kg, file: f.malformed, shape },
        { key: `${shape}|kg|endpoint`, t: kg, file: f.endpoint, shape },
        { key: `${shape}|kg|body64`, t: kg, file: f.body64, shape },
        { key: `${shape}|floor|valid`, t: floor, file: f.valid, shape },
        { key: `${shape}|floor|body64`, t: floor, file: f.body64, shape },
        { key: `${shape}|limit|valid`, t: limit, file: f.valid, shape },
      );
      if (before) plan.push({ key: `${shape}|before|valid`, t: before, file: f.valid, shape }, { key: `${shape}|kg|chat1k`, t: kg, file: f.chat1k, shape }, { key: `${shape}|before|chat1k`, t: before, file: f.chat1k, shape });
      if (opa) plan.push({ key: `${shape}|opa|valid`, t: opa, file: f.valid, shape });
    }
    plan.push(
      { key: '4x16|kg|json', t: kg, file: mf.json, shape: '4x16', path: PROCESS_PATH },
      { key: '4x16|kg|sse', t: kg, file: mf.sse, shape: '4x16', path: PROCESS_PATH },
      { key: '4x16|xlimit|json', t: xlimit, file: mf.json, shape: '4x16', path: PROCESS_PATH },
      { key: '4x16|xlimit|sse', t: xlimit, file: mf.sse, shape: '4x16', path: PROCESS_PATH },
    );
    if (before && beforeMeters) plan.push({ key: '4x16|before|json', t: before, file: mf.json, shape: '4x16', path: PROCESS_PATH });

    const figures = new Map<string, Figure[]>();
    /** Drain seconds of each metered keygate run (the bookings written after h2load stopped). */
    const drains = new Map<string, number[]>();
    const balance = async () => Number((await db.hget(s.wallet(meter.account), WalletField.balance)) ?? 0);
    /**
     * A sidecar books a metered stream after it ended, in batches (the booker): driven at
     * saturation, its queue grows faster than Redis writes it, and the bookings of a run land
     * during the seconds after it (measured: a third of a 2 KiB JSON run's bookings), charged to
     * whatever run of that process came next. So a metered keygate run ends when its bookings
     * have landed (the wallet unchanged for 750 ms, three booker intervals), and its CPU and its
     * bookings/s include that drain.
     */
    const drained = () => bookingsLanded(balance);
    const drive = async (run: Run, sec: number): Promise<Figure> => {
      const [c, m] = run.shape.split('x').map(Number) as [number, number];
      const c0 = run.t.cpuMs();
      const r = await runH2load({ port: run.t.port, path: run.path, bodyFile: run.file, connections: c, streams: m, durationSec: sec, warmupSec: WARMUP, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS });
      if (r.non2xx > 0 || r.succeeded < r.done) throw new Error(`${run.key}: ${r.non2xx} non-2xx, ${r.done - r.succeeded} failed of ${r.done}`);
      if (run.path === PROCESS_PATH && (run.t === kg || run.t === before)) {
        const d = await drained();
        drains.set(run.key, [...(drains.get(run.key) ?? []), d]);
        // streams (bookings) per second over the run and its drain
        return { rps: r.allRequests / (sec + WARMUP + d), cpu: ((run.t.cpuMs() - c0) * 1000) / Math.max(1, r.allRequests) };
      }
      return { rps: r.rps, cpu: ((run.t.cpuMs() - c0) * 1000) / Math.max(1, r.allRequests) };
    };
    if (JIT > 0) {
      log(`JIT warm-up: ${plan.length} runs of ${JIT}s, not counted`);
      for (const run of plan) await drive(run, JIT);
    }
    const loads: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      loads.push(loadAverage());
      log(`round ${round + 1}/${ROUNDS} (load ${loads.at(-1)})`);
      for (const run of round % 2 ? [...plan].reverse() : plan) figures.set(run.key, [...(figures.get(run.key) ?? []), await drive(run, DURATION)]);
    }

    // ---- the ledger part (its own process: PostgreSQL and a redis-server of its own)
    let ledger: { ratios: number[]; text: string } | null = null;
    if (!opt['skip-ledger']) {
      log('bookings with the ledger sink on and off (bench/ledger-booking.ts)');
      ledger = await ledgerPart();
    }

    // ---- the table
    const fig = (k: string) => figures.get(k) ?? [];
    /** Per-round ratios of two runs' figures. */
    const per = (a: string, b: string, g: (x: Figure, y: Figure) => number) => {
      const [xs, ys] = [fig(a), fig(b)];
      return xs.length && ys.length === xs.length ? xs.map((x, i) => g(x, ys[i]!)) : [];
    };
    const cpuOver = (a: string, b: string) => per(a, b, (x, y) => x.cpu / y.cpu);
    const rows: string[] = [
      '| target | shape | measured | ratio: median [min–max] | need | met |',
      '|---|---|---|---:|---|---|',
    ];
    const row = (what: string, shape: string, measured: string, ratios: number[], need: string, ok: ((m: number) => boolean) | null, missing = 'not run') => {
      if (ratios.length === 0) return void rows.push(`| ${what} | ${shape} | ${measured} | – | ${need} | ${missing} |`);
      const st = stats(ratios);
      const met = ok === null ? '(reference)' : ok(st.m) ? 'met' : 'missed';
      rows.push(`| ${what} | ${shape} | ${measured} | ${mmm(ratios)} | ${need} | ${met}${ok !== null && st.spread > SPREAD ? ' (spread over 15%)' : ''} |`);
    };
    for (const shape of ['4x16', '1x1'] as const) {
      row('The new rules cost the cached Check at most 3%: CPU per request, this tree / the tree before', shape, 'CPU µs/req', cpuOver(`${shape}|kg|valid`, `${shape}|before|valid`), '≤ 1.03', (m) => m <= 1.03, 'not run (no --baseline)');
      row('… the same by requests/s, this tree / the tree before', shape, 'req/s', per(`${shape}|kg|valid`, `${shape}|before|valid`, (x, y) => x.rps / y.rps), '≥ 0.97', (m) => m >= 0.97, 'not run (no --baseline)');
    }
    for (const shape of ['4x16', '1x1'] as const) row('(for reference) the same with a 1 KiB chat body (as the shipped envoy.yaml sends it): CPU per request, this tree / the tree before', shape, 'CPU µs/req', cpuOver(`${shape}|kg|chat1k`, `${shape}|before|chat1k`), '–', null, 'not run (no --baseline)');
    for (const shape of ['4x16', '1x1'] as const) row("An endpoint rule's deny at most a malformed key's deny: CPU per request, endpoint deny / malformed", shape, 'CPU µs/req', cpuOver(`${shape}|kg|endpoint`, `${shape}|kg|malformed`), '≤ 1.00', (m) => m <= 1);
    row('Metered 300-event SSE stream at least 0.7x the ext_proc limit: limit CPU / keygate CPU per stream', '4x16', 'CPU µs/stream', cpuOver('4x16|xlimit|sse', '4x16|kg|sse'), '≥ 0.70', (m) => m >= 0.7);
    row('Metered 2 KiB JSON response at most 1.5x a cached Check: CPU per stream / per Check', '4x16', 'CPU µs', cpuOver('4x16|kg|json', '4x16|kg|valid'), '≤ 1.50', (m) => m <= 1.5);
    row('(for reference) metered 2 KiB JSON against the ext_proc limit: limit CPU / keygate CPU', '4x16', 'CPU µs/stream', cpuOver('4x16|xlimit|json', '4x16|kg|json'), '–', null);
    for (const shape of ['1x1', '4x16'] as const) row('Cached valid key at least 0.8x the node:http2 limit: limit CPU / keygate CPU', shape, 'CPU µs/req', cpuOver(`${shape}|limit|valid`, `${shape}|kg|valid`), shape === '1x1' ? '≥ 0.80' : '– (target at 1x1)', shape === '1x1' ? (m) => m >= 0.8 : null);
    for (const shape of ['4x16', '1x1'] as const) row('Restricted key, 64 KiB body, at least 1x the grpc-js floor: floor CPU / keygate CPU (same body)', shape, 'CPU µs/req', cpuOver(`${shape}|floor|body64`, `${shape}|kg|body64`), '≥ 1.00', (m) => m >= 1);
    row("Bookings with the catalog's name resolution and price classes at least 0.95x the tree before: metered 2 KiB JSON streams (one booking each), before CPU / this CPU", '4x16', 'CPU µs/booking', cpuOver('4x16|before|json', '4x16|kg|json'), '≥ 0.95', (m) => m >= 0.95, before ? 'not run (the tree before did not meter the stream)' : 'not run (no --baseline)');
    row('… the same by bookings/s (streams/s at saturation), this / before', '4x16', 'streams/s', per('4x16|kg|json', '4x16|before|json', (x, y) => x.rps / y.rps), '≥ 0.95', (m) => m >= 0.95, before ? 'not run (the tree before did not meter the stream)' : 'not run (no --baseline)');
    row('Bookings with the ledger sink on within 10% of off: bookings/s on / off (bench/ledger-booking.ts)', '4 clients x 250', 'bookings/s', ledger?.ratios ?? [], '≥ 0.90', (m) => m >= 0.9, opt['skip-ledger'] ? 'not run (--skip-ledger)' : 'failed (see below)');
    for (const shape of ['4x16', '1x1'] as const) row('(for reference) keygate against OPA-Envoy, cached valid key: OPA CPU / keygate CPU', shape, 'CPU µs/req', cpuOver(`${shape}|opa|valid`, `${shape}|kg|valid`), '– (≥ 3 in earlier rounds)', null, 'not run (no OPA_ENVOY_BIN)');

    // ---- every figure
    const detail: string[] = ['| run | shape | target | req/s (or streams/s): median [min–max] | CPU µs per request (or stream): median [min–max] |', '|---|---|---|---:|---:|'];
    const names: Record<string, string> = { kg: kg.name, before: before?.name ?? '', floor: floor.name, limit: limit.name, xlimit: xlimit.name, opa: opa?.name ?? '' };
    const caseNames: Record<string, string> = { valid: 'cached valid key (headers only)', malformed: 'malformed key', endpoint: "valid key, endpoint rule's deny", body64: 'restricted key, 64 KiB body', chat1k: 'cached valid key, 1 KiB chat body', json: 'metered 2 KiB JSON response', sse: 'metered 300-event SSE stream' };
    for (const [k, xs] of figures) {
      const [shape, t, c] = k.split('|') as [string, string, string];
      detail.push(`| ${caseNames[c]} | ${shape} | ${names[t]} | ${mmm(xs.map((x) => x.rps), 0)} | ${mmm(xs.map((x) => x.cpu), 1)} |`);
    }
    const sseCpu = stats(fig('4x16|kg|sse').map((x) => x.cpu)).m;
    const sseLimit = stats(fig('4x16|xlimit|sse').map((x) => x.cpu)).m;
    notes.push(
      `- Each metered keygate run ends when its bookings have landed (the account's wallet unchanged for 750 ms); its CPU per stream and its streams (bookings) per second include that drain: ${[...drains].map(([k, d]) => `${k.split('|').slice(1).join(' ')} ${fmt(median(d), 1)} s [${fmt(Math.min(...d), 1)}–${fmt(Math.max(...d), 1)}]`).join(', ') || 'none measured'}.`,
      `- Per message of the SSE stream (${sseMessages} messages: request headers, response headers, ${sseMessages - 2} body chunks): keygate ${fmt(sseCpu / sseMessages, 2)} µs, the ext_proc limit ${fmt(sseLimit / sseMessages, 2)} µs.`,
    );

    const md = [
      `# keygate, fourth performance round (#39): every target in one table${quick ? ' (quick: indicative only)' : ''}`,
      '',
      `- date: ${startedAt.toISOString()}; machine: ${hostname()}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}; Node ${process.version}`,
      `- load average at start ${loadStart}, at each round's start ${loads.join(' / ')}, at end ${loadAverage()}`,
      `- this tree: ${treeCommit(ROOT)}; the tree before: ${opt.baseline ? treeCommit(resolve(opt.baseline)) : 'not given'}; OPA-Envoy: ${opa ? 'run (bench/opa/policy.rego)' : 'not run (no OPA_ENVOY_BIN)'}`,
      `- command: \`npm run bench -- --preset round4${commandArgs()}\`; ${ROUNDS} interleaved round(s) of ${DURATION} s per run after ${WARMUP} s inside the run, a JIT warm-up pass of ${JIT} s per run; keygate's staleness bound ${opt['staleness-bound']} ms`,
      '',
      '## Targets',
      '',
      `Each ratio is taken per round (its two sides ran in the same round) and given as the median over the rounds with the min and max; ⚠ marks a spread ((max − min) / median) over 15%. "met" judges the median.`,
      '',
      ...rows,
      '',
      ...notes,
      '',
      '## Every figure',
      '',
      ...detail,
      '',
      ...(ledger ? ['## Bookings with the ledger sink (bench/ledger-booking.ts)', '', ledger.text, ''] : []),
      '## What was verified before timing',
      '',
      '| target | case | answer |',
      '|---|---|---|',
      ...verified,
      '',
      'During timing every h2load run had to be all HTTP 200.',
      '',
    ].join('\n');
    process.stdout.write(md);
    const out = opt.out ?? (quick ? join(HERE, 'tmp', 'round4-quick.md') : join(HERE, 'results', `${startedAt.toISOString().slice(0, 16).replace(':', '')}-round4.md`));
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, md);
    log(`report written to ${out}`);
  } finally {
    for (const t of targets) await t.stop();
    await kc.close().catch(() => {});
    await redis.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** bench/ledger-booking.ts in its own process: its report and the per-round ratios with / without. */
async function ledgerPart(): Promise<{ ratios: number[]; text: string } | null> {
  const args = ['--rounds', String(ROUNDS), '--duration', String(quick ? 1 : Math.min(DURATION, 3))];
  return new Promise((done) => {
    const p = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', join(HERE, 'ledger-booking.ts'), ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT });
    let out = '';
    let err = '';
    p.stdout.on('data', (c) => (out += c));
    p.stderr.on('data', (c) => (err += c));
    p.on('exit', (code) => {
      const m = /per round \(with \/ without\): ([\d., ]+)/.exec(out);
      if (code !== 0 || !m) {
        log(`ledger part failed (exit ${code}): ${(err || out).trim().slice(-500)}`);
        return done(null);
      }
      done({ ratios: m[1]!.split(',').map((x) => Number(x.trim())), text: out.replace(/^# .*\n/, '').trim() });
    });
  });
}

/** The command's arguments, another tree's directory written as <dir> (no machine paths in results). */
function commandArgs(): string {
  const a = process.argv.slice(2);
  const shown = a.map((v, i) => (['--baseline', '--out'].includes(a[i - 1] ?? '') ? '<dir>' : v.replace(/^(--(?:baseline|out)=).*/, '$1<dir>')));
  return shown.length ? ` ${shown.join(' ')}` : '';
}

main().catch((e) => {
  process.stderr.write(`bench/round4: ${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
