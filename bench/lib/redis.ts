/**
 * The benchmark's own `redis-server`: one process on a free loopback port with a throwaway data
 * directory, stopped (SIGKILL, it holds nothing worth keeping) and removed by `stop`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export interface BenchRedis {
  readonly url: string;
  /** The redis-server's process id (for its CPU time: `cpuMsOf`). */
  readonly pid: number;
  /** A client for seeding (closed by `stop`). */
  client(): Redis;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

export async function startRedis(): Promise<BenchRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-redis-'));
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const clients: Redis[] = [];
  const stop = async () => {
    for (const c of clients.splice(0)) c.disconnect();
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const probe = new Redis({ port, host: '127.0.0.1', retryStrategy: (n) => (n > 200 ? null : 50), maxRetriesPerRequest: null });
    probe.on('error', () => {});
    try {
      await Promise.race([probe.ping(), exited.then(() => Promise.reject(new Error('redis-server exited at start')))]);
    } finally {
      probe.disconnect();
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    pid: proc.pid!,
    client() {
      const c = new Redis({ port, host: '127.0.0.1' });
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    stop,
  };
}
