/**
 * A client generated from the served `/openapi.json` by a standard generator
 * (swagger-typescript-api, fetch client) type-checks under strict TypeScript and runs the whole
 * management flow against a real server and Redis: create (idempotent), list, reveal, restrict,
 * roll, revoke, disable/enable, audit, a spend limit, a credit, a usage record and its export. Generated at test time into a temp dir, so it is never stale.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateApi } from 'swagger-typescript-api';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { startConsole, type ConsoleServer } from '../src/console-api/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

let redis: RedisServer;
let srv: ConsoleServer;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keygate-client-'));
  redis = await startRedis();
  srv = await startConsole(loadConsoleApiConfig({ port: 0, redisUrl: redis.url }, { KEYGATE_CONSOLE_HOST: '127.0.0.1' }), createLogger('silent'), {
    revealKey: `k1:${randomBytes(32).toString('base64')}`,
  });
}, 60_000);

afterAll(async () => {
  await srv?.close();
  if (redis) await destroyRedis(redis);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const FLOW = `
import { Api } from './Api.ts';

export async function flow(baseUrl: string, token: string, account: string) {
  const api = new Api({ baseUrl, baseApiParams: { headers: { authorization: \`Bearer \${token}\` } } });
  const body = { name: 'generated', models: ['openai/*'] };
  const created = (await api.v1.createKey(account, body, { headers: { 'idempotency-key': 'gen-1' } })).data;
  const replayed = (await api.v1.createKey(account, body, { headers: { 'idempotency-key': 'gen-1' } })).data;
  const listed = (await api.v1.listKeys(account)).data.keys.map((k) => k.id);
  const revealed: string = (await api.v1.revealKey(created.id)).data.key;
  const restricted = (await api.v1.updateKey(created.id, { models: ['openai/gpt-4o-mini'], expires_at: '2999-01-01' })).data;
  const rolled = (await api.v1.rollKey(created.id, { grace_seconds: 60 })).data;
  const revoked = (await api.v1.revokeKey(rolled.id)).data;
  const disabled = (await api.v1.disableAccount(account)).data;
  const enabled = (await api.v1.enableAccount(account)).data;
  const audit = (await api.v1.listAudit({ account, limit: 10 })).data.events.map((e) => e.action);
  const limited = (await api.v1.updateKey(rolled.old.id, { limit: { amount_micros: 2_000, period: 'day' } })).data.limit;
  const credited: boolean = (await api.v1.creditAccount(account, { amount_micros: 5_000, reference: 'inv-gen' })).data.credited;
  const booked = (await api.v1.recordUsage({ key_id: rolled.old.id, amount_micros: 1_500, request_id: 'gen-req-1', model: 'openai/gpt-4o-mini' })).data;
  const wallet = (await api.v1.getAccount(account)).data.wallet;
  const spend = (await api.v1.getKey(rolled.old.id)).data.spend;
  const since = new Date(Date.now() - 3_600_000).toISOString();
  const exported = (await api.v1.exportUsage({ account, since })).data.entries.map((e) => [e.request_id, e.amount_micros]);
  let notFound = 0;
  try {
    await api.v1.getKey('key_000000000000000000000000');
  } catch (res) {
    notFound = (res as Response).status;
  }
  return {
    created: { id: created.id, key: created.key },
    replayed: { id: replayed.id, key: replayed.key },
    listed,
    revealed,
    restricted: { models: restricted.models, expires_at: restricted.expires_at },
    rolled: { from: rolled.rolled_from, oldTo: rolled.old.rolled_to, models: rolled.models },
    revoked: revoked.status,
    statuses: [disabled.status, enabled.status],
    audit,
    notFound,
    money: { limited, credited, booked: [booked.booked, booked.balance_micros], wallet, spend, exported },
  };
}
`;

function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: dir, timeout: 120_000 }, (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 99) : 0, out: stdout + stderr }));
  });
}

it('a generated client type-checks and runs create, list, reveal, restrict, roll, revoke, disable, enable, audit, limit, credit, usage', async () => {
  const spec = await (await fetch(`http://127.0.0.1:${srv.port}/openapi.json`)).json();
  await generateApi({ spec, output: dir, fileName: 'Api.ts', httpClientType: 'fetch', enumStyle: 'union', silent: true });
  writeFileSync(join(dir, 'flow.ts'), FLOW);
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', allowImportingTsExtensions: true, lib: ['es2023', 'dom'], types: [] },
      files: ['Api.ts', 'flow.ts'],
    }),
  );
  const tsc = fileURLToPath(new URL('../node_modules/.bin/tsc', import.meta.url));
  const typecheck = await run(tsc, ['-p', 'tsconfig.json']);
  expect(typecheck.out).toBe('');
  expect(typecheck.code).toBe(0);

  const { token } = await srv.console.createToken({ name: 'generated client', account: null }, CLI_ACTOR);
  const account = `gen-${randomBytes(4).toString('hex')}`;
  const script = `import(${JSON.stringify(join(dir, 'flow.ts'))}).then((m) => m.flow(${JSON.stringify(`http://127.0.0.1:${srv.port}`)}, process.env.T, ${JSON.stringify(account)})).then((r) => console.log(JSON.stringify(r)))`;
  const res = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, env: { T: token, PATH: process.env.PATH }, timeout: 60_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(stderr)) : resolve(stdout),
    ),
  );
  const r = JSON.parse(res);
  expect(r.replayed).toEqual(r.created);
  expect(r.listed).toEqual([r.created.id]);
  expect(r.revealed).toBe(r.created.key);
  expect(r.restricted).toEqual({ models: ['openai/gpt-4o-mini'], expires_at: '2999-01-01T00:00:00.000Z' });
  expect(r.rolled).toEqual({ from: r.created.id, oldTo: expect.stringMatching(/^key_/), models: ['openai/gpt-4o-mini'] });
  expect(r.revoked).toBe('revoked');
  expect(r.statuses).toEqual(['disabled', 'active']);
  expect(r.audit).toEqual(['enable', 'disable', 'revoke', 'roll', 'update', 'reveal', 'reveal', 'create']); // the replayed create is a reveal too
  expect(r.notFound).toBe(404);
  expect(r.money).toEqual({
    limited: { amount_micros: 2_000, period: 'day' },
    credited: true,
    booked: [true, 3_500],
    wallet: { enforced: true, balance_micros: 3_500, exists: true, rule: 'credited' },
    spend: { period: 'day', period_micros: 1_500, total_micros: 1_500 },
    exported: [['gen-req-1', 1_500]],
  });
}, 120_000);
