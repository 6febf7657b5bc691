/** Benchmark targets and helpers as child processes (never in the load generator's event loop). */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { LoadResult, LoadSpec } from './loadgen.ts';

const TARGET = fileURLToPath(new URL('./target.ts', import.meta.url));
const LOADGEN = fileURLToPath(new URL('./loadgen.ts', import.meta.url));
/** Linux clock ticks per second (USER_HZ), 100 on every mainstream kernel. */
const CLK_TCK = 100;

export interface Target {
  readonly name: string;
  readonly port: number;
  readonly pid: number;
  /** Resident set size now and at its peak, KiB (Linux /proc). */
  memory(): { rssKiB: number; hwmKiB: number };
  /** CPU time the process has used (user + system), ms (Linux /proc; 10 ms resolution). */
  cpuMs(): number;
  /** A full garbage collection in the target (started with --expose-gc), so RSS shows what is retained. */
  gc(): Promise<NodeJS.MemoryUsage | undefined>;
  stop(): Promise<void>;
}

/** `targetScript`: another tree's `bench/lib/target.ts` (e.g. a checkout before a change, for a baseline). */
export async function startTarget(name: string, kind: string, env: Record<string, string> = {}, nodeArgs: string[] = [], targetScript = TARGET): Promise<Target> {
  const child: ChildProcess = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', ...nodeArgs, targetScript, kind], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: { ...process.env, KEYGATE_LOG_LEVEL: 'info', ...env },
  });
  const { port, pid } = await new Promise<{ port: number; pid: number }>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`target ${name} did not start within 30 s`)), 30_000);
    child.once('message', (m) => {
      clearTimeout(t);
      resolve(m as { port: number; pid: number });
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`target ${name} exited ${code} before listening`));
    });
  });
  return childTarget(name, child, port, pid);
}

/** CPU time process `pid` has used so far (user + system), ms (Linux /proc; 10 ms resolution). */
export function cpuMsOf(pid: number): number {
  // fields after the command name (which is in parentheses and may hold spaces): utime is 14th, stime 15th
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

/** A target around a child process already listening on `port`. */
export function childTarget(name: string, child: ChildProcess, port: number, pid: number): Target {
  return {
    name,
    port,
    pid,
    memory() {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const kib = (f: string) => Number(new RegExp(`^${f}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
      return { rssKiB: kib('VmRSS'), hwmKiB: kib('VmHWM') };
    },
    cpuMs: () => cpuMsOf(pid),
    gc() {
      if (!child.send) return Promise.resolve(undefined);
      return new Promise<NodeJS.MemoryUsage | undefined>((resolve) => {
        const t = setTimeout(() => resolve(undefined), 10_000);
        const on = (m: { gcDone?: boolean; usage?: NodeJS.MemoryUsage }) => {
          if (!m?.gcDone) return;
          clearTimeout(t);
          child.off('message', on);
          resolve(m.usage);
        };
        child.on('message', on);
        child.send({ gc: true });
      });
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.kill('SIGTERM');
      });
    },
  };
}

/** Runs the node:http2 load generator in its own process. */
export async function loadgen(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', LOADGEN, JSON.stringify(spec)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (c) => (out += c));
    p.stderr.on('data', (c) => (err += c));
    p.on('error', reject);
    p.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`loadgen exited ${code}: ${err.trim().slice(-500)}`));
      try {
        resolve(JSON.parse(out) as LoadResult);
      } catch {
        reject(new Error(`loadgen printed no result: ${out.slice(0, 200)} ${err.slice(0, 300)}`));
      }
    });
  });
}

/** Load average and machine facts for the results header. */
export function loadAverage(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return 'n/a';
  }
}
