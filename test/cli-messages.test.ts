/**
 * What the CLI says when something is wrong or worth knowing, run as a newcomer runs it
 * (`bin/keygate` as a child process, a real redis-server): --version, every setting in
 * `serve --help`, a taken port in one line, expired keys shown as such, a kill switch on an
 * account without keys, and console commands that ignore the sidecar's settings.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../src/config.ts';
import { KeyConsole } from '../src/console/service.ts';
import { destroyRedis, freePort, startRedis, type RedisServer } from './helpers/redis-server.ts';

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
const REVEAL = `base64:${randomBytes(32).toString('base64')}`;
let redis: RedisServer;
let kc: KeyConsole;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function keygate(args: string[], env: Record<string, string> = {}): Promise<Result> {
  const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/', KEYGATE_NODE: process.execPath, REDIS_URL: redis.url, KEYGATE_REVEAL_KEY: REVEAL };
  return new Promise((resolve) => {
    execFile(BIN, args, { env: { ...base, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  redis = await startRedis();
  kc = new KeyConsole({ redis: redis.url, revealKey: REVEAL });
});

afterAll(async () => {
  await kc?.close();
  await destroyRedis(redis);
});

const acct = () => `acct-${randomBytes(4).toString('hex')}`;

describe('CLI messages', () => {
  it('--version prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    const r = await keygate(['--version']);
    expect(r).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });

  it('serve --help lists every setting with its environment name and default', async () => {
    const r = await keygate(['serve', '--help']);
    expect(r.code).toBe(0);
    for (const env of Object.values(ENV)) expect(r.stdout).toMatch(new RegExp(`^  ${env} +\\[`, 'm'));
    expect(r.stdout).toMatch(/^ {2}KEYGATE_GRPC_PORT +\[9001\]$/m);
    expect(r.stdout).toMatch(/^ {2}REDIS_URL +\[redis:\/\/127\.0\.0\.1:6379\]$/m);
  });

  it('serve on a taken port: one line naming the setting, exit 2, nothing else', async () => {
    const port = await freePort();
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    try {
      const [g, a] = [await freePort(), await freePort()];
      const r = await keygate(['serve', '--http-port', `${port}`, '--grpc-port', `${g}`, '--admin-port', `${a}`], { KEYGATE_ADMIN_HOST: '127.0.0.1' });
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`keygate: HTTP authz port (--http-port, KEYGATE_HTTP_PORT) ${port} on 127.0.0.1 is already in use; stop what uses it or choose another port\n`);
    } finally {
      blocker.close();
    }
  });

  it('console commands read only their own settings: a bad sidecar setting does not break keys list', async () => {
    const account = acct();
    await kc.createKey({ account, name: 'k' });
    const r = await keygate(['keys', 'list', '--account', account], { KEYGATE_GRPC_PORT: 'not-a-port', KEYGATE_LOG_LEVEL: 'loud', KEYGATE_DRAIN_DELAY_MS: '-1' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('active');
    // Their own settings are still checked.
    const bad = await keygate(['keys', 'list', '--account', account], { KEYGATE_REDIS_NAMESPACE: 'no spaces' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^keygate: invalid setting KEYGATE_REDIS_NAMESPACE/);
  });

  it('keys list shows expired for a key past its expiry', async () => {
    const account = acct();
    const k = await kc.createKey({ account, name: 'short', expiresAt: Date.now() + 1000 });
    await new Promise((r) => setTimeout(r, 1300));
    const r = await keygate(['keys', 'list', '--account', account]);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[1]).toMatch(new RegExp(`^${k.id}\\s+short\\s+expired\\s`));
    const j = await keygate(['keys', 'list', '--account', account, '--json']);
    expect(JSON.parse(j.stdout).keys[0]).toMatchObject({ id: k.id, status: 'active', expired: true });
  });

  it('accounts disable of an account without keys warns on stderr and still disables it', async () => {
    const account = acct();
    const r = await keygate(['accounts', 'disable', account]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(`keygate: warning: account ${account} has no keys; check the account id (disabled anyway)\n`);
    expect(r.stdout).toBe(`Account ${account} disabled.\n`);
    expect(await kc.accountStatus(account)).toBe('disabled');
    // With keys: no warning.
    const withKeys = acct();
    await kc.createKey({ account: withKeys, name: 'k' });
    const r2 = await keygate(['accounts', 'disable', withKeys]);
    expect(r2).toEqual({ code: 0, stdout: `Account ${withKeys} disabled.\n`, stderr: '' });
  });
});
