/** Every console operation is seen by a running sidecar on its very next Check. */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { deniedBody, type CheckResponseMsg, type EnvoyClient } from './helpers/envoy-client.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';

let stack: Stack;
let client: EnvoyClient;
let kc: KeyConsole;

beforeAll(async () => {
  stack = await startStack();
  client = stack.client;
  kc = new KeyConsole({ redis: stack.redis.url, revealKey: `base64:${randomBytes(32).toString('base64')}` });
});

afterAll(async () => {
  await kc?.close();
  await stack?.close();
});

const check = (key: string, model = 'openai/gpt-4o') =>
  client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model, messages: [] }) });

function code(res: CheckResponseMsg): string {
  return res.denied_response ? (deniedBody(res).error.code as string) : 'ALLOW';
}

const acct = () => `acct-${randomBytes(4).toString('hex')}`;

describe('console writes → the next request', () => {
  it('a created key is accepted at once; a revoked key is refused on the very next Check', async () => {
    const c = await kc.createKey({ account: acct(), name: 'live' });
    for (let i = 0; i < 3; i++) expect(code(await check(c.key))).toBe('ALLOW');
    await kc.revokeKey(c.id);
    expect(code(await check(c.key))).toBe('INVALID_API_KEY');
    expect(code(await check(c.key))).toBe('INVALID_API_KEY');
  });

  it('disable → USER_BLOCKED on the next Check; enable → allowed on the next Check', async () => {
    const c = await kc.createKey({ account: acct(), name: 'acct' });
    expect(code(await check(c.key))).toBe('ALLOW');
    await kc.disableAccount(c.record.account);
    expect(code(await check(c.key))).toBe('USER_BLOCKED');
    await kc.enableAccount(c.record.account);
    expect(code(await check(c.key))).toBe('ALLOW');
  });

  it('restricting and unrestricting models take effect on the next Check', async () => {
    const c = await kc.createKey({ account: acct(), name: 'models' });
    expect(code(await check(c.key, 'openai/gpt-4o'))).toBe('ALLOW');
    await kc.updateKey(c.id, { models: ['openai/gpt-4o-mini'] });
    expect(code(await check(c.key, 'openai/gpt-4o'))).toBe('MODEL_NOT_ALLOWED');
    expect(code(await check(c.key, 'openai/gpt-4o-mini'))).toBe('ALLOW');
    await kc.updateKey(c.id, { models: null });
    expect(code(await check(c.key, 'openai/gpt-4o'))).toBe('ALLOW');
  });

  it('an expiry set by update takes effect; removing it restores the key', async () => {
    const c = await kc.createKey({ account: acct(), name: 'expiring' });
    const soon = Date.now() + 1500;
    await kc.updateKey(c.id, { expiresAt: soon });
    await new Promise((r) => setTimeout(r, Math.max(0, soon - Date.now()) + 50));
    expect(code(await check(c.key))).toBe('API_KEY_EXPIRED');
    await kc.updateKey(c.id, { expiresAt: null });
    expect(code(await check(c.key))).toBe('ALLOW');
  });
});
