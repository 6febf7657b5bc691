/**
 * The metering service's bounds over real sockets: the stream bound (a stream past it is ended at
 * once with OK, unmetered, counted), the lifetime bound (a stream left open is ended with OK and
 * booked from what was seen), and garbage frames (ended with OK; the sidecar keeps metering).
 */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROCESS_PATH } from '../src/transport/envoy/services/ext-proc.ts';
import { ExtProcClient } from './helpers/ext-proc-client.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startTestSidecar, waitFor, type TestSidecar } from './helpers/sidecars.ts';
import { fixture } from './unit/metering-helpers.ts';
import { schema } from '../src/schema/redis-schema.ts';

const s = schema();
let redis: RedisServer | undefined;
let sc: TestSidecar | undefined;
let c: ExtProcClient | undefined;
const identity = () => ({ keyId: `key_${randomBytes(10).toString('hex')}`, accountId: `acct-${randomBytes(4).toString('hex')}` });

beforeAll(async () => {
  redis = await startRedis();
  sc = await startTestSidecar(redis.url, { meterFlushMs: 50, meterMaxStreams: 2, meterMaxStreamMs: 1000 });
  c = new ExtProcClient(`127.0.0.1:${sc.sidecar.grpcPort}`);
}, 60_000);

afterAll(async () => {
  c?.close();
  await sc?.close();
  if (redis) await destroyRedis(redis);
});

const metric = async (name: string) => (await sc!.sidecar.metrics.registry.getSingleMetricAsString(name)) ?? '';

describe('metering bounds', () => {
  it('past the stream bound a stream is ended at once with OK (not metered, counted overload); the lifetime bound ends the held ones with OK', async () => {
    const id1 = identity();
    const id2 = identity();
    const open = (id: { keyId: string; accountId: string }) =>
      c!.exchange({ path: '/v1/chat/completions', identity: id, responseHeaders: { 'content-type': 'application/json' }, chunks: [fixture('openai-chat.json')], complete: true, requestId: `life-${id.keyId}` });
    // two streams held open with raw HTTP/2 (no message sent)
    const session = connect(`http://127.0.0.1:${sc!.sidecar.grpcPort}`);
    session.on('error', () => {});
    const held = [0, 1].map(() => {
      const st = session.request({ ':method': 'POST', ':path': PROCESS_PATH, 'content-type': 'application/grpc', te: 'trailers' });
      st.on('error', () => {});
      const done = new Promise<string | undefined>((resolve) => st.on('trailers', (t) => resolve(String(t['grpc-status']))));
      st.on('data', () => {});
      return { st, done, at: Date.now() };
    });
    await waitFor(() => sc!.sidecar.meter!.openStreams === 2, 'two open streams', 5000);
    const refused = await open(id1);
    expect(refused.code).toBe(0);
    expect(refused.answers).toEqual([]);
    expect(await metric('keygate_metering_unbooked_responses_total')).toMatch(/reason="overload"} [1-9]/);
    // the lifetime bound (1 s) ends both held streams with OK
    const codes = await Promise.all(held.map((h) => h.done));
    expect(codes).toEqual(['0', '0']);
    for (const h of held) expect(Date.now() - h.at).toBeGreaterThanOrEqual(900);
    session.close();
    // room again: metered and booked
    await open(id2);
    await waitFor(async () => (await sc!.sidecar.metrics.registry.getSingleMetricAsString('keygate_metering_bookings_total'))!.includes('result="booked"} 1'), 'the booking', 5000);
    expect(await redis!.client().xlen(s.usageLog(id2.accountId))).toBe(1);
  }, 30_000);

  it('garbage frames end the stream with OK, and the sidecar goes on metering', async () => {
    const session = connect(`http://127.0.0.1:${sc!.sidecar.grpcPort}`);
    session.on('error', () => {});
    for (let i = 0; i < 20; i++) {
      const st = session.request({ ':method': 'POST', ':path': PROCESS_PATH, 'content-type': 'application/grpc', te: 'trailers' });
      st.on('error', () => {});
      st.on('data', () => {});
      const junk = randomBytes(1 + (i * 37) % 300);
      const frame = Buffer.alloc(5 + junk.length);
      frame.writeUInt32BE(junk.length, 1);
      junk.copy(frame, 5);
      // the documented outcome: ended with gRPC OK (in the trailers, or trailers-only headers), never a reset
      const status = new Promise<string>((resolve) => {
        st.on('response', (h) => h['grpc-status'] !== undefined && resolve(String(h['grpc-status'])));
        st.on('trailers', (t) => resolve(String(t['grpc-status'])));
        st.on('close', () => resolve(`closed without a status (rst ${st.rstCode})`));
      });
      st.end(frame);
      expect(await status, `frame ${i}`).toBe('0');
    }
    session.close();
    const id = identity();
    const r = await c!.exchange({ path: '/v1/chat/completions', identity: id, responseHeaders: { 'content-type': 'application/json' }, chunks: [fixture('openai-chat.json')] });
    expect(r.code).toBe(0);
    await waitFor(async () => (await redis!.client().xlen(s.usageLog(id.accountId))) === 1, 'the booking', 5000);
  });
});
