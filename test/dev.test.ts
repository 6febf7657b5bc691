/**
 * `keygate dev` as a newcomer runs it: the real CLI as a child process on free ports, its own
 * redis-server, a curl-like request through the dev gateway with the key it prints, the official
 * OpenAI SDK on the printed base URL, the same key after a restart, Ctrl-C (SIGINT) stopping
 * redis-server and every port, a restart after a SIGKILL (the leftover redis-server stopped), and one-line refusals (port taken, also
 * only on [::1]; no redis-server on PATH; a directory a live dev owns, which is left untouched; a truncated state file).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import OpenAI from 'openai';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { devComponents, portFree, redisPidFile, startDev, type DevComponent } from '../src/dev/index.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { UPSTREAM_TEXT } from '../src/dev/stub-upstream.ts';
import { launchBrowser, type TestBrowser } from './helpers/browser.ts';
import { freePort } from './helpers/redis-server.ts';

const MAIN = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const dirs: string[] = [];
const running = new Set<ChildProcess>();
const redisPids = new Set<number>();

interface Ports {
  redis: number;
  grpc: number;
  http: number;
  admin: number;
  gateway: number;
  console: number;
}

async function ports(): Promise<Ports> {
  const p: number[] = [];
  while (p.length < 6) {
    const n = await freePort();
    if (!p.includes(n)) p.push(n);
  }
  return { redis: p[0]!, grpc: p[1]!, http: p[2]!, admin: p[3]!, gateway: p[4]!, console: p[5]! };
}

function args(dir: string, p: Ports): string[] {
  return ['dev', '--dir', dir, '--redis-port', `${p.redis}`, '--grpc-port', `${p.grpc}`, '--http-port', `${p.http}`, '--admin-port', `${p.admin}`, '--gateway-port', `${p.gateway}`, '--console-port', `${p.console}`];
}

interface Dev {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exit: Promise<number | null>;
}

function spawnDev(argv: string[], env: NodeJS.ProcessEnv = process.env): Dev {
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, ...argv], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exit = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  return { child, stdout: () => out, stderr: () => err, exit };
}

async function untilRunning(dev: Dev): Promise<string> {
  const deadline = Date.now() + 60_000;
  while (!dev.stdout().includes('Ctrl-C stops everything')) {
    if (dev.child.exitCode !== null) throw new Error(`dev exited ${dev.child.exitCode}: ${dev.stderr()}`);
    if (Date.now() > deadline) throw new Error(`dev did not start: ${dev.stderr()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return /^ {2}KEY=(\S+)$/m.exec(dev.stdout())![1]!;
}

async function redisPid(port: number): Promise<number> {
  const c = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    const info = await c.info('server');
    const pid = Number(/process_id:(\d+)/.exec(info)![1]);
    redisPids.add(pid);
    return pid;
  } finally {
    c.disconnect();
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const listening = async (port: number) => !(await portFree(port));

function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'keygate-dev-'));
  dirs.push(d);
  return d;
}

afterEach(async () => {
  for (const c of running) {
    c.kill('SIGKILL');
    await new Promise((r) => c.once('exit', r));
  }
  // Also a redis-server whose pid was never read (a test that failed early): dev's pid file names it.
  for (const d of dirs) {
    const pid = existsSync(redisPidFile(d)) ? Number(readFileSync(redisPidFile(d), 'utf8')) : 0;
    if (pid > 1) redisPids.add(pid);
  }
  for (const pid of redisPids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  redisPids.clear();
});

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// A test that starts keygate dev takes a few seconds on an idle machine and tens of seconds on a
// loaded one (measured: 28 s at load 21 on 2 cores): those get 90 s.
describe('keygate dev', () => {
  it('serves a printed key through the dev gateway, keeps it across restarts, and Ctrl-C stops everything', async () => {
    const dir = tmp();
    const p = await ports();
    const dev = spawnDev(args(dir, p));
    const key = await untilRunning(dev);
    const out = dev.stdout();
    expect(out).toContain(`redis://127.0.0.1:${p.redis}`);
    expect(out).toContain(`http://127.0.0.1:${p.gateway}/openai/v1`);
    expect(out).toContain(`http://127.0.0.1:${p.gateway}/anthropic`);
    expect(out).toContain(`http://127.0.0.1:${p.gateway}/google`);
    expect(out).toMatch(/curl -sS http:\/\/127\.0\.0\.1:\d+\/openai\/v1\/chat\/completions -H "Authorization: Bearer \$KEY"/);
    expect(statSync(join(dir, 'demo-key.json')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'reveal-key')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'console-token.json')).mode & 0o777).toBe(0o600);
    // The key and the console token are in the banner only: never in a log line.
    expect(dev.stderr()).not.toContain(key);
    const token = /^ {2}TOKEN=(\S+)$/m.exec(out)![1]!;
    expect(dev.stderr()).not.toContain(token);

    // The printed console token manages the demo account's keys (and only that account's).
    expect(out).toContain(`http://127.0.0.1:${p.console}/`);
    const listed = await fetch(`http://127.0.0.1:${p.console}/v1/accounts/demo/keys`, { headers: { authorization: `Bearer ${token}` } });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { keys: { account: string }[] }).keys.map((k) => k.account)).toContain('demo');
    const other = await fetch(`http://127.0.0.1:${p.console}/v1/accounts/someone-else/keys`, { headers: { authorization: `Bearer ${token}` } });
    expect(other.status).toBe(404);
    // The printed URL serves the "API keys" page, and the printed token signs it in for the demo account.
    const page = await fetch(`http://127.0.0.1:${p.console}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<title>API keys');
    const signIn = await fetch(`http://127.0.0.1:${p.console}/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: `http://127.0.0.1:${p.console}` },
      body: JSON.stringify({ token }),
    });
    expect(signIn.status).toBe(200);
    expect(await signIn.json()).toMatchObject({ signed_in: true, account: 'demo' });

    // As the printed curl does.
    const r = await fetch(`http://127.0.0.1:${p.gateway}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe(UPSTREAM_TEXT);

    // A wrong key: the sidecar's deny, in the entry's shape.
    const bad = await fetch(`http://127.0.0.1:${p.gateway}/anthropic/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'kg_wrong' }, body: '{}' });
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { type: string; error: { type: string } })).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });

    // The official SDK on the printed base URL.
    const openai = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${p.gateway}/openai/v1`, maxRetries: 0 });
    const chat = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices[0]!.message.content).toBe(UPSTREAM_TEXT);

    // A key restricted to openai/gpt-4o-mini (as the page suggests) works with the printed OpenAI curl,
    // which names "gpt-4o-mini": dev reads plain names at the OpenAI entry as OpenAI's.
    expect(out).toContain('A key limited to openai/gpt-4o-mini accepts "gpt-4o-mini" at the OpenAI entry here (KEYGATE_BARE_MODEL_PROVIDER=openai=openai).');
    const restricted = await fetch(`http://127.0.0.1:${p.console}/v1/accounts/demo/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'mini only', models: ['openai/gpt-4o-mini'] }),
    });
    expect(restricted.status).toBe(201);
    const mini = ((await restricted.json()) as { key: string }).key;
    const asCurl = (model: string) =>
      fetch(`http://127.0.0.1:${p.gateway}/openai/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${mini}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      });
    expect((await asCurl('gpt-4o-mini')).status).toBe(200);
    const refused = await asCurl('gpt-4o');
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toBe('The model "gpt-4o" is not among this key\'s allowed models; it accepts "openai/gpt-4o-mini". To use another model, change the key\'s allowed models in the console.');

    const pid = await redisPid(p.redis);
    dev.child.kill('SIGINT');
    expect(await dev.exit).toBe(0);
    expect(alive(pid)).toBe(false);
    for (const port of Object.values(p)) expect(await listening(port), `port ${port}`).toBe(false);

    // Restart on the same directory: the same key works again (Redis data kept).
    const again = spawnDev(args(dir, p));
    expect(await untilRunning(again)).toBe(key);
    expect(again.stdout()).toContain(`TOKEN=${token}`);
    const r2 = await fetch(`http://127.0.0.1:${p.gateway}/google/v1beta/models/gemini-2.0-flash:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ parts: [{ text: 'hi' }] }] }),
    });
    expect(r2.status).toBe(200);
    const pid2 = await redisPid(p.redis);
    again.child.kill('SIGINT');
    expect(await again.exit).toBe(0);
    expect(alive(pid2)).toBe(false);
  }, 90_000);

  it('after a SIGKILL, the next start on the same directory stops the redis-server left behind and the key still works', async () => {
    const dir = tmp();
    const p = await ports();
    const dev = spawnDev(args(dir, p));
    const key = await untilRunning(dev);
    const oldPid = await redisPid(p.redis);
    dev.child.kill('SIGKILL');
    await dev.exit;
    expect(alive(oldPid)).toBe(true); // redis-server is its own process: a killed dev cannot stop it

    const again = spawnDev(args(dir, p));
    expect(await untilRunning(again)).toBe(key);
    expect(again.stdout()).toContain(`keygate dev: stopped redis-server (pid ${oldPid}, port ${p.redis}) left running by an earlier keygate dev on this directory\n`);
    expect(alive(oldPid)).toBe(false);
    const newPid = await redisPid(p.redis);
    expect(newPid).not.toBe(oldPid);
    const r = await fetch(`http://127.0.0.1:${p.gateway}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(r.status).toBe(200);
    again.child.kill('SIGINT');
    expect(await again.exit).toBe(0);
    expect(alive(newPid)).toBe(false);
    for (const port of Object.values(p)) expect(await listening(port), `port ${port}`).toBe(false);
  }, 90_000);

  it('loads every component\'s modules before the first one starts', async () => {
    // The console's module load (a few hundred ms of the loop) once ran after the sidecar had
    // started, overdue its heartbeat: "cache invalidation link lost" on every first start.
    const order: string[] = [];
    const component = (name: string): DevComponent => ({
      name,
      ports: () => [],
      load: async () => {
        await new Promise((r) => setTimeout(r, 20));
        order.push(`load ${name}`);
      },
      start: async (ctx) => {
        order.push(`start ${name}`);
        ctx.demoKey ??= { id: 'key_0000000000000000', key: 'kg_not-a-real-key', account: 'demo' }; // the banner names one
        return { lines: [], stop: async () => void order.push(`stop ${name}`) };
      },
    });
    const p = await ports();
    const dev = await startDev({ dir: tmp(), redisPort: p.redis, grpcPort: p.grpc, httpPort: p.http, adminPort: p.admin, gatewayPort: p.gateway, consolePort: p.console }, createLogger('silent'), [component('a'), component('b')]);
    await dev.stop();
    expect(order).toEqual(['load a', 'load b', 'start a', 'start b', 'stop b', 'stop a']);
    // Building the console holds the loop too: it starts before the sidecar's heartbeat runs.
    const names = devComponents().map((c) => c.name);
    expect(names.indexOf('console')).toBeLessThan(names.indexOf('sidecar'));
  });

  it('refuses with one line when a port is taken, and starts nothing', async () => {
    const p = await ports();
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(p.gateway, '127.0.0.1', resolve));
    try {
      const dev = spawnDev(args(tmp(), p));
      expect(await dev.exit).toBe(2);
      expect(dev.stderr()).toBe(`keygate: dev: port ${p.gateway} (gateway) is already in use; stop what uses it or pass --gateway-port <port>\n`);
      expect(dev.stdout()).toBe('');
      expect(await listening(p.redis)).toBe(false);
    } finally {
      blocker.close();
    }
  });

  it('refuses a second dev on a directory a live dev owns, before touching anything: the first keeps its Redis and keeps serving', async () => {
    const dir = tmp();
    const p = await ports();
    const first = spawnDev(args(dir, p));
    const key = await untilRunning(first);
    const pid = await redisPid(p.redis);
    const refusal = `keygate: dev: ${dir} is in use by a running keygate dev (pid ${first.child.pid}); stop it (Ctrl-C) or pass --dir <another directory>\n`;

    // Same directory, same ports (the second once stopped the first's redis-server as a "leftover").
    const same = spawnDev(args(dir, p));
    expect(await same.exit).toBe(2);
    expect(same.stderr()).toBe(refusal);
    expect(same.stdout()).toBe('');
    // Same directory, other ports (the second once started a second redis-server on the same data).
    const q = await ports();
    const other = spawnDev(args(dir, q));
    expect(await other.exit).toBe(2);
    expect(other.stderr()).toBe(refusal);
    for (const port of Object.values(q)) expect(await listening(port), `port ${port}`).toBe(false);

    expect(alive(pid)).toBe(true);
    expect(Number(readFileSync(redisPidFile(dir), 'utf8'))).toBe(pid);
    const r = await fetch(`http://127.0.0.1:${p.gateway}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(r.status).toBe(200);

    // Another directory on the same ports: the ports are taken; the first's Redis is untouched.
    const elsewhere = spawnDev(args(tmp(), p));
    expect(await elsewhere.exit).toBe(2);
    expect(elsewhere.stderr()).toBe(`keygate: dev: port ${p.redis} (redis) is already in use; stop what uses it or pass --redis-port <port>\n`);
    expect(alive(pid)).toBe(true);

    first.child.kill('SIGINT');
    expect(await first.exit).toBe(0);
    expect(alive(pid)).toBe(false);
  }, 90_000);

  it('refuses with one line when a port is taken only on [::1]', async (t) => {
    const p = await ports();
    const blocker: Server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      blocker.once('error', () => resolve(false));
      blocker.listen(p.console, '::1', () => resolve(true));
    });
    if (!bound) t.skip('this machine has no IPv6 loopback ([::1])');
    try {
      const dev = spawnDev(args(tmp(), p));
      expect(await dev.exit).toBe(2);
      expect(dev.stderr()).toBe(`keygate: dev: port ${p.console} (console) is already in use; stop what uses it or pass --console-port <port>\n`);
      expect(await listening(p.redis)).toBe(false);
    } finally {
      blocker.close();
    }
  });

  it('names a truncated state file and what to do, and starts nothing', async () => {
    const dir = tmp();
    const p = await ports();
    const dev = spawnDev(args(dir, p));
    await untilRunning(dev);
    dev.child.kill('SIGINT');
    expect(await dev.exit).toBe(0);
    for (const name of ['demo-key.json', 'console-token.json']) {
      const file = join(dir, name);
      const whole = readFileSync(file, 'utf8');
      writeFileSync(file, whole.slice(0, 20), { mode: 0o600 });
      const again = spawnDev(args(dir, p));
      expect(await again.exit).toBe(2);
      expect(again.stderr()).toBe(`keygate: dev: ${file} is truncated or not valid JSON; delete it and start again (a new one is made)\n`);
      expect(await listening(p.redis)).toBe(false);
      writeFileSync(file, whole, { mode: 0o600 });
    }
  }, 90_000);

  it('a key made on the page, restricted to the model the page suggests, works with the printed OpenAI curl (the real curl) as its Models help says; another model gets the 403 naming what it accepts', async () => {
    const p = await ports();
    const dev = spawnDev(args(tmp(), p));
    await untilRunning(dev);
    const out = dev.stdout();
    const token = /^ {2}TOKEN=(\S+)$/m.exec(out)![1]!;
    const curl = out.split('\n').find((l) => l.startsWith(`  curl -sS http://127.0.0.1:${p.gateway}/openai/v1/chat/completions -H "Authorization: Bearer $KEY"`))!.trim();
    let browser: TestBrowser | undefined;
    let key = '';
    try {
      browser = await launchBrowser({ baseURL: `http://127.0.0.1:${p.console}` });
      const { page } = browser;
      await page.goto('/');
      await page.getByLabel('Token').fill(token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('button', { name: 'Create key' }).click();
      const dialog = page.getByRole('dialog');
      // The model the form's help names first.
      const suggested = await dialog.locator('#f-models-help code').first().innerText();
      expect(suggested).toBe('openai/gpt-4o-mini');
      // dev's sidecar reads a plain name at the OpenAI entry as OpenAI's, and the help says so.
      await dialog.locator('#f-models-help', { hasText: 'Here a plain gpt-4o-mini at the OpenAI entry counts as openai/gpt-4o-mini.' }).waitFor({ timeout: 10_000 });
      await dialog.getByLabel('Name', { exact: true }).fill('mini only');
      await dialog.getByLabel('Models').fill(suggested);
      await dialog.getByRole('button', { name: 'Create', exact: true }).click();
      await dialog.getByRole('button', { name: 'Copy' }).click();
      await dialog.getByText('Copied to the clipboard.').waitFor();
      key = await page.evaluate(() => navigator.clipboard.readText());
      expect(key).toMatch(/^kg_[0-9A-Za-z]{38}$/);
    } finally {
      await browser?.close();
    }
    // The printed command as it is, run by bash with KEY set (the status written after the body).
    const run = (command: string) =>
      new Promise<{ body: string; status: number }>((resolve, reject) =>
        execFile('bash', ['-c', `${command} -w '\n%{http_code}'`], { env: { ...process.env, KEY: key } }, (err, stdout) => {
          if (err) return reject(err);
          const i = stdout.lastIndexOf('\n');
          resolve({ body: stdout.slice(0, i), status: Number(stdout.slice(i + 1)) });
        }),
      );
    const ok = await run(curl);
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe(UPSTREAM_TEXT);
    const other = await run(curl.replace('"model":"gpt-4o-mini"', '"model":"gpt-4o"'));
    expect(other.status).toBe(403);
    expect((JSON.parse(other.body) as { error: { message: string } }).error.message).toBe('The model "gpt-4o" is not among this key\'s allowed models; it accepts "openai/gpt-4o-mini". To use another model, change the key\'s allowed models in the console.');
    dev.child.kill('SIGINT');
    expect(await dev.exit).toBe(0);
  }, 90_000);

  it('refuses with one line when redis-server is not on PATH', async () => {
    const p = await ports();
    const dev = spawnDev(args(tmp(), p), { ...process.env, PATH: '/nonexistent' });
    expect(await dev.exit).toBe(2);
    expect(dev.stderr()).toBe('keygate: dev: redis-server not found on PATH; run scripts/install (Debian/Ubuntu: apt-get install redis-server)\n');
  });
});
