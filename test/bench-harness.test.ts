/**
 * The benchmark's pieces, minimally (no timing assertions: figures come from `npm run bench`):
 * body files decode to the Envoy request they claim to be, keys spliced into a template are
 * well-formed, and the targets, load generators and Redis accounting work against a real
 * redis-server and real child processes.
 */
import * as http2 from 'node:http2';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { isWellFormedKey, keyDigest } from '../src/core/key-format.ts';
import { schema } from '../src/schema/redis-schema.ts';
import {
  chatBody,
  checkMethod,
  encodeCheck,
  fastKeys,
  grpcUnframe,
  keyTemplate,
  malformedKey,
  withKey,
} from '../bench/lib/bodies.ts';
import { exchangeBody, exchangeMessages, processStream, PROCESS_PATH, sse300 } from '../bench/lib/ext-proc.ts';
import { runH2load } from '../bench/lib/h2load.ts';
import { runLoad } from '../bench/lib/loadgen.ts';
import { loadgen, startTarget, type Target } from '../bench/lib/procs.ts';
import { summarizeProfile } from '../bench/lib/profile.ts';
import { commandCalls, roundTripsPerDecision, seedKeys, writeKeysFile } from '../bench/lib/seed.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

const s = schema();
const decode = (frame: Buffer) => checkMethod().requestDeserialize(grpcUnframe(frame)[0]!);

describe('bench bodies', () => {
  it('frames an Envoy CheckRequest that decodes with the upstream protos', () => {
    const [key] = fastKeys('kg_', 1);
    const body = chatBody(1024, 'gpt-4o-mini', 'last');
    const frame = encodeCheck({ key, body });
    expect(frame[0]).toBe(0);
    expect(frame.readUInt32BE(1)).toBe(frame.length - 5);
    const req = decode(frame);
    const http = req.attributes.request.http;
    expect(http.headers.authorization).toBe(`Bearer ${key}`);
    expect(http.headers[':path']).toBe('/v1/chat/completions');
    expect(Buffer.from(http.raw_body).equals(body)).toBe(true);
    expect(req.attributes.context_extensions.protocol).toBe('openai');
  });

  it('writes keys into a template at the key slot', () => {
    const t = keyTemplate('kg_');
    const keys = fastKeys('kg_', 3);
    for (const k of keys) expect(decode(withKey(t, k)).attributes.request.http.headers.authorization).toBe(`Bearer ${k}`);
    expect(() => withKey(t, 'short')).toThrow(/length/);
  });

  it('makes well-formed keys, and malformed ones that fail only the checksum', () => {
    const keys = fastKeys('kg_', 500);
    expect(new Set(keys).size).toBe(500);
    for (const k of keys) expect(isWellFormedKey(k, 'kg_')).toBe(true);
    const bad = malformedKey(keys[0]!);
    expect(bad.length).toBe(keys[0]!.length);
    expect(isWellFormedKey(bad, 'kg_')).toBe(false);
  });

  it.each([
    [1024, 'first'],
    [65536, 'last'],
  ] as const)('chat body of %i bytes with the model %s', (size, where) => {
    const b = chatBody(size, 'gpt-4o-mini', where);
    expect(b.length).toBe(size);
    const doc = JSON.parse(b.toString());
    expect(doc.model).toBe('gpt-4o-mini');
    expect(Object.keys(doc)[where === 'first' ? 0 : Object.keys(doc).length - 1]).toBe('model');
  });
});

describe('bench profile summary', () => {
  it('attributes self time to functions and inclusive time to areas', () => {
    const prof = {
      nodes: [
        { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 }, children: [2] },
        { id: 2, callFrame: { functionName: 'check', url: 'file:///x/src/authorizer.ts', lineNumber: 9 }, children: [3] },
        { id: 3, callFrame: { functionName: 'decode', url: 'file:///x/node_modules/protobufjs/src/reader.js', lineNumber: 0 } },
      ],
      samples: [2, 3, 3, 3],
      timeDeltas: [10, 10, 10, 10],
    };
    const md = summarizeProfile(JSON.stringify(prof));
    expect(md).toContain('| 75.0 | `decode protobufjs:1` |');
    expect(md).toContain('| 100.0 | `src/authorizer.ts` |');
  });
});

describe('bench pieces against real processes', () => {
  let redis: RedisServer;
  let db: Redis;
  let keygate: Target;
  let floor: Target;
  let dir: string;
  let valid: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'keygate-bench-'));
    redis = await startRedis();
    db = redis.client();
    [valid] = await seedKeys(db, s, { prefix: 'kg_', count: 1, accounts: 1, tag: 'valid' }) as [string];
    keygate = await startTarget('keygate', 'keygate', { REDIS_URL: redis.url, KEYGATE_LOG_LEVEL: 'silent' });
    floor = await startTarget('floor', 'noop-grpcjs');
  });

  afterAll(async () => {
    await keygate?.stop();
    await floor?.stop();
    if (redis) await destroyRedis(redis);
    rmSync(dir, { recursive: true, force: true });
  });

  it('seeds records the sidecar reads', async () => {
    const rec = await db.hgetall(s.keyRecord(keyDigest(valid)));
    expect(rec).toMatchObject({ v: '1', status: 'active', account: 'acct-bench-0' });
  });

  it('the node:http2 load generator checks grpc-status and decodes answers', async () => {
    const good = join(dir, 'valid.bin');
    writeFileSync(good, encodeCheck({ key: valid }));
    const bad = join(dir, 'malformed.bin');
    writeFileSync(bad, encodeCheck({ key: malformedKey(valid) }));
    const a = await runLoad({ port: keygate.port, connections: 2, streams: 2, requests: 20, bodyFile: good, sampleEvery: 1 });
    expect(a).toMatchObject({ errors: 0, httpNon200: 0, grpcStatus: { '0': 20 }, sampled: { allow: 20 } });
    const d = await runLoad({ port: keygate.port, connections: 1, streams: 1, requests: 3, bodyFile: bad, sampleEvery: 1 });
    expect(d.sampled).toEqual({ 'deny:INVALID_API_KEY': 3 });
    const f = await runLoad({ port: floor.port, connections: 1, streams: 1, requests: 3, bodyFile: bad, sampleEvery: 1 });
    expect(f.sampled).toEqual({ allow: 3 });
  });

  it('cold keys: one key per request from a keys file, with Redis commands counted', async () => {
    const keys = await seedKeys(db, s, { prefix: 'kg_', count: 40, accounts: 4, tag: 'cold' });
    const keysFile = join(dir, 'keys.txt');
    writeKeysFile(keysFile, keys);
    const t = keyTemplate('kg_');
    const tpl = join(dir, 'tpl.bin');
    writeFileSync(tpl, t.frame);
    writeFileSync(tpl + '.json', JSON.stringify({ offset: t.offset, keyLength: t.keyLength }));
    const before = await commandCalls(db);
    const r = await loadgen({ port: keygate.port, connections: 1, streams: 4, requests: 40, templateFile: tpl, keysFile, sampleEvery: 1 });
    const after = await commandCalls(db);
    expect(r.sampled).toEqual({ allow: 40 });
    const rt = roundTripsPerDecision(before, after, 40);
    expect(rt.hmget).toBeGreaterThan(0);
    // one HMGET per key record, and one per account (its status and rates are read with one HMGET
    // since rate limits): 40 keys over 4 accounts, and the first test key's account read again at most once
    expect(rt.hmget).toBeLessThanOrEqual((40 + 4 + 1) / 40);
    const flood = await loadgen({ port: keygate.port, connections: 1, streams: 4, requests: 30, templateFile: tpl, randomKeysPrefix: 'kg_', sampleEvery: 1 });
    expect(flood.sampled).toEqual({ 'deny:INVALID_API_KEY': 30 });
    expect(keygate.memory().rssKiB).toBeGreaterThan(0);
  });

  it('bench/ab.ts runs two trees side by side and prints both rows (here: this tree against itself)', () => {
    const out = execFileSync('scripts/node', ['bench/ab.ts', '--baseline', '.', '--case', 'malformed', '--shape', '1x2', '--rounds', '1', '--duration', '0.5'], { encoding: 'utf8', timeout: 90_000 });
    expect(out).toMatch(/^\| this tree \| \d+ \| [\d.]+ \| \d+ \| \d+ \| \d+ \|$/m);
    expect(out).toMatch(/^\| baseline \| \d+ \| [\d.]+ \| \d+ \| \d+ \| \d+ \|$/m);
    expect(out).toMatch(/^TARGET\| malformed key vs the tree before /m);
  }, 120_000);

  it('bench/check-cost.ts runs the production decision in process and reports CPU per check and store reads', () => {
    const out = execFileSync('scripts/node', ['bench/check-cost.ts', '--mode', 'rated', '--batch', '4', '--checks', '2000', '--rounds', '2'], { encoding: 'utf8', timeout: 90_000 });
    const m = /^rated key, batch 4: CPU ns per check min (\d+), median (\d+) .*store reads while timing (\d+); not allowed (\{.*\});/m.exec(out);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(0);
    // the cached path: a warm key answered from memory (only the usage counter's flush script reads)
    expect(Number(m![3])).toBeLessThan(100);
  }, 120_000);

  it('bench/ab.ts drives each tree with its own case and its own store (a rated key against a plain one)', () => {
    const out = execFileSync('scripts/node', ['bench/ab.ts', '--baseline', '.', '--case', 'rated', '--baseline-case', 'valid', '--shape', '1x2', '--rounds', '1', '--duration', '0.5'], { encoding: 'utf8', timeout: 90_000 });
    expect(out).toMatch(/^# keygate A\/B: rated key \(baseline: valid key\), 1x2$/m);
    expect(out).toMatch(/^TARGET\| rated key vs the valid key /m);
    // each sidecar read its records from its own store: a handful of reads, not one per request
    const reads = [...out.matchAll(/^\| (?:this tree|baseline) \|.*\| (\d+) \|$/gm)].map((m) => Number(m[1]));
    expect(reads).toHaveLength(2);
  }, 120_000);

  it("the ext_proc limit answers every message of a stream with its phase's CONTINUE, frames split anywhere", async () => {
    const limit = await startTarget('ext_proc limit', 'noop-extproc-h2');
    const session = http2.connect(`http://127.0.0.1:${limit.port}`);
    try {
      const x = { identity: { keyId: 'key_x', accountId: 'acct-x' }, contentType: 'text/event-stream', chunks: sse300().slice(0, 20) };
      const msgs = exchangeMessages(x);
      const r = await processStream(session, msgs).done;
      expect(r).toEqual({ answers: msgs.length, grpcStatus: '0' });
      // the same stream as one body written in 7-byte pieces: frames split across DATA frames
      const st = session.request({ ':method': 'POST', ':path': PROCESS_PATH, 'content-type': 'application/grpc', te: 'trailers' });
      const got: Buffer[] = [];
      st.on('data', (c: Buffer) => got.push(c));
      const body = exchangeBody(x);
      for (let i = 0; i < body.length; i += 7) st.write(body.subarray(i, i + 7));
      st.end();
      await new Promise((res) => st.on('close', res));
      const answers = Buffer.concat(got);
      const phases: number[] = [];
      for (let i = 0; i < answers.length; i += 5 + answers.readUInt32BE(i + 1)) phases.push(answers[i + 5]! >> 3);
      // ProcessingResponse: request_headers (1), response_headers (2), then response_body (4) per chunk
      expect(phases).toEqual([1, 2, ...x.chunks.map(() => 4)]);
    } finally {
      session.close();
      await limit.stop();
    }
  });

  it('h2load drives a target with the framed body and its log is read', async () => {
    try {
      execFileSync('sh', ['-c', 'command -v h2load'], { stdio: 'ignore' });
    } catch {
      throw new Error('h2load is required (apt-get install nghttp2-client)');
    }
    const file = join(dir, 'valid.bin');
    const r = await runH2load({ port: keygate.port, bodyFile: file, connections: 1, streams: 2, durationSec: 0.5, warmupSec: 0.1, logFile: join(dir, 'h2.log'), headers: { 'grpc-timeout': '5S' } });
    expect(r.done).toBeGreaterThan(0);
    expect(r.non2xx).toBe(0);
    expect(r.succeeded).toBe(r.done);
    expect(r.p50us).toBeGreaterThan(0);
  });
});

describe('bench OPA-Envoy target', () => {
  it('names the binary when OPA_ENVOY_BIN cannot be run, and writes the policy data for the seeded keys', async () => {
    const { startOpaEnvoy } = await import('../bench/lib/opa.ts');
    const dir = mkdtempSync(join(tmpdir(), 'kg-opa-'));
    try {
      const key = { digest: keyDigest('kg_example'), id: 'key_1', account: 'acct-1', models: ['openai/gpt-4o-mini'] };
      await expect(startOpaEnvoy(join(dir, 'no-such-opa'), [key], dir, async () => false)).rejects.toThrow(/cannot run .*no-such-opa.*OPA_ENVOY_BIN/);
      const data = JSON.parse(readFileSync(join(dir, 'opa-data.json'), 'utf8'));
      expect(data.keygate.keys[key.digest]).toEqual({ id: 'key_1', account: 'acct-1', status: 'active', models: ['openai/gpt-4o-mini'], expires_at: null });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
