/**
 * The endpoint rule (row 8, docs/endpoints.md) through a real sidecar on a real redis-server, over
 * gRPC (Envoy's Check, with the route's `protocol`) and over HTTP authz: each class of each family,
 * the red-team cases of issue 33 (another account's stored response, the shared files of every
 * tenant, a batch never billed, a continuation of another account's response), the rule's place
 * before the model rule, billing `external`, and the per-key refusal counts.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { OwnedField } from '../src/schema/owned.ts';
import { schema } from '../src/schema/redis-schema.ts';
import type { Family } from '../src/core/families/index.ts';
import { deniedBody, type CheckResponseMsg } from './helpers/envoy-client.ts';
import { json, send } from './helpers/http-client.ts';
import { startStack, waitFor, type Stack } from './helpers/sidecars.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const s = schema();
let stack: Stack;
let db: Redis;
let kc: KeyConsole;
let mine: { key: string; account: string };
let other: { key: string; account: string };
let restricted: { key: string; account: string };

beforeAll(async () => {
  stack = await startStack({ stalenessBoundMs: 10_000 });
  db = stack.db;
  kc = new KeyConsole({ redis: stack.redis.url, revealKey: REVEAL });
  const make = async (account: string, models?: string[]) => ({ key: (await kc.createKey({ account, name: 'e', ...(models ? { models } : {}) })).key, account });
  mine = await make('acct-mine');
  other = await make('acct-other');
  restricted = await make('acct-restricted', ['openai/gpt-4o']);
  // What metering writes when it sees a background response created (src/schema/owned.ts).
  await db.hset(s.owned('openai', 'resp_mine'), OwnedField.account, 'acct-mine', OwnedField.createdAt, String(Date.now()), OwnedField.keyId, 'key_x');
}, 60_000);

afterAll(async () => {
  await kc?.close();
  await stack?.close();
});

interface Answer {
  readonly status: number;
  readonly code: string | null;
  readonly message: string | null;
}

/** The request over gRPC (the route's protocol as Envoy sends it). */
async function grpc(family: Family, key: string, method: string, path: string, body?: string): Promise<Answer> {
  const res: CheckResponseMsg = await stack.client.check({ method, path, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, contextExtensions: { protocol: family }, body });
  if (res.ok_response) return { status: 200, code: null, message: null };
  const b = deniedBody(res);
  return { status: res.denied_response!.status!.code!, code: codeOf(family, b), message: b.error.message };
}

/** The same over HTTP authz (Envoy http_service: the original path after /authz, the family in x-keygate-protocol). */
async function http(family: Family, key: string, method: string, path: string, body?: string): Promise<Answer> {
  const res = await send(stack.sidecar.httpPort, { method, path: `/authz${path}`, headers: { authorization: `Bearer ${key}`, 'x-keygate-protocol': family, 'content-type': 'application/json' }, body });
  if (res.status === 200) return { status: 200, code: null, message: null };
  const b = json(res);
  return { status: res.status, code: codeOf(family, b), message: b.error.message };
}

function codeOf(family: Family, b: any): string {
  return family === 'google' ? b.error.details[0].reason : b.error.code;
}

const transports = [
  ['gRPC', grpc],
  ['HTTP authz', http],
] as const;

const CLASSES: Array<[Family, string, string, string | undefined, 'allow' | 'stateful' | 'unbillable' | 'unknown']> = [
  ['openai', 'POST', '/openai/v1/chat/completions', '{"model":"gpt-4o","messages":[]}', 'allow'],
  ['openai', 'POST', '/openai/v1/responses', '{"model":"gpt-4o","input":"hi"}', 'allow'],
  ['openai', 'GET', '/openai/v1/models', undefined, 'allow'],
  ['openai', 'GET', '/openai/v1/files', undefined, 'stateful'],
  ['openai', 'GET', '/openai/v1/chat/completions', undefined, 'stateful'],
  ['openai', 'GET', '/openai/v1/vector_stores', undefined, 'stateful'],
  ['openai', 'POST', '/openai/v1/batches', '{"input_file_id":null,"endpoint":"/v1/chat/completions"}', 'unbillable'],
  ['openai', 'POST', '/openai/v1/audio/speech', '{"model":"tts-1","input":"hi","voice":"alloy"}', 'unbillable'],
  ['openai', 'GET', '/openai/v1/no/such/thing', undefined, 'unknown'],
  ['anthropic', 'POST', '/anthropic/v1/messages', '{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[]}', 'allow'],
  ['anthropic', 'POST', '/anthropic/v1/messages/count_tokens', '{"model":"claude-sonnet-4-5","messages":[]}', 'allow'],
  ['anthropic', 'GET', '/anthropic/v1/models', undefined, 'allow'],
  ['anthropic', 'GET', '/anthropic/v1/files', undefined, 'stateful'],
  ['anthropic', 'GET', '/anthropic/v1/messages/batches/msgbatch_1/results', undefined, 'stateful'],
  ['anthropic', 'POST', '/anthropic/v1/messages/batches', '{"requests":[]}', 'unbillable'],
  ['anthropic', 'POST', '/anthropic/v1/other', '{}', 'unknown'],
  ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:generateContent', '{"contents":[]}', 'allow'],
  ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:countTokens', '{"contents":[]}', 'allow'],
  ['google', 'GET', '/google/v1beta/models', undefined, 'allow'],
  ['google', 'GET', '/google/v1beta/files', undefined, 'stateful'],
  ['google', 'GET', '/google/v1beta/cachedContents', undefined, 'stateful'],
  ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:batchGenerateContent', '{"batch":{}}', 'unbillable'],
  ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:unknownMethod', '{}', 'unknown'],
];

describe.each(transports)('each class of each family over %s', (_name, call) => {
  it.each(CLASSES)('%s %s %s → %s', async (family, method, path, body, want) => {
    const a = await call(family, mine.key, method, path, body);
    if (want === 'allow') {
      expect(a).toEqual({ status: 200, code: null, message: null });
      return;
    }
    expect(a.status).toBe(403);
    expect(a.code).toBe('ENDPOINT_NOT_ALLOWED');
    // Which class refused, and what would open it.
    const [names, opens] = { stateful: ['class "stateful"', 'its own credential'], unbillable: ['class "unbillable"', 'billing is "external"'], unknown: ['not in the gateway\'s endpoint catalog', 'KEYGATE_ENDPOINTS'] }[want];
    expect(a.message).toContain(names);
    expect(a.message).toContain(opens);
  });
});

describe.each(transports)('the red-team cases of issue 33 over %s', (_name, call) => {
  it("another account's stored response is answered exactly like one that never existed; its owner gets it", async () => {
    const theirs = await call('openai', other.key, 'GET', '/openai/v1/responses/resp_mine');
    const never = await call('openai', other.key, 'GET', '/openai/v1/responses/resp_never_recorded');
    expect(theirs).toMatchObject({ status: 403, code: 'ENDPOINT_NOT_ALLOWED' });
    expect(never).toEqual(theirs);
    for (const [m, p] of [['GET', '/openai/v1/responses/resp_mine?stream=true'], ['POST', '/openai/v1/responses/resp_mine/cancel'], ['DELETE', '/openai/v1/responses/resp_mine'], ['GET', '/openai/v1/responses/resp_mine/input_items']] as const) {
      expect(await call('openai', other.key, m, p), `${m} ${p}`).toEqual(theirs);
      expect((await call('openai', mine.key, m, p)).status, `${m} ${p}`).toBe(200);
    }
  });

  it('/v1/files with an unrestricted key is refused (every tenant\'s files sit behind the shared credential)', async () => {
    expect(await call('openai', mine.key, 'GET', '/openai/v1/files')).toMatchObject({ status: 403, code: 'ENDPOINT_NOT_ALLOWED' });
    expect(await call('openai', mine.key, 'GET', '/openai/v1/files/file-abc/content')).toMatchObject({ status: 403, code: 'ENDPOINT_NOT_ALLOWED' });
  });

  it('a batch create is refused for a metered account (it would never be billed)', async () => {
    expect(await call('openai', mine.key, 'POST', '/openai/v1/batches', '{"endpoint":"/v1/chat/completions","completion_window":"24h"}')).toMatchObject({ status: 403, code: 'ENDPOINT_NOT_ALLOWED' });
  });

  it("previous_response_id of another account is refused like one never recorded; the owner's own continues", async () => {
    const body = (id: string) => JSON.stringify({ model: 'gpt-4o', input: 'go on', previous_response_id: id });
    const theirs = await call('openai', other.key, 'POST', '/openai/v1/responses', body('resp_mine'));
    expect(theirs).toMatchObject({ status: 403, code: 'ENDPOINT_NOT_ALLOWED' });
    expect(await call('openai', other.key, 'POST', '/openai/v1/responses', body('resp_never_recorded'))).toEqual(theirs);
    // The same message as a retrieval of an id it does not own.
    expect(theirs.message).toBe((await call('openai', other.key, 'GET', '/openai/v1/responses/resp_mine')).message);
    expect((await call('openai', mine.key, 'POST', '/openai/v1/responses', body('resp_mine'))).status).toBe(200);
    const dup = '{"model":"gpt-4o","previous_response_id":"resp_mine","previous_response_id":"resp_never_recorded"}';
    expect(await call('openai', mine.key, 'POST', '/openai/v1/responses', dup)).toEqual(theirs);
  });

  it('a file named in a Responses input is refused; so is a body cut short', async () => {
    const body = JSON.stringify({ model: 'gpt-4o', input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-abc' }] }] });
    expect(await call('openai', mine.key, 'POST', '/openai/v1/responses', body)).toMatchObject({ status: 403, code: 'ENDPOINT_NOT_ALLOWED' });
    expect(await call('openai', mine.key, 'POST', '/openai/v1/responses', '{"model":"gpt-4o","input":"hi"')).toMatchObject({ status: 400, code: 'USAGE_NOT_GUARANTEED' });
  });

  it('the endpoint rule comes before the model rule: a restricted key calling /v1/files gets ENDPOINT_NOT_ALLOWED', async () => {
    expect(await call('openai', restricted.key, 'GET', '/openai/v1/files')).toMatchObject({ status: 403, code: 'ENDPOINT_NOT_ALLOWED' });
    expect(await call('openai', restricted.key, 'POST', '/openai/v1/chat/completions', '{"model":"gpt-4o-mini"}')).toMatchObject({ status: 403, code: 'MODEL_NOT_ALLOWED' });
    expect((await call('openai', restricted.key, 'POST', '/openai/v1/chat/completions', '{"model":"openai/gpt-4o"}')).status).toBe(200);
  });
});

describe('owned records through the cache', () => {
  it('a cached "not owned" is dropped when metering writes the record: the next check opens it', async () => {
    const path = '/openai/v1/responses/resp_late';
    expect((await grpc('openai', mine.key, 'GET', path)).status).toBe(403);
    const misses = stack.sidecar.store.stats().misses;
    expect((await grpc('openai', mine.key, 'GET', path)).status).toBe(403);
    expect(stack.sidecar.store.stats().misses).toBe(misses); // the second answer came from the cache
    await db.hset(s.owned('openai', 'resp_late'), OwnedField.account, 'acct-mine');
    await waitFor(async () => (await grpc('openai', mine.key, 'GET', path)).status === 200, 'the owned record seen', 5_000);
    expect((await grpc('openai', other.key, 'GET', path)).code).toBe('ENDPOINT_NOT_ALLOWED');
  });
});

describe('account billing external opens unbillable endpoints', () => {
  it('set with the console, seen by the sidecar at the next check; metered closes them again', async () => {
    const k = await kc.createKey({ account: 'acct-router', name: 'r' });
    const batch = '{"endpoint":"/v1/chat/completions","completion_window":"24h"}';
    for (const [, call] of transports) expect((await call('openai', k.key, 'POST', '/openai/v1/batches', batch)).status).toBe(403);
    await kc.setAccountBilling('acct-router', 'external');
    expect((await kc.accountInfo('acct-router')).billing).toBe('external');
    await waitFor(async () => (await grpc('openai', k.key, 'POST', '/openai/v1/batches', batch)).status === 200, 'billing external seen');
    for (const [, call] of transports) {
      expect((await call('openai', k.key, 'POST', '/openai/v1/batches', batch)).status).toBe(200);
      expect((await call('google', k.key, 'POST', '/google/v1beta/models/gemini-2.5-flash:batchGenerateContent', '{"batch":{}}')).status).toBe(200);
      // Stateful endpoints stay closed: billing does not make another tenant's files safe.
      expect((await call('openai', k.key, 'GET', '/openai/v1/batches')).status).toBe(403);
    }
    await kc.setAccountBilling('acct-router', 'metered');
    await waitFor(async () => (await grpc('openai', k.key, 'POST', '/openai/v1/batches', batch)).status === 403, 'billing metered seen');
  });
});
