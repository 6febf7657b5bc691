/**
 * The real CLI (`bin/keygate serve`) as a child process on free ports, for tests that must see
 * whether the process itself survives (a crash inside an in-process sidecar would take the test
 * runner with it) or measure its memory. `stop()` kills it (SIGKILL) whatever state it is in.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { adminGet, waitFor } from './admin.ts';
import { freePort } from './redis-server.ts';

const BIN = fileURLToPath(new URL('../../bin/keygate', import.meta.url));

export interface ServeChild {
  readonly proc: ChildProcess;
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly adminPort: number;
  /** stdout and stderr so far (for failure messages). */
  output(): string;
  /** True while the process has not exited. */
  alive(): boolean;
  /** Resident set size in bytes (Linux /proc). */
  rssBytes(): number;
  stop(): Promise<void>;
}

/** Starts `keygate serve` on `redisUrl` with `env` (KEYGATE_* settings) and waits for `/readyz`. */
export async function serveChild(redisUrl: string, env: Record<string, string> = {}): Promise<ServeChild> {
  const [grpcPort, httpPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  const proc = spawn(BIN, ['serve'], {
    env: {
      PATH: process.env.PATH,
      KEYGATE_NODE: process.execPath,
      REDIS_URL: redisUrl,
      KEYGATE_GRPC_PORT: String(grpcPort),
      KEYGATE_HTTP_PORT: String(httpPort),
      KEYGATE_ADMIN_PORT: String(adminPort),
      KEYGATE_ADMIN_HOST: '127.0.0.1',
      KEYGATE_REDIS_TIMEOUT_MS: '5000',
      KEYGATE_DRAIN_DELAY_MS: '0',
      KEYGATE_SHUTDOWN_TIMEOUT_MS: '2000',
      KEYGATE_LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  proc.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const child: ServeChild = {
    proc,
    grpcPort,
    httpPort,
    adminPort,
    output: () => out,
    alive: () => proc.exitCode === null && proc.signalCode === null,
    rssBytes: () => {
      const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'));
      return m ? Number(m[1]) * 1024 : NaN;
    },
    async stop() {
      if (child.alive()) proc.kill('SIGKILL');
      await exited;
    },
  };
  try {
    await waitFor('keygate ready', async () => (await adminGet(adminPort, '/readyz')).status === 200, 30_000);
  } catch (e) {
    await child.stop();
    throw new Error(`keygate did not start: ${(e as Error).message}\n${out}`);
  }
  return child;
}
