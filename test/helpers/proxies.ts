/**
 * The real `caddy` and `nginx` binaries in front of keygate and a stub upstream, on free loopback
 * ports, each from the config shipped under deploy/ (so the shipped file is the one tested).
 * Caddy reads its addresses from environment placeholders; nginx's file is copied with its three
 * addresses substituted, each of which must be found exactly once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { findOnPath } from '../../src/dev/index.ts';
import { freePort } from './redis-server.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
export const CADDYFILE = join(ROOT, 'deploy/caddy/Caddyfile');
export const NGINX_CONF = join(ROOT, 'deploy/nginx/keygate.conf');

export interface RunningProxy {
  readonly port: number;
  readonly baseUrl: string;
  /** What the binary printed (for failure messages). */
  output(): string;
  close(): Promise<void>;
}

async function waitListening(port: number, proc: ChildProcess, out: () => string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`proxy exited with ${proc.exitCode}:\n${out()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`proxy did not listen on ${port}:\n${out()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts every proxy of `starts` together; when one fails, closes the ones that started before
 * throwing its error, so that a failed setup leaves no process behind.
 */
export async function startAll<T extends { close(): Promise<void> }>(starts: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(starts);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(settled.map((r) => (r.status === 'fulfilled' ? r.value.close() : undefined)));
    throw failed.reason;
  }
  return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/** `cmd` on PATH, or an error saying how to get it (instead of spawn's bare "exited with -2"). */
function requireBinary(cmd: string, pkg: string): void {
  if (findOnPath(cmd)) return;
  throw new Error(`${cmd} not found on PATH; run scripts/install as root (it installs ${pkg}), or: apt-get install ${pkg}`);
}

function launch(cmd: string, args: string[], env: NodeJS.ProcessEnv, port: number, dir: string): Promise<RunningProxy> {
  const proc = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.on('error', () => {}); // reported by waitListening as the exit code
  let log = '';
  const keep = (d: Buffer) => {
    log = (log + d.toString('utf8')).slice(-20_000);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const proxy: RunningProxy = {
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    output: () => log,
    async close() {
      if (proc.exitCode === null && proc.signalCode === null) {
        await new Promise<void>((resolve) => {
          proc.once('exit', () => resolve());
          proc.kill('SIGTERM');
          setTimeout(() => proc.kill('SIGKILL'), 5000).unref();
        });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return waitListening(port, proc, () => log).then(
    () => proxy,
    async (err: unknown) => {
      await proxy.close();
      throw err;
    },
  );
}

export interface ProxyTargets {
  /** keygate's HTTP authz port. */
  readonly authzPort: number;
  readonly upstreamPort: number;
}

export async function startCaddy(t: ProxyTargets): Promise<RunningProxy> {
  requireBinary('caddy', 'caddy');
  const port = await freePort();
  const admin = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-caddy-'));
  const env = {
    PATH: process.env.PATH,
    HOME: dir,
    XDG_DATA_HOME: join(dir, 'data'),
    XDG_CONFIG_HOME: join(dir, 'config'),
    CADDY_ADMIN: `127.0.0.1:${admin}`,
    KEYGATE_PORT: String(port),
    KEYGATE_BIND: '127.0.0.1',
    KEYGATE_AUTHZ: `127.0.0.1:${t.authzPort}`,
    KEYGATE_UPSTREAM: `127.0.0.1:${t.upstreamPort}`,
  };
  return launch('caddy', ['run', '--config', CADDYFILE, '--adapter', 'caddyfile'], env, port, dir);
}

/** The shipped nginx file with its addresses replaced; throws if the file no longer has them. */
export function nginxSiteConfig(template: string, listenPort: number, t: ProxyTargets): string {
  const subs: [string, string][] = [
    ['listen 8080 default_server;', `listen 127.0.0.1:${listenPort} default_server;`],
    ['server 127.0.0.1:9002;', `server 127.0.0.1:${t.authzPort};`],
    ['server 127.0.0.1:8000;', `server 127.0.0.1:${t.upstreamPort};`],
  ];
  let out = template;
  for (const [from, to] of subs) {
    const n = out.split(from).length - 1;
    if (n !== 1) throw new Error(`deploy/nginx/keygate.conf: expected "${from}" once, found ${n} times`);
    out = out.replace(from, to);
  }
  return out;
}

export async function startNginx(t: ProxyTargets, site = readFileSync(NGINX_CONF, 'utf8')): Promise<RunningProxy> {
  requireBinary('nginx', 'nginx-light');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-nginx-'));
  for (const d of ['logs', 'tmp/body', 'tmp/proxy', 'tmp/fastcgi', 'tmp/uwsgi', 'tmp/scgi']) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, 'keygate.conf'), nginxSiteConfig(site, port, t));
  const asRoot = process.getuid?.() === 0;
  writeFileSync(
    join(dir, 'nginx.conf'),
    [
      asRoot ? `user ${userInfo().username};` : '',
      'daemon off;',
      'master_process on;',
      'worker_processes 1;',
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/logs/error.log warn;`,
      'events { worker_connections 512; }',
      'http {',
      '  access_log off;',
      `  client_body_temp_path ${dir}/tmp/body;`,
      `  proxy_temp_path ${dir}/tmp/proxy;`,
      `  fastcgi_temp_path ${dir}/tmp/fastcgi;`,
      `  uwsgi_temp_path ${dir}/tmp/uwsgi;`,
      `  scgi_temp_path ${dir}/tmp/scgi;`,
      `  include ${dir}/keygate.conf;`,
      '}',
    ].join('\n'),
  );
  const proxy = await launch('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'logs/error.log')], { PATH: process.env.PATH }, port, dir);
  return {
    ...proxy,
    output: () => {
      try {
        return proxy.output() + readFileSync(join(dir, 'logs/error.log'), 'utf8');
      } catch {
        return proxy.output();
      }
    },
  };
}
