/**
 * No input can stop the process: connections that close, reset or vanish at every point of a
 * request (after the headers, mid-frame, mid-message, while the answer is being computed), many at
 * once, on every transport (gRPC on h2 and on grpc-js, HTTP external auth). The sidecar runs as a
 * child process (`bin/keygate serve`) so a crash shows as an exit, not as a dead test runner;
 * after each storm it must still be alive and answer a valid check on every port.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as netConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { authorizationService } from '../proto/envoy-protos.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { checkRequest, EnvoyClient } from './helpers/envoy-client.ts';
import { send } from './helpers/http-client.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { serveChild, type ServeChild } from './helpers/serve-child.ts';

const CHECK = '/envoy.service.auth.v3.Authorization/Check';
const encode = (msg: object) => authorizationService().service.Check!.requestSerialize(msg) as Buffer;
const frame = (msg: Buffer) => Buffer.concat([Buffer.from([0, (msg.length >>> 24) & 0xff, (msg.length >>> 16) & 0xff, (msg.length >>> 8) & 0xff, msg.length & 0xff]), msg]);

let redis: RedisServer;
let db: Redis;
let valid: SeededKey;

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  valid = await seedKey(db, schema());
});

afterAll(async () => {
  await destroyRedis(redis);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A valid framed CheckRequest, with a body of `bodyBytes` so it spans several DATA frames. */
const checkFrame = (bodyBytes = 0) =>
  frame(encode(checkRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key }, ...(bodyBytes ? { body: Buffer.alloc(bodyBytes, 0x20) } : {}) })));

/** What a stream sends before it is cut off. */
const SENDS = ['headers', 'prefix', 'half', 'whole-open', 'whole-ended'] as const;
/** How it is cut off. */
const CUTS = ['rst', 'end', 'destroy', 'goaway', 'socket'] as const;

/** One connection: `streams` streams, each sending part of a request, then cut one way or another. */
async function abuse(port: number, seed: number, streams: number): Promise<void> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  await new Promise<void>((resolve) => {
    session.once('connect', () => resolve());
    session.once('error', () => resolve());
    session.once('close', () => resolve());
  });
  const whole = checkFrame(seed % 2 ? 40_000 : 0);
  const cut = CUTS[seed % CUTS.length]!;
  for (let i = 0; i < streams && !session.destroyed && !session.closed; i++) {
    let st: http2.ClientHttp2Stream;
    try {
      st = session.request({ ':method': 'POST', ':path': CHECK, 'content-type': 'application/grpc', te: 'trailers' });
    } catch {
      break;
    }
    st.on('error', () => {});
    st.resume();
    const what = SENDS[(seed + i) % SENDS.length]!;
    if (what === 'prefix') st.write(whole.subarray(0, 3));
    else if (what === 'half') st.write(whole.subarray(0, whole.length >> 1));
    else if (what === 'whole-open') st.write(whole);
    else if (what === 'whole-ended') st.end(whole);
    if (cut === 'rst' || cut === 'end') {
      setTimeout(() => (cut === 'rst' ? st.close(http2.constants.NGHTTP2_CANCEL) : st.end()), (seed + i) % 4);
    }
  }
  await sleep(seed % 5);
  if (cut === 'destroy') session.destroy();
  else if (cut === 'goaway') {
    session.goaway(http2.constants.NGHTTP2_NO_ERROR);
    session.destroy();
  } else if (cut === 'socket') session.socket?.destroy();
  else {
    await sleep(20);
    session.destroy();
  }
}

/** HTTP/1.1: a request cut off after part of its headers, after its headers, mid-body, or as soon as it is sent. */
async function abuseHttp(port: number, seed: number): Promise<void> {
  const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(30_000) }] });
  const head = `POST /authz/v1/chat/completions HTTP/1.1\r\nhost: a\r\nx-api-key: ${valid.key}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
  const parts = [head.slice(0, 20), head, head + body.slice(0, 1000), head + body];
  const sock = netConnect(port, '127.0.0.1');
  sock.on('error', () => {});
  sock.resume();
  await new Promise<void>((resolve) => {
    sock.once('connect', () => resolve());
    sock.once('close', () => resolve());
  });
  sock.write(parts[seed % parts.length]!);
  await sleep(seed % 4);
  if (seed % 2) sock.destroy();
  else sock.end();
}

async function assertServing(child: ServeChild): Promise<void> {
  expect(child.alive(), `keygate exited:\n${child.output()}`).toBe(true);
  const client = new EnvoyClient(`127.0.0.1:${child.grpcPort}`);
  try {
    const res = await client.check({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key } });
    expect(res.status?.code).toBe(0);
  } finally {
    client.close();
  }
  const http = await send(child.httpPort, { method: 'POST', path: '/authz/v1/chat/completions', headers: { 'x-api-key': valid.key } });
  expect(http.status).toBe(200);
  expect(child.alive()).toBe(true);
}

describe.each(['h2', 'grpc-js'])('connections cut at every point (gRPC transport %s, and HTTP)', (transport) => {
  let child: ServeChild;
  beforeAll(async () => {
    child = await serveChild(redis.url, { KEYGATE_GRPC_TRANSPORT: transport });
  }, 40_000);
  afterAll(async () => {
    await child?.stop();
  });

  it('survives streams reset, ended or dropped after their headers or mid-message, many at once', async () => {
    await assertServing(child);
    for (let round = 0; round < 4; round++) {
      await Promise.all(Array.from({ length: 50 }, (_, i) => abuse(child.grpcPort, round * 50 + i, 1 + (i % 8))));
      await sleep(100);
      expect(child.alive(), `keygate exited in round ${round}:\n${child.output()}`).toBe(true);
    }
    await assertServing(child);
  }, 60_000);

  it('survives HTTP requests cut off in their headers, mid-body or before the answer, many at once', async () => {
    for (let round = 0; round < 4; round++) {
      await Promise.all(Array.from({ length: 50 }, (_, i) => abuseHttp(child.httpPort, round * 50 + i)));
      await sleep(100);
      expect(child.alive(), `keygate exited in round ${round}:\n${child.output()}`).toBe(true);
    }
    await assertServing(child);
  }, 60_000);
});

describe('an exception that escapes every handler', () => {
  it('is logged at fatal without request content, and the process exits 1 for its supervisor to restart', async () => {
    // Injected from outside the code under test: a SIGUSR2 handler that throws, signalled once serving.
    const dir = mkdtempSync(join(tmpdir(), 'keygate-fault-'));
    const fault = join(dir, 'fault.mjs');
    writeFileSync(
      fault,
      'if (process.argv.includes("serve")) process.on("SIGUSR2", () => { throw Object.assign(new Error("injected fault"), { code: "E_INJECTED" }); });\n',
    );
    let child: ServeChild | undefined;
    try {
      child = await serveChild(redis.url, { KEYGATE_LOG_LEVEL: 'info', NODE_OPTIONS: `--import=${fault}` });
      const proc = child.proc;
      await assertServing(child);
      proc.kill('SIGUSR2');
      const code = await new Promise<number | null>((resolve) => {
        if (proc.exitCode !== null) resolve(proc.exitCode);
        proc.once('exit', (c) => resolve(c));
      });
      expect(code).toBe(1);
      const fatal = child
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.msg === 'uncaught exception; exiting');
      expect(fatal).toMatchObject({ level: 60, err: { message: 'injected fault', code: 'E_INJECTED' } });
      expect(child.output()).not.toContain(valid.key);
    } finally {
      await child?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);
});
