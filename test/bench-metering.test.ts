/**
 * The metering and rate-limit benches' pieces, minimally (no timing assertions: figures come from
 * `npm run bench`): the ext_proc stream bodies decode as the ProcessingRequests they claim to be,
 * the grpc-js no-op Process floor answers every message, h2load drives a Process stream, and the
 * documented commands `scripts/node bench/ext-proc.ts`, `scripts/node bench/rate.ts` and
 * `scripts/node bench/resources.ts` run quickly (held streams, the overshoot, the shared rate count,
 * and every resources phase measured with its metered streams booked: properties, not timings).
 */
import * as http2 from 'node:http2';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeProcessingRequest } from '../src/transport/envoy/ext-proc.ts';
import { grpcUnframe } from '../bench/lib/bodies.ts';
import { exchangeBody, exchangeMessages, json2k, processStream, PROCESS_PATH, sse300 } from '../bench/lib/ext-proc.ts';
import { runH2load } from '../bench/lib/h2load.ts';
import { startTarget, type Target } from '../bench/lib/procs.ts';

const identity = { keyId: 'key_0000000000000abc', accountId: 'acct-bench', model: 'gpt-4o-mini' };

describe('ext_proc stream bodies', () => {
  it('frame one exchange as Envoy sends it: headers with the ext_authz metadata, body chunks, end_of_stream on the last', () => {
    const sse = sse300();
    expect(sse.length).toBe(301); // 300 data events and [DONE]
    const msgs = grpcUnframe(exchangeBody({ identity, contentType: 'text/event-stream', chunks: sse, requestId: 'r-1' }));
    expect(msgs.length).toBe(303);
    const decoded = msgs.map((m) => decodeProcessingRequest(m));
    expect(decoded.map((d) => d.phase).slice(0, 3)).toEqual(['request_headers', 'response_headers', 'response_body']);
    expect(decoded[0]!.metadata).toEqual(identity);
    expect(decoded[0]!.headers).toContain('x-request-id');
    expect(decoded[1]!.headers).toContain('text/event-stream');
    expect(decoded.slice(2).map((d) => d.endOfStream)).toEqual([...Array(300).fill(false), true]);
    expect(Buffer.concat(decoded.slice(2).map((d) => d.body!)).toString()).toContain('"usage":{"prompt_tokens":19');
    expect(decoded.every((d) => !d.observabilityMode)).toBe(true);
  });

  it('observability_mode on every message; a held stream has no end_of_stream; no x-request-id unless given', () => {
    const obs = exchangeMessages({ identity, contentType: 'application/json', chunks: [json2k()], observability: true }).map((m) => decodeProcessingRequest(m));
    expect(obs.every((d) => d.observabilityMode)).toBe(true);
    expect(obs[0]!.headers).not.toContain('x-request-id');
    expect(JSON.parse(obs[2]!.body!.toString()).usage.total_tokens).toBeGreaterThan(0);
    expect(json2k().length).toBeGreaterThanOrEqual(2000);
    const held = exchangeMessages({ identity, contentType: 'text/event-stream', chunks: sse300().slice(0, 10), complete: false }).map((m) => decodeProcessingRequest(m));
    expect(held.some((d) => d.endOfStream)).toBe(false);
  });
});

describe('the ext_proc floor against real processes', () => {
  let floor: Target;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'keygate-bench-extproc-'));
    floor = await startTarget('floor', 'noop-extproc');
  });

  afterAll(async () => {
    await floor?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers every message of a stream with OK at the end, and none in observability_mode', async () => {
    const session = http2.connect(`http://127.0.0.1:${floor.port}`);
    try {
      const spec = { identity, contentType: 'text/event-stream', chunks: sse300().slice(0, 20) };
      expect(await processStream(session, exchangeMessages(spec)).done).toEqual({ answers: 22, grpcStatus: '0' });
      expect(await processStream(session, exchangeMessages({ ...spec, observability: true })).done).toEqual({ answers: 0, grpcStatus: '0' });
    } finally {
      session.close();
    }
  });

  it('h2load sends a whole stream as one POST to Process', async () => {
    const file = join(dir, 'json.bin');
    writeFileSync(file, exchangeBody({ identity, contentType: 'application/json', chunks: [json2k()] }));
    const r = await runH2load({ port: floor.port, path: PROCESS_PATH, bodyFile: file, connections: 1, streams: 2, durationSec: 0.5, warmupSec: 0.1, logFile: join(dir, 'h2.log') });
    expect(r.done).toBeGreaterThan(0);
    expect(r.non2xx).toBe(0);
    expect(r.succeeded).toBe(r.done);
  });
});

describe('bench/ext-proc.ts (the documented command, minimal)', () => {
  it('holds metered streams and cancels them; 16 streams at a spend limit spend no more than the documented bound', () => {
    const out = execFileSync('scripts/node', ['bench/ext-proc.ts', '--quick', '--parts', 'streams,overshoot'], { encoding: 'utf8', timeout: 150_000 });
    expect(out).toMatch(/^TARGET\| memory per open metered stream \(stated\) \| 200 open \| – \| [\d.]+ KiB \| stated \|$/m);
    // the held-streams bound is checked over the second half of the cycles (3 with --quick: 1 → 3),
    // and must hold: RSS after closing plateaus (a leak grows every cycle)
    expect(out).toMatch(/^TARGET\| 200 concurrent streams held; RSS after closing grows ≤ 8 MiB from cycle 1 to cycle 3 \(a plateau\) \| 3 cycles \| – \| [+-]?[\d.]+ MiB \| yes \|$/m);
    expect(out).toMatch(/^TARGET\| overshoot: 16 streamed answers admitted at a spend limit; .* \| 16 streams \| – \| \d+ µ \| yes \|$/m);
    expect(out).toMatch(/the next Check: deny:KEY_LIMIT_EXCEEDED/);
  }, 180_000);
});

describe('bench/rate.ts (the documented command, minimal)', () => {
  it('counts a rated key on 2 and 4 sidecars sharing one Redis within the documented bound', () => {
    const out = execFileSync('scripts/node', ['bench/rate.ts', '--quick', '--parts', 'bound'], { encoding: 'utf8', timeout: 150_000 });
    for (const n of [2, 4]) expect(out).toMatch(new RegExp(`^TARGET\\| allowed in the window within the documented bound \\[L − P, L\\] = \\[570, 600\\], ${n} sidecars .* \\| \\d+ allowed \\([\\d.]+x\\) \\| yes \\|$`, 'm'));
  }, 180_000);
});

describe('bench/resources.ts (the documented command, minimal)', () => {
  it('measures every sidecar and console phase, books the metered streams and answers every console call 2xx', () => {
    // 1 s phases and 50 calls; the four 5 s idle phases are fixed
    const out = execFileSync('scripts/node', ['bench/resources.ts', '--duration', '1', '--burst', '50'], { encoding: 'utf8', timeout: 60_000 });
    const n = String.raw`[\d.]+`;
    const phase = (name: string, busy: boolean) => new RegExp(String.raw`^\| ${name.replace(/[()]/g, '\\$&')} \| ${busy ? '\\d+' : '–'} \| ${n} \| ${busy ? '\\d+' : '–'} \| \d+ \| \d+ \| \d+ \|$`, 'm');
    const sidecar = out.slice(out.indexOf('## Sidecar'), out.indexOf('## Console'));
    const consolePart = out.slice(out.indexOf('## Console'));
    for (const [name, busy] of [['idle (5 s, after start)', false], ['cached Checks, 4x16', true], ['metered 2 KiB JSON responses, 4x16', true], ['metered 300-event SSE streams, 4x16', true], ['the three at once, 2x8 each', true], ['idle again (5 s)', false]] as const) expect(sidecar).toMatch(phase(name, busy));
    expect(sidecar).toMatch(/^- booked by metering during the phases: [1-9]\d* µ/m);
    for (const [name, busy] of [['idle (5 s, after start)', false], ['50 API calls, 16 at a time', true], ['idle again (5 s)', false]] as const) expect(consolePart).toMatch(phase(name, busy));
    // a fifth are key creations (201), the rest reads and usage records (200), in the order they came
    const answers = Object.fromEntries([.../^- answers: (.*)$/m.exec(consolePart)![1]!.matchAll(/(\d+) × (\d+)/g)].map((m) => [m[2], Number(m[1])]));
    expect(answers).toEqual({ '200': 40, '201': 10 });
    expect(out).toMatch(/^- command: `scripts\/node bench\/resources.ts --duration 1 --burst 50`$/m);
  }, 60_000);
});
