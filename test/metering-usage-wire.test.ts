/**
 * Usage cannot be switched off, over the wire on both gRPC transports: a streamed chat body of 9 MiB
 * (the most the shipped envoy.yaml buffers) padded with whitespace comes back rewritten to ask for
 * usage — an answer larger than the h2 transport's 4 MiB send backlog bound is still sent whole (it
 * used to cancel the stream, and Envoy, failing open, passed the body on unchanged) — and a body
 * with `stream_options` twice is answered with an immediate 400 `USAGE_NOT_GUARANTEED`. And the
 * owned-response record metering writes: the first account keeps it, with its time to live.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMeteringPair, type MeteringPair } from './helpers/metering-pair.ts';
import { ownedRecorder } from '../src/metering/wiring.ts';
import { OWNED_TTL_SECONDS } from '../src/schema/owned.ts';
import { schema } from '../src/schema/redis-schema.ts';
import type { TestSidecar } from './helpers/sidecars.ts';
import { fixture } from './unit/metering-helpers.ts';
import { FakeClock } from './unit/fake-clock.ts';

let pair: MeteringPair | undefined;

beforeAll(async () => {
  pair = await startMeteringPair();
}, 60_000);

afterAll(async () => {
  await pair?.close();
});

describe.each([
  ['h2', () => pair!.h2],
  ['grpc-js', () => pair!.gjs],
])('on the %s transport', (_n, sc: () => TestSidecar) => {
  it('a 9 MiB streamed chat body is rewritten to ask for usage, the answer sent whole', async () => {
    const a = await pair!.newAccount(1_000_000);
    const body = `{"model":"gpt-4o","stream":true,${' '.repeat(9 * 1024 * 1024 - 80)}"messages":[]}`;
    const r = await pair!.client(sc()).exchange({
      path: '/v1/chat/completions',
      identity: { keyId: a.keyId, accountId: a.account },
      requestBody: body,
      responseHeaders: { 'content-type': 'text/event-stream' },
      chunks: [fixture('openai-chat-stream.sse')],
    });
    expect(r.code).toBe(0);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const changed = (r.answers[1] as any).request_body.response.body_mutation.body as Buffer;
    expect(changed.length).toBe(Buffer.byteLength(body) + '"stream_options":{"include_usage":true},'.length);
    expect(JSON.parse(changed.toString()).stream_options).toEqual({ include_usage: true });
  }, 60_000);

  it('stream_options twice: an immediate 400 USAGE_NOT_GUARANTEED, the stream ended, nothing booked', async () => {
    const a = await pair!.newAccount(1_000_000);
    const r = await pair!.client(sc()).exchange({
      path: '/v1/chat/completions',
      identity: { keyId: a.keyId, accountId: a.account },
      requestBody: '{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":false},"stream_options":{"include_usage":false},"messages":[]}',
      responseHeaders: { 'content-type': 'text/event-stream' },
      chunks: [fixture('openai-chat-stream.sse')],
    });
    expect(r.code).toBe(0);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const ir = (r.answers[1] as any).immediate_response;
    expect(ir.status.code).toBe(400);
    expect(JSON.parse(Buffer.from(ir.body).toString()).error.code).toBe('USAGE_NOT_GUARANTEED');
    await new Promise((res) => setTimeout(res, 400));
    expect(await pair!.balance(a.account)).toBe(1_000_000);
  });
});

describe('the owned-response record', () => {
  it('written with its fields and time to live; another account never takes it over; the owner refreshes it', async () => {
    const s = schema();
    const record = ownedRecorder(pair!.db, s, new FakeClock(1_700_000_000_000));
    const key = s.owned('openai', 'resp_owned1');
    await record({ provider: 'openai', id: 'resp_owned1', account: 'acct-a', keyId: 'key_a' });
    const first = await pair!.db.hgetall(key);
    expect(first).toMatchObject({ account: 'acct-a', key_id: 'key_a' });
    expect(first.created_at).toBe('1700000000000');
    expect(await pair!.db.ttl(key)).toBeGreaterThan(OWNED_TTL_SECONDS - 60);
    await record({ provider: 'openai', id: 'resp_owned1', account: 'acct-b', keyId: 'key_b' });
    expect(await pair!.db.hgetall(key)).toEqual(first);
    await pair!.db.expire(key, 100);
    await record({ provider: 'openai', id: 'resp_owned1', account: 'acct-a', keyId: 'key_a2' });
    expect(await pair!.db.hgetall(key)).toEqual(first);
    expect(await pair!.db.ttl(key)).toBeGreaterThan(OWNED_TTL_SECONDS - 60);
  });
});
