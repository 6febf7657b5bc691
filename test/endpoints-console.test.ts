/**
 * The endpoint rule as the console shows it (docs/endpoints.md): account billing set with the real CLI
 * (`accounts update --billing`) and the management API (`PATCH /v1/accounts/{account}`), shown in
 * `accounts show` and `GET /v1/accounts/{account}`; the endpoint refusals counted per key by a real
 * sidecar and shown in `keys show` and the API's key view; the refusal metric.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { callApi, startTestConsole, type TestConsole } from './helpers/console-api.ts';
import { startStack, waitFor, type Stack } from './helpers/sidecars.ts';

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
let stack: Stack;
let con: TestConsole;
let kc: KeyConsole;

function keygate(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH!, HOME: process.env.HOME!, KEYGATE_NODE: process.execPath, REDIS_URL: stack.redis.url, KEYGATE_REVEAL_KEY: REVEAL };
  return new Promise((resolve) => {
    execFile(BIN, args, { env, timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr }));
  });
}

beforeAll(async () => {
  stack = await startStack();
  con = await startTestConsole(stack.redis.url, 'acct-page');
  kc = new KeyConsole({ redis: stack.redis.url, revealKey: REVEAL });
}, 60_000);

afterAll(async () => {
  await kc?.close();
  await con?.srv.close();
  await stack?.close();
});

describe('account billing', () => {
  it('accounts update --billing external, shown by accounts show (text and --json); metered again', async () => {
    const a = `acct-${randomBytes(4).toString('hex')}`;
    expect((await keygate(['accounts', 'show', a])).stdout).toContain('; billing metered.');
    const set = await keygate(['accounts', 'update', a, '--billing', 'external']);
    expect(set).toMatchObject({ code: 0, stdout: `Account ${a}: billing external.\n` });
    expect(JSON.parse((await keygate(['accounts', 'show', a, '--json'])).stdout)).toMatchObject({ id: a, billing: 'external' });
    expect((await keygate(['accounts', 'update', a, '--billing', 'metered'])).code).toBe(0);
    expect(JSON.parse((await keygate(['accounts', 'show', a, '--json'])).stdout).billing).toBe('metered');
  });

  it('a stored billing outside the two is CORRUPT to the console (the sidecar reads it as corrupt too)', async () => {
    const a = `acct-${randomBytes(4).toString('hex')}`;
    await kc.redis.hset(kc.schema.account(a), 'billing', 'prepaid');
    await expect(kc.accountInfo(a)).rejects.toMatchObject({ code: 'CORRUPT', message: `account ${a}: billing is neither metered nor external` });
  });

  it('a bad or missing --billing changes nothing, with one line', async () => {
    const a = `acct-${randomBytes(4).toString('hex')}`;
    const bad = await keygate(['accounts', 'update', a, '--billing', 'free']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/billing/);
    const none = await keygate(['accounts', 'update', a]);
    expect(none.code).not.toBe(0);
    expect(none.stderr.trim().split('\n')).toHaveLength(1);
    expect(await stack.db.hget(`keygate:v1:acct:${a}`, 'billing')).toBeNull();
  });

  it('PATCH /v1/accounts/{account} {billing} (operator token), shown by GET; an account token may not set it', async () => {
    const a = 'acct-page';
    const patched = await callApi(con.base, 'PATCH', `/v1/accounts/${a}`, { token: con.admin, body: { billing: 'external' } });
    expect(patched.status).toBe(200);
    expect(patched.body.billing).toBe('external');
    expect((await callApi(con.base, 'GET', `/v1/accounts/${a}`, { token: con.owner })).body.billing).toBe('external');
    expect((await callApi(con.base, 'PATCH', `/v1/accounts/${a}`, { token: con.owner, body: { billing: 'metered' } })).status).toBe(403);
    expect((await callApi(con.base, 'PATCH', `/v1/accounts/${a}`, { token: con.admin, body: { billing: 'free' } })).status).toBe(400);
    expect((await callApi(con.base, 'GET', `/v1/accounts/${a}`, { token: con.admin })).body.billing).toBe('external');
    expect((await callApi(con.base, 'PATCH', `/v1/accounts/${a}`, { token: con.admin, body: { billing: 'metered' } })).body.billing).toBe('metered');
  });
});

describe('refusals counted per key', () => {
  it('keys show and the API key view count the endpoint refusals; allowed requests and other denies do not', async () => {
    const k = await kc.createKey({ account: 'acct-page', name: 'counted' });
    const check = (method: string, path: string) => stack.client.check({ method, path, headers: { authorization: `Bearer ${k.key}` }, contextExtensions: { protocol: 'openai' } });
    await check('GET', '/openai/v1/files');
    await check('POST', '/openai/v1/batches');
    await check('GET', '/openai/v1/responses/resp_someone_elses');
    await check('GET', '/openai/v1/models'); // allowed: not a refusal
    await waitFor(async () => (await kc.getKeyView(k.id)).usage.refused.endpoint === 3, 'three refusals flushed', 10_000);
    const show = await keygate(['keys', 'show', k.id]);
    expect(show.stdout).toContain('refused: endpoint 3');
    const api = await callApi(con.base, 'GET', `/v1/keys/${k.id}`, { token: con.owner });
    expect(api.body.refused).toEqual({ endpoint: 3 });
    const metrics = await (await fetch(`http://127.0.0.1:${stack.sidecar.adminPort}/metrics`)).text();
    expect(metrics).toMatch(/keygate_endpoint_refusals_total\{refusal="stateful",family="openai"\} [1-9]/);
    expect(metrics).toMatch(/keygate_endpoint_refusals_total\{refusal="unbillable",family="openai"\} [1-9]/);
    expect(metrics).toMatch(/keygate_endpoint_refusals_total\{refusal="owned",family="openai"\} [1-9]/);
    expect(metrics).toMatch(/keygate_endpoint_refusals_total\{refusal="unknown",family="google"\} 0/);
  });
});
