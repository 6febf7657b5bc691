/**
 * Usage cannot be switched off, at the Check too (SPEC 15): where the Check holds the whole body of
 * an OpenAI chat or completions request, a body metering could not make ask for its usage (`stream`
 * or `stream_options` twice, not JSON, not an object) is refused there, 400 `USAGE_NOT_GUARANTEED`
 * in OpenAI's shape with metering's own reason, before anything goes upstream; over gRPC (Envoy's
 * Check) and HTTP authz, through a real sidecar on a real redis-server. Bodies metering rewrites
 * (a stream without `stream_options`) pass; a body cut short by the Check's limit is left to
 * metering on completions (it may get it whole); requests without a body are untouched.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { refusedMessage } from '../src/core/include-usage.ts';
import { deniedBody, type CheckResponseMsg } from './helpers/envoy-client.ts';
import { json, send } from './helpers/http-client.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
let stack: Stack;
let kc: KeyConsole;
let key: string;
let restricted: string;

beforeAll(async () => {
  stack = await startStack({ stalenessBoundMs: 10_000 });
  kc = new KeyConsole({ redis: stack.redis.url, revealKey: REVEAL });
  key = (await kc.createKey({ account: 'acct-usage', name: 'u' })).key;
  restricted = (await kc.createKey({ account: 'acct-usage', name: 'r', models: ['openai/gpt-4o'] })).key;
}, 60_000);

afterAll(async () => Promise.all([kc?.close(), stack?.close()]));

/** What the Check answered: 200, or the refusal's status, code and message. */
type Answer = Readonly<{ status: number; code: string | null; message: string | null }>;

async function grpc(k: string, path: string, body: string | undefined, partial = false): Promise<Answer> {
  const res: CheckResponseMsg = await stack.client.check({ method: 'POST', path, headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' }, contextExtensions: { protocol: 'openai' }, body, partial });
  if (res.ok_response) return { status: 200, code: null, message: null };
  const b = deniedBody(res);
  return { status: res.denied_response!.status!.code!, code: b.error.code, message: b.error.message };
}

async function http(k: string, path: string, body: string | undefined, partial = false): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${k}`, 'x-keygate-protocol': 'openai', 'content-type': 'application/json' };
  if (partial) headers['x-envoy-auth-partial-body'] = 'true';
  const res = await send(stack.sidecar.httpPort, { method: 'POST', path: `/authz${path}`, headers, body });
  if (res.status === 200) return { status: 200, code: null, message: null };
  const b = json(res);
  return { status: res.status, code: b.error.code, message: b.error.message };
}

const CHAT = '/openai/v1/chat/completions';
const COMPLETIONS = '/openai/v1/completions';

describe.each([
  ['gRPC', grpc],
  ['HTTP authz', http],
] as const)('over %s', (_name, call) => {
  it.each([
    [CHAT, '{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":false},"messages":[]}', 'duplicate-key', 'stream_options'],
    [CHAT, '{"model":"gpt-4o","stream":true,"stream":false,"messages":[]}', 'duplicate-key', 'stream'],
    [COMPLETIONS, '{"model":"gpt-3.5-turbo-instruct","stream":true,"stream_options":null,"stream_options":{"include_usage":false},"prompt":"hi"}', 'duplicate-key', 'stream_options'],
    [COMPLETIONS, '["not", "an", "object"]', 'not-object', undefined],
    [COMPLETIONS, '{"model":"gpt-3.5-turbo-instruct","prompt":', 'invalid-json', undefined],
  ] as const)('%s %s → 400 USAGE_NOT_GUARANTEED, naming why (metering\'s reason)', async (path, body, reason, dupKey) => {
    for (const k of [key, restricted]) {
      const a = await call(k, path, body);
      expect(a).toMatchObject({ status: 400, code: 'USAGE_NOT_GUARANTEED' });
      expect(a.message).toContain(refusedMessage({ reason, ...(dupKey ? { key: dupKey } : {}) }));
    }
  });

  it.each([
    [CHAT, '{"model":"gpt-4o","stream":true,"messages":[]}'], // metering adds stream_options
    [CHAT, '{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":false},"messages":[]}'], // metering sets it
    [CHAT, '{"model":"gpt-4o","messages":[]}'],
    [COMPLETIONS, '{"model":"gpt-3.5-turbo-instruct","stream":true,"prompt":"hi"}'],
  ])('%s %s → allowed (metering makes it ask for usage)', async (path, body) => {
    expect(await call(key, path, body)).toEqual({ status: 200, code: null, message: null });
  });

  it('a completions body cut short by the Check\'s limit is left to metering (it may receive it whole); other endpoints are not asked', async () => {
    expect((await call(key, COMPLETIONS, '{"model":"gpt-3.5-turbo-instruct","stream":true,"stream":true', true)).status).toBe(200);
    // embeddings and Responses are not chat or completions: the stream rule does not apply there
    expect((await call(key, '/openai/v1/embeddings', '{"model":"text-embedding-3-small","input":"a","stream":1,"stream":2}')).status).toBe(200);
  });
});

describe('KEYGATE_METER_FORCE_USAGE=false (the operator\'s choice)', () => {
  it('the Check does not refuse either: metering would pass the body on unchanged', async () => {
    const off = await startStack({ meterForceUsage: false });
    const offKc = new KeyConsole({ redis: off.redis.url, revealKey: REVEAL });
    try {
      const k = (await offKc.createKey({ account: 'acct-off', name: 'o' })).key;
      const res = await off.client.check({ method: 'POST', path: CHAT, headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' }, contextExtensions: { protocol: 'openai' }, body: '{"model":"gpt-4o","stream":true,"stream":false,"messages":[]}' });
      expect(res.ok_response).toBeDefined();
    } finally {
      await offKc.close();
      await off.close();
    }
  }, 60_000);
});
