/**
 * Metering through the sidecar's ext_proc service, driven as Envoy drives it (also run by
 * `npm run bench`):
 *
 *   scripts/node bench/ext-proc.ts [--quick] [--rounds N] [--duration S] [--parts throughput,streams,overshoot] [--baseline DIR] [--cycles N] [--parts profile --profile-case sse|json]
 *
 * 1. throughput: h2load sends each ext_proc stream as one HTTP/2 POST to
 *    `envoy.service.ext_proc.v3.ExternalProcessor/Process` whose body is the stream's framed
 *    ProcessingRequests (request headers with the ext_authz metadata, response headers, the body
 *    chunks, end_of_stream on the last); the server answers each message as it arrives. Cases: a
 *    2 KiB JSON chat completion (one body message) and a streamed one of 300 SSE events (301 body
 *    messages: the events and `[DONE]`), each answered and in `observability_mode` (no answers), against the floor for this
 *    protocol (a no-op Process on @grpc/grpc-js answering every message) and, on the same sidecar in
 *    the same rounds, a cached Check. Every stream is metered and booked (a credited wallet, a
 *    price for every model; no x-request-id, so the sidecar makes an id per stream and none is a
 *    duplicate). CPU µs of the target per stream.
 * 2. streams: memory with 1,000 metered streams held open at once (headers and 10 events each, no
 *    end), after a full GC, then all cancelled, `--cycles` times (8) on new connections each time:
 *    per-stream cost, and RSS after closing from the middle cycle to the last (V8 grows its committed
 *    heap and the allocator keeps freed pages over the first cycles; a leak grows every cycle).
 * 3. overshoot: a key one micro-unit below its spend limit, 16 Checks allowed at once, then 16
 *    streamed answers metered at once; what is spent past the limit, and the 17th Check.
 * 4. profile (only when asked: `--parts profile`): the sidecar under `node --cpu-prof` while h2load
 *    drives the 300-event stream (or, with `--profile-case json`, the 2 KiB JSON one); self time by
 *    function and inclusive time by area.
 * A metered keygate run ends when its bookings have landed (the key's spend still for 750 ms), and
 * its CPU per stream includes that drain.
 * With `--baseline DIR` (another keygate checkout with its node_modules), the throughput part also
 * runs that tree's sidecar in the same rounds, interleaved (a before/after of a change).
 * Prints markdown.
 */
import * as http2 from 'node:http2';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KeyConsole } from '../src/console/service.ts';
import { pricesKey } from '../src/schema/prices.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { CHECK_PATH, decodeCheckResponse, encodeCheck } from './lib/bodies.ts';
import { exchangeBody, exchangeMessages, json2k, processStream, PROCESS_PATH, sse300, type ExchangeSpec } from './lib/ext-proc.ts';
import { ensureH2load, runH2load, type H2loadResult } from './lib/h2load.ts';
import { verdictOf } from './lib/loadgen.ts';
import { loadAverage, startTarget, type Target } from './lib/procs.ts';
import { startRedis } from './lib/redis.ts';
import { bookingsLanded, ENVOY_HEADERS, median } from './lib/common.ts';
import { seedConsoleKey } from './lib/seed.ts';
import { summarizeProfile } from './lib/profile.ts';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    parts: { type: 'string', default: 'throughput,streams,overshoot' },
    connections: { type: 'string', default: '4' },
    streams: { type: 'string', default: '16' },
    /** Another keygate tree: its sidecar runs beside this one in the throughput rounds. */
    baseline: { type: 'string' },
    /** Open/cancel cycles of the held-streams part. */
    cycles: { type: 'string' },
    /** The stream the profile part drives: sse (300 events) or json (2 KiB). */
    'profile-case': { type: 'string', default: 'sse' },
  },
});
const quick = opt.quick!;
const ROUNDS = Number(opt.rounds ?? (quick ? 1 : 3));
const DURATION = Number(opt.duration ?? (quick ? 1 : 4));
const WARMUP = quick ? 0.3 : 1;
const PARTS = new Set(opt.parts!.split(','));
const [C, M] = [Number(opt.connections), Number(opt.streams)];
const OPEN = quick ? 200 : 1000;
const CYCLES = Math.max(3, Number(opt.cycles ?? (quick ? 3 : 8)));
/** Price of every model: 1 currency unit (10^6 µ) per million input and output tokens (the stream's 29 tokens: 29 µ). */
const PRICE = { input: 1_000_000, output: 1_000_000 };
/** Tokens of the recorded chat completion (openai-chat.json's usage). */
const JSON_TOKENS = (() => {
  const u = JSON.parse(json2k().toString()).usage;
  return u.prompt_tokens + u.completion_tokens;
})();
const log = (m: string) => process.stderr.write(`bench/ext-proc: ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One gRPC unary Check over node:http2 (a 5 s deadline: a loaded machine); the verdict, or the gRPC status. */
async function check(session: http2.ClientHttp2Session, body: Buffer): Promise<string> {
  const st = session.request({ ':method': 'POST', ':path': CHECK_PATH, 'content-type': 'application/grpc', te: 'trailers', ...ENVOY_HEADERS, 'grpc-timeout': '5S' });
  const chunks: Buffer[] = [];
  let status = '';
  st.on('data', (c: Buffer) => chunks.push(c));
  st.on('response', (h) => h['grpc-status'] !== undefined && (status = String(h['grpc-status'])));
  st.on('trailers', (t) => (status = String(t['grpc-status'])));
  st.end(body);
  await new Promise((r, j) => {
    st.on('close', r);
    st.on('error', j);
  });
  return status === '0' ? verdictOf(decodeCheckResponse(Buffer.concat(chunks))) : `grpc-status:${status}`;
}

async function main(): Promise<void> {
  ensureH2load();
  const tmp = join(import.meta.dirname, 'tmp', `ext-proc-${process.pid}`);
  mkdirSync(tmp, { recursive: true });
  const redis = await startRedis();
  const db = redis.client();
  const s = schema();
  const kc = new KeyConsole({ redis: db });
  const targets: Target[] = [];
  const out: string[] = [];
  try {
    const k = await seedConsoleKey(db, s, 'meter');
    await kc.creditAccount(k.account, 1_000_000_000_000, 'bench');
    await db.hset(pricesKey(s.ns), '*', JSON.stringify(PRICE));
    const identity = { keyId: k.id, accountId: k.account, model: 'gpt-4o-mini' };
    const env = { REDIS_URL: redis.url };
    const sse = sse300();
    const json = json2k();
    // the JSON response's request names the model it answers with (else every stream is a
    // "model differs" anomaly and a warning log line, which is not what is measured here)
    const jsonModel = String(JSON.parse(json.toString()).model);
    const x = {
      json: { identity: { ...identity, model: jsonModel }, contentType: 'application/json', chunks: [json] },
      sse: { identity, contentType: 'text/event-stream', chunks: sse },
    } satisfies Record<string, ExchangeSpec>;

    if (PARTS.has('throughput')) out.push(...(await throughput(env, k.key, x, tmp, targets, db, k.id)));
    if (PARTS.has('streams')) out.push(...(await heldStreams(env, identity, sse, targets)));
    if (PARTS.has('overshoot')) out.push(...(await overshoot(env, db, s, kc, sse)));
    const pc = opt['profile-case'] === 'json' ? 'json' : 'sse';
    if (PARTS.has('profile')) out.push(...(await profile(env, exchangeBody(x[pc]), tmp, pc === 'json' ? 'a 2 KiB JSON response' : '300 SSE events')));
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    for (const t of targets) await t.stop();
    await kc.close().catch(() => {});
    await redis.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}

async function throughput(env: Record<string, string>, key: string, x: Record<'json' | 'sse', ExchangeSpec>, tmp: string, targets: Target[], db: import('ioredis').Redis, keyId: string): Promise<string[]> {
  const file = (name: string, b: Buffer) => {
    const p = join(tmp, `${name}.bin`);
    writeFileSync(p, b);
    return p;
  };
  const floor = await startTarget('floor: grpc-js no-op ext_proc', 'noop-extproc', env);
  targets.push(floor);
  const kg = await startTarget('keygate', 'keygate', env);
  targets.push(kg);
  const before = opt.baseline ? await startTarget('keygate (tree before)', 'keygate', env, [], join(opt.baseline, 'bench/lib/target.ts')) : null;
  if (before) targets.push(before);
  const checkFile = file('check', encodeCheck({ key }));
  const cases = [
    { id: 'json', label: '2 KiB JSON, answered', f: file('json', exchangeBody(x.json)), msgs: exchangeMessages(x.json).length, obs: false },
    { id: 'sse', label: '300 SSE events, answered', f: file('sse', exchangeBody(x.sse)), msgs: exchangeMessages(x.sse).length, obs: false },
    { id: 'json-obs', label: '2 KiB JSON, observability_mode', f: file('json-obs', exchangeBody({ ...x.json, observability: true })), msgs: exchangeMessages(x.json).length, obs: true },
    { id: 'sse-obs', label: '300 SSE events, observability_mode', f: file('sse-obs', exchangeBody({ ...x.sse, observability: true })), msgs: exchangeMessages(x.sse).length, obs: true },
  ];
  // what is measured: every message answered (or none in observability mode), OK at the end, booked
  const verify: string[] = [];
  for (const t of [floor, kg]) {
    const session = http2.connect(`http://127.0.0.1:${t.port}`);
    try {
      for (const c of cases) {
        if (t === floor && c.obs) continue;
        const spec = c.id.startsWith('json') ? x.json : x.sse;
        const r = await processStream(session, exchangeMessages({ ...spec, observability: c.obs })).done;
        const want = c.obs ? 0 : c.msgs;
        verify.push(`${t.name} ${c.id}: ${r.answers}/${c.msgs} answered, grpc-status ${r.grpcStatus}`);
        if (r.grpcStatus !== '0' || r.answers !== want) throw new Error(`${t.name} ${c.id}: ${r.answers} answers (want ${want}), grpc-status ${r.grpcStatus}`);
      }
      if (t === kg && (await check(session, encodeCheck({ key }))) !== 'allow') throw new Error('keygate does not allow the metered key');
    } finally {
      session.close();
    }
  }
  await sleep(1500);
  const booked0 = await usageCount(db, keyId);
  if (!(booked0 > 0)) throw new Error(`the verification streams were not booked (spend ${booked0} µ)`);

  interface Run { key: string; t: Target; f: string; shape: [number, number]; path?: string }
  const plan: Run[] = [
    { key: 'check', t: kg, f: checkFile, shape: [C, M] },
    ...cases.flatMap((c) => [
      ...(c.obs ? [] : [{ key: `floor|${c.id}`, t: floor, f: c.f, shape: [C, M] as [number, number], path: PROCESS_PATH }]),
      { key: `keygate|${c.id}`, t: kg, f: c.f, shape: [C, M] as [number, number], path: PROCESS_PATH },
    ]),
    ...(before
      ? [
          { key: 'before|check', t: before, f: checkFile, shape: [C, M] as [number, number] },
          ...cases.filter((c) => !c.obs).map((c) => ({ key: `before|${c.id}`, t: before, f: c.f, shape: [C, M] as [number, number], path: PROCESS_PATH })),
        ]
      : []),
    { key: 'check-1x1', t: kg, f: checkFile, shape: [1, 1] },
    { key: 'floor|json-1x1', t: floor, f: cases[0]!.f, shape: [1, 1], path: PROCESS_PATH },
    { key: 'keygate|json-1x1', t: kg, f: cases[0]!.f, shape: [1, 1], path: PROCESS_PATH },
  ];
  const runs = new Map<string, { r: H2loadResult; cpu: number }[]>();
  const drive = async (run: Run, dur: number) => {
    const c0 = run.t.cpuMs();
    const r = await runH2load({ port: run.t.port, path: run.path, bodyFile: run.f, connections: run.shape[0], streams: run.shape[1], durationSec: dur, warmupSec: WARMUP, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS });
    if (r.non2xx > 0 || r.succeeded < r.done) throw new Error(`${run.key}: ${r.non2xx} non-2xx, ${r.done - r.succeeded} failed of ${r.done}`);
    // a metered run ends when its bookings have landed (the key's spend still for 750 ms): at
    // saturation the booker's queue outgrows Redis's writes, and the rest would be charged to the
    // process's next run (docs/performance.md, "the booking drain")
    if (run.path === PROCESS_PATH && (run.t === kg || run.t === before)) await bookingsLanded(() => usageCount(db, keyId));
    return { r, cpu: ((run.t.cpuMs() - c0) * 1000) / Math.max(1, r.allRequests) };
  };
  log('warm-up: every run once');
  for (const run of plan) await drive(run, quick ? 0.5 : 1);
  const booked1 = await usageCount(db, keyId);
  let streamsSent = 0;
  for (let round = 0; round < ROUNDS; round++) {
    log(`round ${round + 1}/${ROUNDS} (load ${loadAverage()})`);
    for (const run of round % 2 ? [...plan].reverse() : plan) {
      const res = await drive(run, DURATION);
      runs.set(run.key, [...(runs.get(run.key) ?? []), res]);
      if ((run.t === kg || run.t === before) && !run.key.includes('check')) streamsSent += res.r.allRequests;
    }
  }
  await sleep(2000);
  const booked = (await usageCount(db, keyId)) - booked1;
  const v = (k: string) => {
    const rs = runs.get(k)!;
    return { rps: median(rs.map((y) => y.r.rps)), cpu: median(rs.map((y) => y.cpu)), p99: median(rs.map((y) => y.r.p99us)) };
  };
  const chk = v('check');
  const chk1 = v('check-1x1');
  const rows = [
    `ext_proc streams as h2load POSTs (one stream's framed ProcessingRequests as the body), ${C}x${M} unless noted, ${DURATION}s per run, median of ${ROUNDS} interleaved rounds (order alternating) after a warm-up pass. ` +
      'CPU µs of the target per stream (/proc), the cached Check on the same sidecar in the same rounds.',
    '',
    '| case | target | streams/s | p99 ms | CPU µs per stream | x cached Check (CPU) | keygate / floor (CPU) |',
    '|---|---|---:|---:|---:|---:|---:|',
    `| cached Check | keygate | ${chk.rps.toFixed(0)} | ${(chk.p99 / 1000).toFixed(2)} | ${chk.cpu.toFixed(1)} | 1.00 | – |`,
  ];
  const ratios: Record<string, number> = {};
  for (const c of cases) {
    const kgv = v(`keygate|${c.id}`);
    const fl = c.obs ? null : v(`floor|${c.id}`);
    ratios[c.id] = kgv.cpu / chk.cpu;
    if (fl) rows.push(`| ${c.label} | floor | ${fl.rps.toFixed(0)} | ${(fl.p99 / 1000).toFixed(2)} | ${fl.cpu.toFixed(1)} | ${(fl.cpu / chk.cpu).toFixed(2)} | – |`);
    rows.push(`| ${c.label} | keygate | ${kgv.rps.toFixed(0)} | ${(kgv.p99 / 1000).toFixed(2)} | ${kgv.cpu.toFixed(1)} | ${ratios[c.id]!.toFixed(2)} | ${fl ? (kgv.cpu / fl.cpu).toFixed(2) : '–'} |`);
  }
  const fl1 = v('floor|json-1x1');
  const kg1 = v('keygate|json-1x1');
  rows.push(`| cached Check, 1x1 | keygate | ${chk1.rps.toFixed(0)} | ${(chk1.p99 / 1000).toFixed(2)} | ${chk1.cpu.toFixed(1)} | 1.00 | – |`);
  rows.push(`| 2 KiB JSON, answered, 1x1 | floor | ${fl1.rps.toFixed(0)} | ${(fl1.p99 / 1000).toFixed(2)} | ${fl1.cpu.toFixed(1)} | ${(fl1.cpu / chk1.cpu).toFixed(2)} | – |`);
  rows.push(`| 2 KiB JSON, answered, 1x1 | keygate | ${kg1.rps.toFixed(0)} | ${(kg1.p99 / 1000).toFixed(2)} | ${kg1.cpu.toFixed(1)} | ${(kg1.cpu / chk1.cpu).toFixed(2)} | ${(kg1.cpu / fl1.cpu).toFixed(2)} |`);
  if (before) {
    const bc = v('before|check');
    rows.push(`| cached Check | keygate, tree before | ${bc.rps.toFixed(0)} | ${(bc.p99 / 1000).toFixed(2)} | ${bc.cpu.toFixed(1)} | – | – |`);
    for (const c of cases.filter((c) => !c.obs)) {
      const b = v(`before|${c.id}`);
      const now = v(`keygate|${c.id}`);
      rows.push(`| ${c.label} | keygate, tree before | ${b.rps.toFixed(0)} | ${(b.p99 / 1000).toFixed(2)} | ${b.cpu.toFixed(1)} | ${(b.cpu / bc.cpu).toFixed(2)} (its own Check) | this tree / before: ${(now.cpu / b.cpu).toFixed(2)} |`);
    }
  }
  const yes = (b: boolean) => (b ? 'met' : 'not met');
  rows.push(
    '',
    `- target: a metered 2 KiB JSON response at most 1x a cached Check by CPU: **${ratios.json!.toFixed(2)}x** at ${C}x${M} (${yes(ratios.json! <= 1)}), ${(kg1.cpu / chk1.cpu).toFixed(2)}x at 1x1`,
    `- target: a metered stream of 300 SSE events at most 4x a cached Check by CPU: **${ratios.sse!.toFixed(2)}x** (${yes(ratios.sse! <= 4)}); ${(v('keygate|sse').cpu / cases[1]!.msgs).toFixed(2)} µs per message`,
    `TARGET| metered 2 KiB JSON response ≤ 1x a cached Check, by CPU (bench/ext-proc.ts) | ${C}x${M} | – | ${ratios.json!.toFixed(2)}x | ${ratios.json! <= 1 ? 'yes' : 'no'} |`,
    `TARGET| metered stream of 300 SSE events ≤ 4x a cached Check, by CPU | ${C}x${M} | – | ${ratios.sse!.toFixed(2)}x | ${ratios.sse! <= 4 ? 'yes' : 'no'} |`,
    `TARGET| (for reference) the same in observability_mode: JSON / SSE | ${C}x${M} | – | ${ratios['json-obs']!.toFixed(2)}x / ${ratios['sse-obs']!.toFixed(2)}x | – |`,
    `TARGET| (for reference) keygate / grpc-js no-op Process floor, JSON / SSE, by CPU | ${C}x${M} | – | ${(v('keygate|json').cpu / v('floor|json').cpu).toFixed(2)} / ${(v('keygate|sse').cpu / v('floor|sse').cpu).toFixed(2)} | – |`,
    `- observability_mode: 2 KiB JSON ${ratios['json-obs']!.toFixed(2)}x, 300 SSE events ${ratios['sse-obs']!.toFixed(2)}x a cached Check`,
    `- booked in the measured rounds: ${booked} µ for ${streamsSent} metered streams sent (29 tokens per SSE stream and ${JSON_TOKENS} per JSON response at 1 µ per token; h2load's count includes streams cut at a run's end)`,
    `- verified before timing: ${verify.join('; ')}`,
    '',
  );
  return ['### Metering per response (ext_proc)', '', ...rows];
}

/** What the key has spent in all, µ (the console's key view). */
async function usageCount(db: import('ioredis').Redis, keyId: string): Promise<number> {
  return (await new KeyConsole({ redis: db }).getKeyView(keyId)).usage.spend.totalMicros;
}

async function heldStreams(env: Record<string, string>, identity: ExchangeSpec['identity'], sse: Buffer[], targets: Target[]): Promise<string[]> {
  const t = await startTarget('keygate (memory)', 'keygate', env, ['--expose-gc']);
  targets.push(t);
  const mib = (b: number) => (b / 2 ** 20).toFixed(1);
  const snap = async () => {
    const u = (await t.gc())!;
    return { rss: t.memory().rssKiB * 1024, js: u.heapUsed + u.external + u.arrayBuffers, heap: u.heapTotal };
  };
  const conns = Math.ceil(OPEN / 250);
  // new connections every cycle: node:http2 (nghttp2's reset rate limit: a burst of 1,000, then 33
  // a second) ends a connection with GOAWAY INTERNAL_ERROR after a few cycles of 250 cancels on it
  let sessions: http2.ClientHttp2Session[] = [];
  const rows = [
    `${OPEN} metered streams held open at once on ${conns} connections (request and response headers and 10 SSE events each, no end of stream), measured after a full GC in the sidecar; then all cancelled; ${CYCLES} cycles, each on new connections:`,
    '',
    '| state | RSS MiB | JS heap + external MiB | V8 heap committed MiB |',
    '|---|---:|---:|---:|',
  ];
  try {
    const idle = await snap();
    rows.push(`| idle | ${mib(idle.rss)} | ${mib(idle.js)} | ${mib(idle.heap)} |`);
    let perStream = 0;
    const after: number[] = [];
    const openJs: number[] = [];
    const heapAt: number[] = [];
    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      for (const s of sessions) s.close();
      sessions = Array.from({ length: conns }, () => http2.connect(`http://127.0.0.1:${t.port}`));
      const open = Array.from({ length: OPEN }, (_, i) =>
        processStream(sessions[i % conns]!, exchangeMessages({ identity, contentType: 'text/event-stream', chunks: sse.slice(0, 10), complete: false, requestId: `held-${cycle}-${i}` }), false),
      );
      await Promise.all(open.map((o) => o.answered(12)));
      const held = await snap();
      perStream = Math.max(perStream, (held.js - idle.js) / OPEN);
      openJs.push(held.js);
      rows.push(`| cycle ${cycle}: ${OPEN} streams open | ${mib(held.rss)} | ${mib(held.js)} | ${mib(held.heap)} |`);
      for (const o of open) o.stream.close(http2.constants.NGHTTP2_CANCEL);
      await Promise.all(open.map((o) => o.done.catch(() => {})));
      await sleep(500);
      const closed = await snap();
      after.push(closed.rss);
      heapAt.push(closed.heap);
      rows.push(`| cycle ${cycle}: all cancelled | ${mib(closed.rss)} | ${mib(closed.js)} | ${mib(closed.heap)} |`);
    }
    // The bound is checked over the second half of the cycles: over the first ones the process grows
    // to its working size (measured: V8's committed heap steps from about 100 to 167 MiB at cycle 3
    // while the heap in use does not grow, and glibc's malloc keeps freed pages mapped for reuse),
    // so RSS after closing the first 1,000 streams is not the floor the next ones return to. A leak
    // shows as growth every cycle and in the JS heap in use; reuse, as a plateau.
    const mid = Math.floor(CYCLES / 2); // the first cycle of the checked half (1-based)
    const growth = after[CYCLES - 1]! - after[mid - 1]!;
    const perCycle = growth / (CYCLES - mid);
    const jsGrowth = openJs[CYCLES - 1]! - openJs[mid - 1]!;
    rows.push(
      '',
      `TARGET| memory per open metered stream (stated) | ${OPEN} open | – | ${(perStream / 1024).toFixed(1)} KiB | stated |`,
      `TARGET| ${OPEN} concurrent streams held; RSS after closing grows ≤ 8 MiB from cycle ${mid} to cycle ${CYCLES} (a plateau) | ${CYCLES} cycles | – | ${growth >= 0 ? '+' : ''}${mib(growth)} MiB | ${growth <= 8 * 2 ** 20 ? 'yes' : 'no'} |`,
      `- memory per open metered stream (JS heap + external over idle, the largest of the cycles): about **${(perStream / 1024).toFixed(1)} KiB**`,
      `- RSS after closing: idle → cycle ${mid} +${mib(after[mid - 1]! - idle.rss)} MiB (the process growing to its working size: V8's committed heap ${mib(idle.heap)} → ${mib(heapAt[mid - 1]!)} MiB); cycle ${mid} → ${CYCLES} **${mib(growth)} MiB** (${mib(perCycle)} MiB per cycle); JS heap + external with the streams open, cycle ${mid} → ${CYCLES}: ${mib(jsGrowth)} MiB`,
      '',
    );
  } finally {
    for (const s of sessions) s.close();
    await t.stop();
  }
  return ['### Open metered streams', '', ...rows];
}

async function overshoot(env: Record<string, string>, db: import('ioredis').Redis, s: ReturnType<typeof schema>, kc: KeyConsole, sse: Buffer[]): Promise<string[]> {
  const N = 16;
  const LIMIT = 10_000;
  const k = await seedConsoleKey(db, s, 'limit');
  await kc.creditAccount(k.account, 1_000_000_000_000, 'bench');
  await kc.setKeyLimit(k.id, { amountMicros: LIMIT, period: 'day' });
  await kc.recordUsage({ keyId: k.id, amountMicros: LIMIT - 1, requestId: 'bench-at-limit' });
  const t = await startTarget('keygate (overshoot)', 'keygate', env);
  const session = http2.connect(`http://127.0.0.1:${t.port}`);
  try {
    const body = encodeCheck({ key: k.key });
    const verdicts = await Promise.all(Array.from({ length: N }, () => check(session, body)));
    const allowed = verdicts.filter((v) => v === 'allow').length;
    const identity = { keyId: k.id, accountId: k.account, model: 'gpt-4o-mini' };
    const results = await Promise.all(
      Array.from({ length: allowed }, (_, i) => processStream(session, exchangeMessages({ identity, contentType: 'text/event-stream', chunks: sse, requestId: `over-${i}` })).done),
    );
    await sleep(1500);
    const spent = (await kc.getKeyView(k.id)).usage.spend.periodMicros;
    const after = await check(session, body);
    const per = (spent - (LIMIT - 1)) / Math.max(1, allowed);
    const ended = results.filter((r) => r.grpcStatus === '0').length;
    // docs/metering.md: overshoot ≤ (requests in flight at the crossing + request rate × (flush
    // interval + staleness bound)) × the largest cost of one response; here no request follows
    const cost = sseTokens(sse) * (PRICE.output / 1_000_000);
    const bound = allowed * cost;
    const past = spent - LIMIT;
    return [
      '### Overshoot at a spend limit',
      '',
      `TARGET| overshoot: ${allowed} streamed answers admitted at a spend limit; spent past it ≤ the documented bound (${allowed} × ${cost} µ = ${bound} µ) | 16 streams | – | ${past} µ | ${past <= bound ? 'yes' : 'no'} |`,
      '',
      `A key with a daily spend limit of ${LIMIT} µ, ${LIMIT - 1} µ spent; ${N} Checks at once: ${allowed} allowed; then ${allowed} streamed answers (${ended} ended OK) of 300 SSE events metered at once ` +
        `(${per.toFixed(0)} µ each at the bench's price); spent afterwards ${spent} µ: **${spent - LIMIT} µ past the limit** (${((spent - LIMIT) / per).toFixed(0)} responses' worth); the next Check: ${after}.`,
      '',
    ];
  } finally {
    session.close();
    await t.stop();
  }
}

/** Input plus output tokens of the stream's usage event. */
function sseTokens(events: readonly Buffer[]): number {
  for (const e of events) {
    const t = e.toString();
    if (!t.includes('"usage":{')) continue;
    const u = JSON.parse(t.slice(t.indexOf('{'))).usage;
    return u.prompt_tokens + u.completion_tokens;
  }
  throw new Error('the stream carries no usage');
}

async function profile(env: Record<string, string>, body: Buffer, tmp: string, what: string): Promise<string[]> {
  const dir = join(tmp, 'prof');
  mkdirSync(dir, { recursive: true });
  const f = join(tmp, 'sse-prof.bin');
  writeFileSync(f, body);
  const t = await startTarget('keygate (profiled)', 'keygate', env, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
  const r = await runH2load({ port: t.port, path: PROCESS_PATH, bodyFile: f, connections: C, streams: M, durationSec: DURATION * 2, warmupSec: WARMUP, logFile: join(tmp, 'h2load.log'), headers: ENVOY_HEADERS });
  await t.stop();
  const prof = readdirSync(dir).filter((n) => n.endsWith('.cpuprofile')).map((n) => join(dir, n)).sort().at(-1)!;
  return [
    `### Where the CPU of a metered stream goes (${what}, answered)`,
    '',
    `\`node --cpu-prof\` of the sidecar while h2load sends the stream (${what}) at ${C}x${M} (${r.rps.toFixed(0)} streams/s under the profiler):`,
    '',
    summarizeProfile(readFileSync(prof, 'utf8'), 25),
    '',
  ];
}

await main();
