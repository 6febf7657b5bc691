/**
 * Run-wide leak check (vitest globalSetup). Setup gives the run its own temporary directory (every
 * helper's mkdtemp under os.tmpdir() lands in it, since TMPDIR points there) and a run id in the
 * environment. Teardown scans /proc for any process other than this one whose working directory,
 * command line or environment points into that directory or carries the run id — a redis-server
 * (it chdirs into its --dir), Sentinel, caddy, nginx, uvicorn or node child the tests started and
 * did not stop — kills it, and fails the run naming it. The machine's own Redis (cwd elsewhere,
 * no run id) and other runs (their own directory and id) are never flagged.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Leak {
  readonly pid: number;
  readonly command: string;
}

function read(path: string): string {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return '';
  }
}

const parentOf = (pid: number) => Number(/^PPid:\s+(\d+)/m.exec(read(`/proc/${pid}/status`))?.[1] ?? 0);

/**
 * Processes that point into `runDir` or carry `marker`, other than `self`, its ancestors and its
 * direct children (vitest's own workers and helpers). A process a test started is a grandchild
 * while its worker lives and an orphan after: flagged either way — a fork worker can still be
 * exiting when the teardown scans, and what it started must not hide behind it.
 */
export function findLeaks(runDir: string, marker: string, self = process.pid): Leak[] {
  const exclude = new Set<number>();
  for (let pid = self; pid > 1; pid = parentOf(pid)) exclude.add(pid);
  const leaks: Leak[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (exclude.has(pid) || parentOf(pid) === self) continue;
    const state = /^State:\s+(\S)/m.exec(read(`/proc/${pid}/status`))?.[1];
    if (state === undefined || state === 'Z') continue; // gone, or exited and awaiting its parent
    let cwd = '';
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      /* not ours to read, or gone */
    }
    const cmdline = read(`/proc/${pid}/cmdline`).replace(/\0/g, ' ').trim();
    const environ = read(`/proc/${pid}/environ`);
    if (cwd.startsWith(runDir) || cmdline.includes(runDir) || environ.includes(runDir) || environ.includes(marker)) {
      leaks.push({ pid, command: cmdline || `(pid ${pid})` });
    }
  }
  return leaks;
}

export default function setup(): () => Promise<void> {
  const id = randomUUID();
  const runDir = join(tmpdir(), `keygate-test-run-${id.slice(0, 8)}`);
  mkdirSync(runDir, { recursive: true });
  const marker = `KEYGATE_TEST_RUN=${id}`;
  process.env.TMPDIR = runDir;
  process.env.KEYGATE_TEST_RUN = id;
  return async () => {
    // Stops in flight (a SIGTERM answered a moment late) get a short grace period.
    let leaks = findLeaks(runDir, marker);
    for (let i = 0; i < 20 && leaks.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      leaks = findLeaks(runDir, marker);
    }
    for (const l of leaks) {
      try {
        process.kill(l.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    rmSync(runDir, { recursive: true, force: true });
    if (leaks.length > 0) {
      throw new Error(`the tests left ${leaks.length} process(es) running (now killed):\n${leaks.map((l) => `  pid ${l.pid}: ${l.command}`).join('\n')}`);
    }
  };
}
