/**
 * The metering and rate-limit benches' pieces, minimally (no timing assertions: figures come from
 * `npm run bench`): the ext_proc stream bodies decode as the ProcessingRequests they claim to be,
 * the grpc-js no-op Process floor answers every message, h2load drives a Process stream, and the
 * documented commands `scripts/node bench/ext-proc.ts` and `scripts/node bench/rate.ts` run quickly
 * (held streams, the overshoot and the shared rate count: properties, not timings).
 */
import * as http2 from 'node:http2';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeProcessingRequest } from '../src/metering/ext-proc-codec.ts';
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
