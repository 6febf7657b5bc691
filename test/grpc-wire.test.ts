/**
 * gRPC wire behaviour that Envoy relies on, the same for every transport (grpc-js, the lean
 * node:http2 one, connect): status codes, trailers, deadlines, the receive limit, compression and
 * the health service. Raw HTTP/2 requests, so that nothing of a gRPC client library hides the wire.
 */
import * as http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../src/config.ts';
import { startSidecar, type Sidecar } from '../src/main.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { authorizationService } from '../proto/envoy-protos.ts';
import { checkRequest } from './helpers/envoy-client.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';

const TRANSPORTS: Config['grpcTransport'][] = ['grpc-js', 'h2'];
const MAX = 64 * 1024;
const CHECK = '/envoy.service.auth.v3.Authorization/Check';
const s = schema();
const method = authorizationService().service.Check!;

let redis: RedisServer;
let db: Redis;
let valid: SeededKey;
const sidecars = new Map<string, Sidecar>();

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
  valid = await seedKey(db, s, { account: 'acct-wire' });
  for (const t of TRANSPORTS) {
    sidecars.set(
      t,
      await startSidecar(
        loadConfig({ redisUrl: redis.url, grpcPort: 0, httpPort: 0, adminPort: 0, grpcTransport: t, grpcMaxReceiveBytes: MAX, redisTimeoutMs: 10_000 }, {}),
        createLogger('silent'),
      ),
    );
  }
  // the store (and its invalidation link) is up before the first decision is asked for
  for (const sc of sidecars.values()) while (!sc.ready()) await new Promise((r) => setTimeout(r, 20));
});

afterAll(async () => {
  for (const sc of sidecars.values()) await sc.close();
  if (redis) await destroyRedis(redis);
});

interface RawAnswer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
  /** grpc-status from the trailers, or from the headers of a trailers-only answer. */
  grpcStatus: string | undefined;
}

function frame(msg: Buffer, compressed = false): Buffer {
  const out = Buffer.alloc(5 + msg.length);
  out[0] = compressed ? 1 : 0;
  out.writeUInt32BE(msg.length, 1);
  msg.copy(out, 5);
  return out;
}

async function raw(port: number, path: string, body: Buffer, headers: Record<string, string> = {}): Promise<RawAnswer> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  try {
    return await new Promise<RawAnswer>((resolve, reject) => {
      const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers });
      let h: http2.IncomingHttpHeaders = {};
      let t: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      req.on('response', (x) => (h = x));
      req.on('trailers', (x) => (t = x));
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () =>
        resolve({
          status: Number(h[':status']),
          headers: h,
          trailers: t,
          body: Buffer.concat(chunks),
          grpcStatus: (t['grpc-status'] ?? h['grpc-status']) as string | undefined,
        }),
      );
      req.on('error', reject);
      req.end(body);
    });
  } finally {
    session.close();
  }
}

const checkBody = (key = valid.key) => frame(method.requestSerialize(checkRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': key } })));
const decode = (body: Buffer) => method.responseDeserialize(body.subarray(5)) as any;

describe.each(TRANSPORTS)('%s transport', (t) => {
  const port = () => sidecars.get(t)!.grpcPort;

  it('answers a Check with the message in DATA and grpc-status 0 in trailers', async () => {
    const a = await raw(port(), CHECK, checkBody());
    expect(a.status).toBe(200);
    expect(String(a.headers['content-type'])).toMatch(/^application\/grpc/);
    expect(a.headers['grpc-status']).toBeUndefined();
    expect(a.trailers['grpc-status']).toBe('0');
    const res = decode(a.body);
    expect(res.ok_response.headers.find((h: any) => h.header.key === 'x-keygate-account-id').header.value).toBe('acct-wire');
  });

  it('a deny is a successful RPC carrying the denied response', async () => {
    const a = await raw(port(), CHECK, checkBody('kg_nope'));
    expect(a.grpcStatus).toBe('0');
    const res = decode(a.body);
    expect(res.status.code).toBe(16);
    expect(res.denied_response.status.code).toBe(401);
  });

  it('an unknown method is UNIMPLEMENTED', async () => {
    expect((await raw(port(), '/envoy.service.auth.v3.Authorization/Nope', checkBody())).grpcStatus).toBe('12');
    expect((await raw(port(), '/some.Other/Check', checkBody())).grpcStatus).toBe('12');
  });

  it('a request that is not gRPC gets HTTP 415', async () => {
    expect((await raw(port(), CHECK, checkBody(), { 'content-type': 'text/plain' })).status).toBe(415);
  });

  it('a message over the receive limit is RESOURCE_EXHAUSTED, and the server keeps serving', async () => {
    const big = frame(method.requestSerialize(checkRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key }, body: Buffer.alloc(MAX + 10, 0x20) })));
    expect((await raw(port(), CHECK, big)).grpcStatus).toBe('8');
    expect((await raw(port(), CHECK, checkBody())).trailers['grpc-status']).toBe('0');
  });

  it('a gzip-compressed request is accepted', async () => {
    const msg = method.requestSerialize(checkRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': valid.key } }));
    const a = await raw(port(), CHECK, frame(gzipSync(msg), true), { 'grpc-encoding': 'gzip' });
    expect(a.grpcStatus).toBe('0');
    expect(decode(a.body).ok_response).toBeDefined();
  });

  it('a request with no message is refused, never answered as an empty check', async () => {
    const a = await raw(port(), CHECK, Buffer.alloc(0));
    expect(a.grpcStatus).not.toBe('0');
  });

  it('health: SERVING for "" and the Authorization service, NOT_FOUND for others', async () => {
    const hc = (service: string) => frame(Buffer.concat([Buffer.from([0x0a, service.length]), Buffer.from(service)]));
    for (const name of ['', 'envoy.service.auth.v3.Authorization']) {
      const a = await raw(port(), '/grpc.health.v1.Health/Check', name ? hc(name) : frame(Buffer.alloc(0)));
      expect(a.grpcStatus).toBe('0');
      expect([...a.body.subarray(5)]).toEqual([0x08, 0x01]); // status: SERVING
    }
    expect((await raw(port(), '/grpc.health.v1.Health/Check', hc('nope'))).grpcStatus).toBe('5');
  });

  it('health Watch streams the current status', async () => {
    const session = http2.connect(`http://127.0.0.1:${port()}`);
    session.on('error', () => {});
    try {
      const first = await new Promise<Buffer>((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': '/grpc.health.v1.Health/Watch', 'content-type': 'application/grpc', te: 'trailers' });
        req.on('data', (c: Buffer) => {
          resolve(c);
          req.close();
        });
        req.on('error', reject);
        req.end(frame(Buffer.alloc(0)));
      });
      expect([...first.subarray(5)]).toEqual([0x08, 0x01]);
    } finally {
      session.close();
    }
  });

  it('a decision not ready by grpc-timeout is DEADLINE_EXCEEDED, on time', async () => {
    const key = (await seedKey(db, s)).key; // uncached, so the lookup waits on the paused store
    await db.call('CLIENT', 'PAUSE', '1500', 'ALL');
    const started = Date.now();
    const a = await raw(port(), CHECK, checkBody(key), { 'grpc-timeout': '200m' });
    const took = Date.now() - started;
    expect(a.grpcStatus).toBe('4');
    expect(took).toBeLessThan(1400); // answered at the deadline, not when the store came back
    await new Promise((r) => setTimeout(r, 1600 - took));
  });
});

describe('h2 transport flow control', () => {
  it('grants 1 MiB per stream and 8 MiB per connection, so a large body is sent without waiting for WINDOW_UPDATE', async () => {
    const session = http2.connect(`http://127.0.0.1:${sidecars.get('h2')!.grpcPort}`);
    session.on('error', () => {});
    try {
      await new Promise<void>((resolve) => session.once('remoteSettings', () => resolve()));
      expect(session.remoteSettings.initialWindowSize).toBe(1024 * 1024);
      // the connection window grows by the server's WINDOW_UPDATE right after its SETTINGS
      const deadline = Date.now() + 5000;
      while ((session.state.remoteWindowSize ?? 0) < 8 * 1024 * 1024 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(session.state.remoteWindowSize).toBe(8 * 1024 * 1024);
    } finally {
      session.close();
    }
  });
});
