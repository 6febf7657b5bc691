/**
 * Streams answered before the client finished sending are reset with NO_ERROR (HTTP/2: the
 * response is complete, stop sending) on every gRPC transport, whatever came before them on the
 * connection or on the server: malformed messages (ending short of their length prefix, a
 * compressed flag without an encoding) followed by an oversize one, on one connection and across
 * connections; and a client that keeps sending after the answer is not read without end.
 * Real sockets (node:http2 client writing raw gRPC frames) against an in-process sidecar.
 */
import * as http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../src/schema/redis-schema.ts';
import { checkRequest } from './helpers/envoy-client.ts';
import { connect as rawConnect } from './helpers/h2-raw.ts';
import { authorizationService } from '../proto/envoy-protos.ts';
import { seedKey } from './helpers/seed.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';
import { transportFlag } from './helpers/transport.ts';

const CHECK = '/envoy.service.auth.v3.Authorization/Check';
const MiB = 1024 * 1024;
const MAX = 16 * MiB;
const prefix = (len: number, compressed = 0) =>
  Buffer.from([compressed, (len >>> 24) & 0xff, (len >>> 16) & 0xff, (len >>> 8) & 0xff, len & 0xff]);

let stack: Stack;
let checkFrame: Buffer;

beforeAll(async () => {
  stack = await startStack({ grpcMaxReceiveBytes: MAX, ...transportFlag() });
  const k = await seedKey(stack.db, schema());
  const m = authorizationService().service.Check!.requestSerialize(checkRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': k.key } })) as Buffer;
  checkFrame = Buffer.concat([prefix(m.length), m]);
}, 40_000);

afterAll(async () => {
  await stack?.close();
});

const connect = (): Promise<http2.ClientHttp2Session> => rawConnect(stack.sidecar.grpcPort);

interface Answer {
  grpcStatus: string | undefined;
  rstCode: number;
  /** ms from the answer's headers to the stream's close (-1: no answer) */
  closeAfterAnswerMs: number;
  /** bytes the client managed to hand to the socket before the close */
  written: number;
}

/**
 * Opens a Check stream and writes `bytes`; with `end`, ends it; else keeps writing 64 KiB chunks
 * for as long as the server lets it (flow control) until the stream closes or `giveUpMs` passes.
 */
function call(session: http2.ClientHttp2Session, bytes: Buffer, end: boolean, giveUpMs = 4000): Promise<Answer> {
  const stream = session.request({ ':method': 'POST', ':path': CHECK, 'content-type': 'application/grpc', te: 'trailers' });
  stream.on('error', () => {});
  let grpcStatus: string | undefined;
  let answeredAt = -1;
  let written = 0;
  const answered = () => {
    if (answeredAt < 0) answeredAt = Date.now();
  };
  stream.on('response', (h) => {
    answered();
    if (h['grpc-status'] !== undefined) grpcStatus = String(h['grpc-status']);
  });
  stream.on('trailers', (t) => (grpcStatus = String(t['grpc-status'])));
  stream.resume();
  if (end) stream.end(bytes);
  else {
    stream.write(bytes);
    written += bytes.length;
    const chunk = Buffer.alloc(64 * 1024);
    const pump = () => {
      while (!stream.closed && !stream.destroyed) {
        written += chunk.length;
        if (!stream.write(chunk)) return void stream.once('drain', pump);
      }
    };
    pump();
  }
  return new Promise<Answer>((resolve) => {
    const t = setTimeout(() => {
      resolve({ grpcStatus, rstCode: -2, closeAfterAnswerMs: answeredAt < 0 ? -1 : Date.now() - answeredAt, written });
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }, giveUpMs);
    stream.once('close', () => {
      clearTimeout(t);
      resolve({ grpcStatus, rstCode: stream.rstCode ?? -1, closeAfterAnswerMs: answeredAt < 0 ? -1 : Date.now() - answeredAt, written });
    });
  });
}

const truncated = () => Buffer.concat([prefix(100), Buffer.alloc(50)]);
const compressedNoEncoding = () => Buffer.concat([prefix(10, 1), Buffer.alloc(10)]);
const oversize = () => Buffer.concat([prefix(64 * MiB), Buffer.alloc(MiB)]);

function expectResetEarly(a: Answer): void {
  expect(a.grpcStatus).toBe('8');
  expect(a.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
  expect(a.closeAfterAnswerMs).toBeGreaterThanOrEqual(0);
  expect(a.closeAfterAnswerMs).toBeLessThan(2000);
  // the client is told to stop: it cannot have pushed much past the windows the server granted
  expect(a.written).toBeLessThan(24 * MiB);
}

describe('streams answered early are reset with NO_ERROR', () => {
  it('an oversize message on a fresh connection', async () => {
    const s = await connect();
    try {
      expectResetEarly(await call(s, oversize(), false));
    } finally {
      s.destroy();
    }
  });

  it('malformed streams, then oversize ones, on one connection and on fresh connections after', { timeout: 60_000 }, async () => {
    const s = await connect();
    try {
      for (let round = 0; round < 3; round++) {
        const t = await call(s, truncated(), true);
        expect(['12', '13']).toContain(t.grpcStatus);
        const c = await call(s, compressedNoEncoding(), true);
        expect(c.grpcStatus).toBeDefined(); // h2: UNIMPLEMENTED; grpc-js reads the flag as identity
        expectResetEarly(await call(s, oversize(), false));
      }
      // concurrently too
      const mixed = await Promise.all([call(s, truncated(), true), call(s, compressedNoEncoding(), true), call(s, oversize(), false)]);
      expectResetEarly(mixed[2]!);
      expect((await call(s, checkFrame, true)).grpcStatus).toBe('0');
    } finally {
      s.destroy();
    }
    for (let i = 0; i < 3; i++) {
      const fresh = await connect();
      try {
        expectResetEarly(await call(fresh, oversize(), false));
        expect((await call(fresh, checkFrame, true)).grpcStatus).toBe('0');
      } finally {
        fresh.destroy();
      }
    }
  });
});
