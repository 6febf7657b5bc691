/**
 * The operator's endpoint file (KEYGATE_ENDPOINTS, docs/endpoints.md): a malformed file stops
 * `keygate serve` with one line naming the setting and the fault (the real CLI); a good one adds and
 * reclassifies paths at a real sidecar.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedKey } from './helpers/seed.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';

const dir = mkdtempSync(join(tmpdir(), 'keygate-endpoints-'));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a malformed KEYGATE_ENDPOINTS stops serve with one line', () => {
  const serve = (path: string) =>
    spawnSync('bin/keygate', ['serve'], { env: { ...process.env, KEYGATE_NODE: process.execPath, KEYGATE_ENDPOINTS: path, REDIS_URL: 'redis://127.0.0.1:1' }, encoding: 'utf8', timeout: 20_000 });

  it.each([
    ['not YAML', 'endpoints: [ {', /not YAML/],
    ['no endpoints list', 'rows: []', /endpoints/],
    ['an unknown class', 'endpoints:\n  - { family: openai, method: GET, path: /v1/x, class: open }', /endpoints\.0\.class/],
    ['an unknown family', 'endpoints:\n  - { family: azure, method: GET, path: /v1/x, class: free }', /endpoints\.0\.family/],
    ['a path without a leading slash', 'endpoints:\n  - { family: openai, method: GET, path: v1/x, class: free }', /endpoints\.0\.path: must start with "\/"/],
    ['{**} not last', 'endpoints:\n  - { family: openai, method: GET, path: "/v1/{**}/x", class: stateful }', /last segment/],
    ['a metered row without its usage reader', 'endpoints:\n  - { family: openai, method: POST, path: /v1/x, class: metered, model: body }', /usage reader/],
    ['an owned row without {id}', 'endpoints:\n  - { family: openai, method: GET, path: /v1/x, class: owned }', /\{id\}/],
    ['a row twice', 'endpoints:\n  - { family: openai, method: GET, path: /v1/x, class: free }\n  - { family: openai, method: GET, path: /v1/x, class: stateful }', /listed twice/],
    ['an unknown field', 'endpoints:\n  - { family: openai, method: GET, path: /v1/x, class: free, klass: free }', /klass|unrecognized/i],
  ])('%s', (_name, text, want) => {
    const r = serve(file(`bad-${Math.random().toString(36).slice(2)}.yaml`, text));
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('KEYGATE_ENDPOINTS');
    expect(lines[0]).toMatch(want);
    expect(r.stdout).toBe('');
  });

  it('a file that is not there', () => {
    const r = serve(join(dir, 'missing.yaml'));
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toMatch(/KEYGATE_ENDPOINTS.*no such file/);
  });
});

describe('a good file adds and reclassifies paths', () => {
  let stack: Stack;
  let key: string;
  beforeAll(async () => {
    const path = file(
      'good.yaml',
      [
        '# an in-house route of the router, and vector stores opened to every key',
        'endpoints:',
        '  - { family: openai, method: POST, path: /v1/router/run, class: metered, model: body, usage: chat, refs: openai }',
        '  - { family: openai, method: GET, path: /v1/vector_stores, class: free }',
        '  - { family: anthropic, method: POST, path: /v1/messages, class: unbillable, model: body }',
      ].join('\n'),
    );
    stack = await startStack({ endpoints: path });
    key = (await seedKey(stack.db, schema(), { account: 'acct-op' })).key;
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  const check = async (protocol: string, method: string, path: string, body?: string) => {
    const res = await stack.client.check({ method, path, headers: { authorization: `Bearer ${key}` }, contextExtensions: { protocol }, body });
    return res.ok_response ? 'allow' : JSON.parse(res.denied_response!.body!).error.code;
  };

  it('opens the added path, with its references checked', async () => {
    expect(await check('openai', 'POST', '/openai/v1/router/run', '{"model":"x"}')).toBe('allow');
    expect(await check('openai', 'POST', '/openai/v1/router/run', '{"previous_response_id":"resp_x"}')).toBe('ENDPOINT_NOT_ALLOWED');
  });

  it('reclassifies a builtin row, and only that method and path', async () => {
    expect(await check('openai', 'GET', '/openai/v1/vector_stores')).toBe('allow');
    expect(await check('openai', 'GET', '/openai/v1/vector_stores/vs_1')).toBe('ENDPOINT_NOT_ALLOWED');
    expect(await check('anthropic', 'POST', '/anthropic/v1/messages', '{"model":"m"}')).toBe('ENDPOINT_NOT_ALLOWED');
  });
});
