/**
 * A real PostgreSQL server for a test or a benchmark: `initdb` into a temporary directory (trust authentication,
 * no fsync), `postgres` on a free loopback port with its socket directory inside that directory.
 * Stopped, and the directory removed, by `destroy()` and when setup fails. PostgreSQL refuses to run
 * as root: as root the directory is given to the `postgres` user and the server runs as it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { freePort } from './redis.ts';

const BIN = ['/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin'].find((d) => existsSync(join(d, 'postgres'))) ?? '';

export interface PostgresServer {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  /** Stop the server (fast shutdown: open sessions are cut), keeping its data. */
  stop(): Promise<void>;
  /** Start it again on the same port and data (after `stop`). */
  start(): Promise<void>;
  /** A pool for seeding and inspecting (ended by `destroy`). */
  pool(): pg.Pool;
  destroy(): Promise<void>;
}

function asPostgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  const gid = id('-g');
  if (!Number.isInteger(uid) || uid <= 0) throw new Error('running as root and there is no postgres user for the PostgreSQL server');
  return { uid, gid };
}

async function waitReady(port: number, proc: ChildProcess, log: () => string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`postgres exited at start: ${log().slice(-2000)}`);
    const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 1000 });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      return;
    } catch {
      await c.end().catch(() => {});
      if (Date.now() > deadline) throw new Error(`postgres on ${port} did not start: ${log().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

export async function startPostgres(): Promise<PostgresServer> {
  if (BIN === '') throw new Error('PostgreSQL is not installed (scripts/install brings Debian\'s postgresql)');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-pg-'));
  const data = join(dir, 'data');
  const user = asPostgresUser();
  const pools: pg.Pool[] = [];
  let proc: ChildProcess | undefined;
  let out = '';
  const stop = async () => {
    for (const p of pools.splice(0)) await p.end().catch(() => {});
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const hard = setTimeout(() => p.kill('SIGKILL'), 10_000);
      p.once('exit', () => {
        clearTimeout(hard);
        resolve();
      });
      p.kill('SIGINT'); // fast shutdown
    });
  };
  const start = async () => {
    out = '';
    proc = spawn(
      join(BIN, 'postgres'),
      ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=50', '-c', 'shared_buffers=64MB'],
      { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir, ...(user ?? {}) },
    );
    proc.stdout!.on('data', (b: Buffer) => (out = (out + b.toString()).slice(-8000)));
    proc.stderr!.on('data', (b: Buffer) => (out = (out + b.toString()).slice(-8000)));
    await waitReady(port, proc, () => out);
  };
  try {
    if (user) {
      chownSync(dir, user.uid, user.gid);
      // the server's user must reach its directory: every folder above it gets search (x) for others
      for (let d = dirname(dir); d !== '/' && d !== '.'; d = dirname(d)) {
        try {
          chmodSync(d, (statSync(d).mode & 0o7777) | 0o011);
        } catch {
          /* not ours: it must already be reachable */
        }
      }
    }
    const init = spawnSync(join(BIN, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C'], { encoding: 'utf8', cwd: dir, ...(user ?? {}) });
    if (init.status !== 0) throw new Error(`initdb failed: ${(init.stderr || init.stdout).slice(-2000)}`);
    await start();
  } catch (err) {
    await stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    port,
    url,
    dir,
    stop,
    start,
    pool() {
      const p = new pg.Pool({ connectionString: url, max: 4 });
      p.on('error', () => {});
      pools.push(p);
      return p;
    },
    async destroy() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
