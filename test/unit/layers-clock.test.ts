/**
 * One way to tell time: under the folders whose bounds run on the injected clock (src/core/clock.ts),
 * no raw timer (`setTimeout`, `setInterval`, their clears), no `Date.now`, `performance.now`,
 * `process.hrtime` or `new Date()` outside the clock module itself, except the uses allowed below,
 * each with its reason. Read from the source text (comments left out), as test/unit/layers.test.ts.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** The folders (and files) converted: every rule bound in them takes a `Clock`. */
const CONVERTED = ['src/core', 'src/schema', 'src/pipeline', 'src/authorizer.ts', 'src/store', 'src/metering', 'src/events', 'src/transport', 'src/telemetry', 'src/ledger', 'src/prices'];

/** `file` → the raw uses it may keep, and why. */
const ALLOWED: Record<string, { readonly uses: readonly string[]; readonly why: string }> = {
  'src/core/clock.ts': { uses: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date.now', 'performance.now'], why: 'the clock itself: systemClock' },
  'src/authorizer.ts': { uses: ['process.hrtime'], why: "a decision's latency stamp (ns, per request, read by metrics and logs): a measurement, not a bound" },
  'src/telemetry/metrics.ts': { uses: ['process.hrtime'], why: 'the decision latency histogram: a measurement' },
  'src/telemetry/decision-log.ts': { uses: ['process.hrtime'], why: "a logged decision's latency: a measurement" },
  'src/telemetry/otel.ts': { uses: ['performance.now', 'process.hrtime', 'setTimeout', 'clearTimeout'], why: "span timestamps (OpenTelemetry's own time origin) and the exporter's shutdown bound (process level)" },
  'src/transport/http/server.ts': { uses: ['Date.now', 'setTimeout'], why: 'the HTTP server drains its requests at shutdown (process level, not a rule)' },
  'src/transport/h2/server.ts': { uses: ['setTimeout', 'clearTimeout'], why: 'the node http2 server closes its sessions at shutdown (process level)' },
  'src/transport/grpc-js/server.ts': { uses: ['setTimeout', 'clearTimeout'], why: 'the grpc-js server closes at shutdown (process level)' },
  'src/events/http-delivery.ts': { uses: ['setTimeout', 'clearTimeout', 'Date.now'], why: "one attempt's socket timeout (I/O, aborts a real request) and the signature's timestamp header" },
  'src/events/ssrf.ts': { uses: ['setTimeout', 'clearTimeout'], why: "a DNS lookup's timeout (I/O)" },
  'src/events/signature.ts': { uses: ['Date.now'], why: "verify()'s default for the receiver's now (a parameter: library code for receivers)" },
  'src/transport/envoy/ext-proc-envoy.ts': { uses: ['Date.now', 'setTimeout'], why: "the Envoy side (dev gateway, bench, tests; never loaded by the sidecar): waiting for a processor's answers, not a rule of keygate" },
};

const USES: ReadonlyArray<readonly [string, RegExp]> = [
  ['setTimeout', /(?<![.\w#$])setTimeout\s*\(/],
  ['clearTimeout', /(?<![.\w#$])clearTimeout\s*\(/],
  ['setInterval', /(?<![.\w#$])setInterval\s*\(/],
  ['clearInterval', /(?<![.\w#$])clearInterval\s*\(/],
  ['Date.now', /\bDate\.now\b/],
  ['performance.now', /\bperformance\.now\b/],
  ['process.hrtime', /\bprocess\.hrtime\b/],
  ['new Date()', /\bnew Date\(\s*\)/],
];

function filesUnder(path: string): string[] {
  const abs = join(ROOT, path);
  if (!existsSync(abs)) return [];
  if (statSync(abs).isFile()) return [path];
  return readdirSync(abs, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `${path}/${f}`);
}

/** The source without comments (block comments, and line comments that start a line or follow code after a space). */
function code(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|\s)\/\/.*$/gm, '$1');
}

describe('one clock', () => {
  const files = CONVERTED.flatMap(filesUnder);

  it('no raw timer or clock read under the converted folders but the allowed ones', () => {
    expect(files.length).toBeGreaterThan(100); // the control: the folders are read
    const found = files.flatMap((f) => {
      const text = code(f);
      return USES.filter(([, re]) => re.test(text)).map(([use]) => `${f}: ${use}`);
    });
    expect(found).toContain('src/core/clock.ts: setTimeout'); // the control: the patterns match
    expect(found.filter((l) => !ALLOWED[l.split(': ')[0]!]?.uses.includes(l.split(': ')[1]!))).toEqual([]);
  });

  it("every bound named in the issue takes the clock as an option defaulting to systemClock, and the transport's own Timers are gone", () => {
    const bounds = [
      'src/metering/meter.ts',
      'src/metering/booker.ts',
      'src/store/rate-limiter.ts',
      'src/store/token-rate-views.ts',
      'src/store/cache.ts',
      'src/store/invalidation.ts',
      'src/store/usage-counter.ts',
      'src/events/worker.ts',
      'src/transport/grpc/deadlines.ts',
      'src/ledger/sink.ts',
    ];
    const without = bounds.filter((f) => !(/clock\?: Clock\b|clock: Clock = systemClock/.test(code(f)) && /\bsystemClock\b/.test(code(f))));
    expect(without).toEqual([]);
    expect(existsSync(join(ROOT, 'src/transport/grpc/timers.ts'))).toBe(false);
    expect(files.filter((f) => /\bTimers\b/.test(code(f)))).toEqual([]);
  });
});
