/**
 * Envoy cancels an ext_proc stream (RST_STREAM CANCEL) whenever its client goes away mid-response,
 * and ext_authz and ext_proc share one connection pool to keygate (envoy.yaml's `keygate` cluster).
 * node:http2's default rapid-reset guard (1,000 incoming resets in a burst, then 33 a second) would
 * close such a connection with GOAWAY — every metered stream on it unmetered and the Checks in
 * flight failed. keygate's h2 server allows the resets a busy gateway sends (GRPC_SERVER_LIMITS) and
 * stays bounded. Real sockets against an in-process sidecar.
 */
import * as http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authorizationService } from '../proto/envoy-protos.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { checkRequest } from './helpers/envoy-client.ts';
import { connect, frame, readFrames } from './helpers/h2-raw.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';

const CHECK = '/envoy.service.auth.v3.Authorization/Check';
const PROCESS = '/envoy.service.ext_proc.v3.ExternalProcessor/Process';
const headers = (path: string) => ({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });

let stack: Stack;
let valid: SeededKey;
let checkFrame: Buffer;

beforeAll(async () => {
  stack = await startStack();
  valid = await seedKey(stack.db, schema());
  checkFrame = frame(authorizationService().service.Check!.requestSerialize(checkRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${valid.key}` } })) as Buffer);
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

describe('cancelled streams on one connection', () => {
  it('3,000 cancelled ext_proc streams, 1,000 a second, leave the connection serving Checks', { timeout: 30_000 }, async () => {
    const session = await connect(stack.sidecar.grpcPort);
    let goaway = false;
    session.on('goaway', () => (goaway = true));
    try {
      for (let wave = 0; wave < 6; wave++) {
        const started = Date.now();
        const closes: Promise<unknown>[] = [];
        for (let i = 0; i < 500; i++) {
          const s = session.request(headers(PROCESS));
          s.on('error', () => {});
          closes.push(new Promise((r) => s.once('close', r)));
          s.close(http2.constants.NGHTTP2_CANCEL);
        }
        await Promise.all(closes);
        await new Promise((r) => setTimeout(r, Math.max(0, 500 - (Date.now() - started))));
      }
      expect(goaway).toBe(false);
      expect(session.closed || session.destroyed).toBe(false);
      const s = session.request(headers(CHECK));
      const reader = readFrames(s);
      s.end(checkFrame);
      expect(await reader.status).toBe('0');
    } finally {
      session.destroy();
    }
  });

  it('a peer resetting past the bound (40,000 as fast as it can) is cut off with GOAWAY (rapid reset stays refused)', { timeout: 30_000 }, async () => {
    const session = await connect(stack.sidecar.grpcPort);
    const goaway = new Promise<number>((r) => session.once('goaway', (code: number) => r(code)));
    try {
      for (let i = 0; i < 40_000 && !session.closed && !session.destroyed; i++) {
        const s = session.request(headers(PROCESS));
        s.on('error', () => {});
        s.close(http2.constants.NGHTTP2_CANCEL);
        if (i % 500 === 499) await new Promise((r) => setImmediate(r));
      }
      expect(await Promise.race([goaway, new Promise((r) => setTimeout(() => r('none'), 10_000))])).not.toBe('none');
      // Everyone else is still answered.
      expect((await stack.client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${valid.key}` } })).status.code).toBe(0);
    } finally {
      session.destroy();
    }
  });
});
