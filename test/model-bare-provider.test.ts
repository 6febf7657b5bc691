/**
 * KEYGATE_BARE_MODEL_PROVIDER: the operator's meaning of a model name without a provider at each
 * entry family (off by default). Through a real sidecar over gRPC on a real Redis: off, a key
 * limited to `openai/gpt-4o-mini` refuses `gpt-4o-mini` at the OpenAI entry and says which names it
 * accepts and what to send; on (`openai=openai`), it allows it; keys listing bare names keep working.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { KeyConsole } from '../src/console/service.ts';
import { modelDeny } from '../src/core/decision.ts';
import { readModel } from '../src/core/model/index.ts';
import { deniedBody } from './helpers/envoy-client.ts';
import { outcomeOf, startStack, startTestSidecar, waitTracking, type Stack, type TestSidecar } from './helpers/sidecars.ts';

const chat = (key: string, model: string, path = '/v1/chat/completions', header = 'authorization') => ({
  path,
  headers: { [header]: header === 'authorization' ? `Bearer ${key}` : key, 'content-type': 'application/json', ...(header === 'x-api-key' ? { 'anthropic-version': '2023-06-01' } : {}) },
  body: JSON.stringify({ model, messages: [] }),
});

let stack: Stack; // off (the default)
let on: TestSidecar; // openai=openai, on the same store
let kc: KeyConsole;
let mini = '';
let bare = '';
let any = '';

beforeAll(async () => {
  stack = await startStack();
  on = await startTestSidecar(stack.redis.url, { bareModelProviders: 'openai=openai' });
  kc = new KeyConsole({ redis: stack.redis.url, revealKey: `k1:${Buffer.alloc(32, 7).toString('base64')}` });
  mini = (await kc.createKey({ account: 'bare', name: 'mini', models: ['openai/gpt-4o-mini'] })).key;
  bare = (await kc.createKey({ account: 'bare', name: 'bare', models: ['gpt-4o-mini'] })).key;
  any = (await kc.createKey({ account: 'bare', name: 'anthropic', models: ['anthropic/*', 'openai/*'] })).key;
  await waitTracking(stack);
}, 60_000);

afterAll(async () => {
  await kc?.close();
  await on?.close();
  await stack?.close();
});

describe('KEYGATE_BARE_MODEL_PROVIDER', () => {
  it('off (default): a bare name is not read as openai/…; the refusal names what the key accepts and what to send', async () => {
    const r = await stack.client.check(chat(mini, 'gpt-4o-mini'));
    expect(outcomeOf(r)).toBe('MODEL_NOT_ALLOWED');
    expect(deniedBody(r).error.message).toBe(
      'The model "gpt-4o-mini" is not among this key\'s allowed models; it accepts "openai/gpt-4o-mini". A name without a provider is not read as "openai/gpt-4o-mini" here: send "openai/gpt-4o-mini". To use another model, change the key\'s allowed models in the console.',
    );
    expect(outcomeOf(await stack.client.check(chat(mini, 'openai/gpt-4o-mini')))).toBe('allow');
    expect(outcomeOf(await stack.client.check(chat(bare, 'gpt-4o-mini')))).toBe('allow');
  });

  it('openai=openai: a bare name at the OpenAI entry is also openai/…; bare patterns and other entries are unchanged', async () => {
    const r = await on.client.check(chat(mini, 'gpt-4o-mini'));
    expect(outcomeOf(r)).toBe('allow');
    expect(outcomeOf(await on.client.check(chat(mini, 'GPT-4o-mini')))).toBe('allow');
    expect(outcomeOf(await on.client.check(chat(mini, 'gpt-4o')))).toBe('MODEL_NOT_ALLOWED');
    expect(outcomeOf(await on.client.check(chat(bare, 'gpt-4o-mini')))).toBe('allow');
    expect(outcomeOf(await on.client.check(chat(any, 'gpt-4o')))).toBe('allow');
    // The Anthropic entry: a bare name is Anthropic's, as before; not OpenAI's.
    expect(outcomeOf(await on.client.check(chat(mini, 'gpt-4o-mini', '/v1/messages', 'x-api-key')))).toBe('MODEL_NOT_ALLOWED');
    expect(outcomeOf(await on.client.check(chat(any, 'claude-sonnet-4', '/v1/messages', 'x-api-key')))).toBe('allow');
  });

  it('the model reader carries the alias only where the operator set one; the decision reports the qualified name', () => {
    const endpoints = loadConfig({ bareModelProviders: 'openai=openai,google=vertex' }, {}).modelEndpoints;
    const req = { family: 'openai' as const, method: 'POST', path: '/v1/chat/completions', contentType: 'application/json', body: '{"model":"gpt-4o-mini"}', bodyTruncated: false };
    expect(readModel({ ...req, endpoints })).toEqual({ kind: 'model', model: 'gpt-4o-mini', alias: 'openai/gpt-4o-mini' });
    expect(readModel(req)).toEqual({ kind: 'model', model: 'gpt-4o-mini' });
    expect(readModel({ ...req, endpoints, body: '{"model":"azure/gpt-4o-mini"}' })).toEqual({ kind: 'model', model: 'azure/gpt-4o-mini' });
    expect(modelDeny('key_0000000000000000', ['openai/gpt-4o-mini'], readModel({ ...req, endpoints }), 'openai')).toEqual({ model: 'openai/gpt-4o-mini' });
  });

  it('is refused at start unless it is family=provider', () => {
    for (const bad of ['openai', 'azure=openai', 'openai=', 'openai=a b', 'openai=a,openai=b']) {
      expect(() => loadConfig({}, { KEYGATE_BARE_MODEL_PROVIDER: bad }), bad).toThrow(ConfigError);
    }
    expect(loadConfig({}, {}).modelEndpoints.bareProviders).toBeUndefined();
    expect([...loadConfig({}, { KEYGATE_BARE_MODEL_PROVIDER: 'openai=OpenAI' }).modelEndpoints.bareProviders!]).toEqual([['openai', 'openai']]);
  });
});
