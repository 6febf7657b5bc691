/**
 * Bounded per connection and overall: request messages that stop arriving are answered
 * DEADLINE_EXCEEDED and reset after the receive timeout; the bytes a connection (and all of them)
 * may hold in half-received messages are capped (RESOURCE_EXHAUSTED past it), measured as the
 * sidecar child's RSS while many connections hold half-sent messages; everyone else keeps being
 * answered; and a connection that sent one oversize message goes on serving thousands of checks.
 * Real sockets (node:http2 client writing partial frames) against `bin/keygate serve`.
 */
import * as http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { authorizationService } from '../proto/envoy-protos.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { checkRequest, EnvoyClient } from './helpers/envoy-client.ts';
import { connect as rawConnect } from './helpers/h2-raw.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { serveChild, type ServeChild } from './helpers/serve-child.ts';

const CHECK = '/envoy.service.auth.v3.Authorization/Check';
const MiB = 1024 * 1024;
const encode = (msg: object) => authorizationService().service.Check!.requestSerialize(msg) as Buffer;
const prefix = (len: number) => Buffer.from([0, (len >>> 24) & 0xff, (len >>> 16) & 0xff, (len >>> 8) & 0xff, len & 0xff]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let redis: RedisServer;
let db: Redis;
let valid: SeededKey;
let checkFrame: Buffer;

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  valid = await seedKey(db, schema());
  const m = encode(checkRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key } }));
  checkFrame = Buffer.concat([prefix(m.length), m]);
});

afterAll(async () => {
  await destroyRedis(redis);
});

const connect = (port: number): Promise<http2.ClientHttp2Session> => rawConnect(port, { maxSessionMemory: 4096 });

interface Answer {
  grpcStatus: string | undefined;
  closedAt: number;
  rstCode: number;
}

/** Opens a Check stream, writes `bytes`, ends it when `end`; resolves with the answer when the stream closes. */
function call(session: http2.ClientHttp2Session, bytes: Buffer, end: boolean): { answer: Promise<Answer>; stream: http2.ClientHttp2Stream } {
  const stream = session.request({ ':method': 'POST', ':path': CHECK, 'content-type': 'application/grpc', te: 'trailers' });
  stream.on('error', () => {});
  let grpcStatus: string | undefined;
  stream.on('response', (h) => {
    if (h['grpc-status'] !== undefined) grpcStatus = String(h['grpc-status']);
  });
  stream.on('trailers', (t) => (grpcStatus = String(t['grpc-status'])));
  stream.resume();
  if (end) stream.end(bytes);
  else if (bytes.length) stream.write(bytes);
  const answer = new Promise<Answer>((resolve) => stream.once('close', () => resolve({ grpcStatus, closedAt: Date.now(), rstCode: stream.rstCode ?? -1 })));
  return { answer, stream };
}

/** A check on a fresh grpc-js client (another client than the one holding streams). */
async function otherClientCheck(child: ServeChild): Promise<number | undefined> {
  const client = new EnvoyClient(`127.0.0.1:${child.grpcPort}`);
  try {
    return (await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key } }, 10_000)).status?.code;
  } finally {
    client.close();
  }
}

describe('stalled messages (h2)', () => {
  let child: ServeChild;
  beforeAll(async () => {
    child = await serveChild(redis.url, { KEYGATE_GRPC_RECEIVE_TIMEOUT_MS: '1000' });
  }, 40_000);
  afterAll(async () => {
    await child?.stop();
  });

  it('are never cut before the receive timeout, wherever they start between two sweeps', async () => {
    // The sweep runs every quarter of the timeout; streams started across a whole sweep interval
    // must each get the full timeout from their own start (one was cut at 750-1000 ms).
    const session = await connect(child.grpcPort);
    try {
      const stalled: { started: number; answer: Promise<Answer> }[] = [];
      for (let i = 0; i < 8; i++) {
        stalled.push({ started: Date.now(), answer: call(session, checkFrame.subarray(0, 3), false).answer });
        await sleep(35);
      }
      for (const s of stalled) {
        const a = await s.answer;
        expect(a.grpcStatus).toBe('4');
        expect(a.closedAt - s.started).toBeGreaterThanOrEqual(990);
      }
    } finally {
      session.destroy();
    }
  });

  it('are answered DEADLINE_EXCEEDED and reset after the receive timeout, while other checks succeed', async () => {
    const session = await connect(child.grpcPort);
    try {
      const started = Date.now();
      const stalled = [
        call(session, Buffer.alloc(0), false), // headers only
        call(session, checkFrame.subarray(0, 3), false), // part of the length prefix
        call(session, checkFrame.subarray(0, checkFrame.length - 10), false), // most of the message
      ];
      // Meanwhile, other clients are answered at once.
      const t0 = Date.now();
      for (let i = 0; i < 5; i++) expect(await otherClientCheck(child)).toBe(0);
      expect(Date.now() - t0).toBeLessThan(900 + 5 * 1000);
      // And on the same connection.
      expect((await call(session, checkFrame, true).answer).grpcStatus).toBe('0');
      const answers = await Promise.all(stalled.map((s) => s.answer));
      for (const a of answers) {
        expect(a.grpcStatus).toBe('4');
        expect(a.closedAt - started).toBeGreaterThanOrEqual(900);
        expect(a.closedAt - started).toBeLessThan(8000);
      }
      expect(child.alive()).toBe(true);
    } finally {
      session.destroy();
    }
  }, 30_000);
});

describe('bytes held per connection and overall (h2)', () => {
  let child: ServeChild;
  const MAX = 4 * MiB;
  beforeAll(async () => {
    child = await serveChild(redis.url, {
      KEYGATE_GRPC_MAX_RECEIVE_BYTES: String(MAX),
      KEYGATE_GRPC_MAX_CONNECTION_BUFFERED_BYTES: String(2 * MAX + 64),
      KEYGATE_GRPC_MAX_BUFFERED_BYTES: String(40 * 2 * MAX),
      KEYGATE_GRPC_RECEIVE_TIMEOUT_MS: '60000',
    });
  }, 40_000);
  afterAll(async () => {
    await child?.stop();
  });

  it('N connections holding half-sent messages keep the RSS bounded; the rest is refused; everyone else is answered', async () => {
    // Warm up (code loaded, heap grown a little) before the baseline.
    for (let i = 0; i < 20; i++) expect(await otherClientCheck(child)).toBe(0);
    const before = child.rssBytes();
    const CONNS = 20;
    const STREAMS = 8;
    const sent = Math.floor(MAX * 0.9);
    const sessions: http2.ClientHttp2Session[] = [];
    const calls: Array<ReturnType<typeof call>> = [];
    try {
      for (let c = 0; c < CONNS; c++) {
        const s = await connect(child.grpcPort);
        sessions.push(s);
        for (let i = 0; i < STREAMS; i++) calls.push(call(s, Buffer.concat([prefix(MAX - 5), Buffer.alloc(sent, 0x20)]), false));
      }
      // Unbounded, this would be CONNS × STREAMS × 3.6 MiB ≈ 576 MiB held by the sidecar.
      const refused = await Promise.race([
        Promise.all(calls.slice().map((c) => c.answer)).then(() => 'all closed'),
        (async () => {
          for (;;) {
            await sleep(100);
            if (calls.filter((c) => c.stream.closed).length >= CONNS * (STREAMS - 2)) return 'refused';
          }
        })(),
      ]);
      expect(refused).toBe('refused');
      await sleep(1500); // the held streams' data arrives
      const refusedAnswers = await Promise.all(calls.filter((c) => c.stream.closed).map((c) => c.answer));
      expect(refusedAnswers.length).toBe(CONNS * (STREAMS - 2));
      for (const a of refusedAnswers) expect(a.grpcStatus).toBe('8');
      const grown = child.rssBytes() - before;
      // Held: CONNS × 2 × 3.6 MiB ≈ 144 MiB (plus what was read and dropped from refused streams).
      expect(grown).toBeLessThan(300 * MiB);
      // Everyone else is still answered.
      for (let i = 0; i < 5; i++) expect(await otherClientCheck(child)).toBe(0);
      console.log(`rss before ${(before / MiB).toFixed(0)} MiB, grown ${(grown / MiB).toFixed(0)} MiB with ${CONNS}×2 streams holding ${(sent / MiB).toFixed(1)} MiB`);
    } finally {
      for (const s of sessions) s.destroy();
    }
    expect(child.alive()).toBe(true);
  }, 90_000);

  it('overall: past the budget across connections new messages are RESOURCE_EXHAUSTED, and served again once released', async () => {
    // Fill the overall budget: 40 connections each holding its per-connection maximum.
    const sessions: http2.ClientHttp2Session[] = [];
    try {
      const held: Array<ReturnType<typeof call>> = [];
      for (let c = 0; c < 41; c++) {
        const s = await connect(child.grpcPort);
        sessions.push(s);
        for (let i = 0; i < 2; i++) held.push(call(s, prefix(MAX - 5), false));
      }
      await sleep(500);
      const late = held.filter((c) => c.stream.closed);
      expect(late.length).toBe(2); // the 41st connection's: over the overall budget
      for (const c of late) expect((await c.answer).grpcStatus).toBe('8');
      // A small check from another client is refused as well, never answered as allowed.
      const code = await otherClientCheck(child).catch((e: { code?: number }) => e.code);
      expect(code).toBe(8);
    } finally {
      for (const s of sessions) s.destroy();
    }
    await sleep(200);
    expect(await otherClientCheck(child)).toBe(0);
  }, 60_000);
});

describe.each(['h2', 'grpc-js'])('one oversize message, then a burst on the same connection (%s)', (transport) => {
  let child: ServeChild;
  beforeAll(async () => {
    child = await serveChild(redis.url, { KEYGATE_GRPC_TRANSPORT: transport, KEYGATE_GRPC_MAX_RECEIVE_BYTES: String(MiB) });
  }, 40_000);
  afterAll(async () => {
    await child?.stop();
  });

  it('2,000 valid checks on that connection all succeed', async () => {
    const session = await connect(child.grpcPort);
    try {
      const big = call(session, Buffer.concat([prefix(2 * MiB), Buffer.alloc(2 * MiB, 0x20)]), true);
      expect((await big.answer).grpcStatus).toBe('8');
      const statuses = new Map<string, number>();
      for (let batch = 0; batch < 10; batch++) {
        const answers = await Promise.all(Array.from({ length: 200 }, () => call(session, checkFrame, true).answer));
        for (const a of answers) statuses.set(String(a.grpcStatus), (statuses.get(String(a.grpcStatus)) ?? 0) + 1);
      }
      expect(Object.fromEntries(statuses)).toEqual({ '0': 2000 });
    } finally {
      session.destroy();
    }
  }, 60_000);
});

describe('HTTP port: a request that stops arriving', () => {
  let child: ServeChild;
  beforeAll(async () => {
    child = await serveChild(redis.url);
  }, 40_000);
  afterAll(async () => {
    await child?.stop();
  });

  it('is answered 408 and closed once its headers are 10 s late, while other requests are served', async () => {
    const { connect: netConnect } = await import('node:net');
    const sock = netConnect(child.httpPort, '127.0.0.1');
    let got = '';
    sock.on('data', (d: Buffer) => (got += d.toString()));
    sock.on('error', () => {});
    const closed = new Promise<number>((resolve) => sock.once('close', () => resolve(Date.now())));
    await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
    const started = Date.now();
    sock.write(`POST /authz/v1/chat/completions HTTP/1.1\r\nhost: a\r\nx-api-key: ${valid.key}\r\n`); // headers never finish
    await sleep(500);
    const { send } = await import('./helpers/http-client.ts');
    expect((await send(child.httpPort, { method: 'POST', path: '/authz/v1/chat/completions', headers: { 'x-api-key': valid.key } })).status).toBe(200);
    const at = await closed;
    expect(at - started).toBeGreaterThanOrEqual(9_500);
    expect(at - started).toBeLessThan(13_000);
    expect(got).toMatch(/^HTTP\/1\.1 408/);
  }, 45_000);
});
