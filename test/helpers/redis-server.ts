/**
 * Real `redis-server` processes on free loopback ports, one per test file (or per test that kills
 * and restarts it). No mocks: every store test talks RESP to a real server.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  /** A client for seeding and inspecting (queues while offline). */
  client(): Redis;
  stop(): Promise<void>;
  /** Start again on the same port (after `stop`). */
  start(): Promise<void>;
}

/** Thrown when redis-server exits before it answers (its port taken meanwhile, say): start again elsewhere. */
class ExitedEarly extends Error {}

async function waitReady(port: number, proc: ChildProcess, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new ExitedEarly(`redis-server on ${port} exited before it answered`);
    const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      return;
    } catch {
      c.disconnect();
      if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

export async function startRedis(extraArgs: string[] = []): Promise<RedisServer> {
  let port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-redis-'));
  let proc: ChildProcess | undefined;
  const clients: Redis[] = [];
  const start = async () => {
    proc = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs],
      { stdio: 'ignore' },
    );
    await waitReady(port, proc);
  };
  // The free port can be taken between freePort() and the bind (many suites start servers at once):
  // the first start tries again on another port when redis-server exits before it answers.
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (e) {
      if (!(e instanceof ExitedEarly) || attempt === 3) throw e;
      port = await freePort();
    }
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    client() {
      const c = new Redis({ port, host: '127.0.0.1' });
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients.splice(0)) c.disconnect();
      const p = proc;
      if (!p || p.exitCode !== null || p.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        p.once('exit', () => resolve());
        p.kill('SIGKILL');
      });
    },
    start,
  };
}

/** Stop and remove the data dir. */
export async function destroyRedis(r: RedisServer): Promise<void> {
  await r.stop();
  rmSync(r.dir, { recursive: true, force: true });
}
