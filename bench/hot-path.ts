/**
 * The cached valid key's decision in process, for a before/after of the decision code alone (no
 * sockets, no h2load, so a loaded machine blurs it far less than `ab.ts`):
 *
 *   scripts/node bench/hot-path.ts [--baseline DIR] [--checks N] [--batch B] [--tracing]
 *
 * For this tree (and DIR, another keygate checkout, when given) in turn, in its own child process:
 * a sidecar store and authorizer on one redis-server and one seeded key, warmed, then N checks in
 * batches of B started in one turn (as a poll batch of requests). Prints promises created per check
 * (async_hooks: each `await` of a pending value and each async call makes one; exact, not timed),
 * CPU ns per check and minor GCs per 100k checks.
 *
 * `--tracing` adds this tree with OpenTelemetry tracing on (the Check span observer of
 * src/telemetry/otel.ts, exporting over OTLP/HTTP to a sink in the same process, so the export's
 * CPU is counted): once without a traceparent (the span skipped) and once with a sampled one (a
 * span per check).
 */
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
  options: {
    baseline: { type: 'string' },
    checks: { type: 'string', default: '200000' },
    batch: { type: 'string', default: '64' },
    child: { type: 'string' },
    tracing: { type: 'boolean', default: false },
    /** Child only: off | on | on-traced. */
    mode: { type: 'string', default: 'off' },
  },
});

if (opt.child) {
  await child(resolve(opt.child), Number(opt.checks), Number(opt.batch), opt.mode as Mode);
} else {
  const here = resolve(import.meta.dirname, '..');
  const trees: Array<{ name: string; dir: string; mode?: Mode }> = [
    { name: 'this tree', dir: here },
    ...(opt.baseline ? [{ name: 'baseline', dir: resolve(opt.baseline) }] : []),
    ...(opt.tracing
      ? [
          { name: 'this tree, tracing on, no traceparent', dir: here, mode: 'on' as const },
          { name: 'this tree, tracing on, sampled traceparent', dir: here, mode: 'on-traced' as const },
        ]
      : []),
  ];
  console.log('| tree | promises / check | CPU ns / check | minor GCs / 100k checks |\n|---|---:|---:|---:|');
  for (const t of trees) {
    const out = execFileSync(process.execPath, [import.meta.filename, '--child', t.dir, '--checks', opt.checks!, '--batch', opt.batch!, '--mode', t.mode ?? 'off'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    const r = JSON.parse(out.trim().split('\n').at(-1)!) as { promises: number; ns: number; gcs: number };
    console.log(`| ${t.name} | ${r.promises.toFixed(2)} | ${r.ns.toFixed(0)} | ${r.gcs.toFixed(1)} |`);
  }
}

type Mode = 'off' | 'on' | 'on-traced';

async function child(dir: string, checks: number, batch: number, mode: Mode): Promise<void> {
  const { createHook } = await import('node:async_hooks');
  const { PerformanceObserver, constants } = await import('node:perf_hooks');
  const { pino } = await import('pino');
  const { startRedis } = await import(`${dir}/bench/lib/redis.ts`);
  const { seedKeys } = await import(`${dir}/bench/lib/seed.ts`);
  const { schema } = await import(`${dir}/src/schema/redis-schema.ts`);
  const { loadConfig } = await import(`${dir}/src/config.ts`);
  const { createKeyStore } = await import(`${dir}/src/store/index.ts`);
  const { Authorizer } = await import(`${dir}/src/authorizer.ts`);
  const redis = await startRedis();
  const log = pino({ level: 'silent' });
  try {
    const s = schema();
    const [key] = await seedKeys(redis.client(), s, { prefix: 'kg_', count: 1, accounts: 1, tag: 'hot' });
    const config = loadConfig({ redisUrl: redis.url, stalenessBoundMs: 60_000 }, {});
    const store = createKeyStore(config, s, log);
    for (let i = 0; i < 500 && !store.stats().tracking; i++) await new Promise((r) => setTimeout(r, 10));
    const auth = new Authorizer(store, { keyPrefix: 'kg_', pathPrefixes: [] }, log);
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    let stopTracing = async () => {};
    if (mode !== 'off') {
      const { startOtlpSink } = await import(`${dir}/bench/lib/otlp-sink.ts`);
      const { startOtel } = await import(`${dir}/src/telemetry/otel.ts`);
      const sink = await startOtlpSink();
      const otel = startOtel({ endpoint: sink.url, traces: true, metrics: false, serviceName: 'keygate', version: 'bench', unparentedRatio: 0, metricsIntervalMs: 60_000 }, log);
      auth.observe(otel.decisionObserver!);
      if (mode === 'on-traced') headers.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      stopTracing = async () => {
        await otel.shutdown();
        process.stderr.write(`hot-path: ${mode}: ${sink.requests} OTLP export requests, ${(sink.bytes / 1024).toFixed(0)} KiB\n`);
        await sink.close();
      };
    }
    const input = { header: (n: string) => headers[n], method: 'POST', path: '/v1/chat/completions', protocol: 'openai', body: undefined, bodyTruncated: false, requestId: 'req-1' };
    const run = async (n: number) => {
      for (let i = 0; i < n; i += batch) {
        const all = [];
        for (let j = 0; j < batch; j++) all.push(auth.check(input));
        for (const o of await Promise.all(all)) if (!o.decision.allow) throw new Error(`not allowed: ${o.decision.code}`);
      }
    };
    await run(20_000); // warm: cached, optimised
    if (store.stats().misses > 3) throw new Error('not cached');
    let promises = 0;
    const hook = createHook({ init: (_id, type) => void (type === 'PROMISE' && promises++) });
    hook.enable();
    await run(10_000);
    hook.disable();
    let gcs = 0;
    const obs = new PerformanceObserver((l) => {
      for (const e of l.getEntries()) if (((e as unknown as { detail?: { kind?: number } }).detail)?.kind === constants.NODE_PERFORMANCE_GC_MINOR) gcs++;
    });
    obs.observe({ entryTypes: ['gc'] });
    const c0 = process.cpuUsage();
    await run(checks);
    const c = process.cpuUsage(c0);
    await new Promise((r) => setTimeout(r, 50));
    obs.disconnect();
    process.stdout.write(`${JSON.stringify({ promises: promises / 10_000, ns: ((c.user + c.system) * 1000) / checks, gcs: (gcs * 100_000) / checks })}\n`);
    await stopTracing();
    await store.close();
  } finally {
    await redis.stop();
  }
}
