/**
 * The run-wide leak check of test/global-setup.ts: it finds a process whose working directory or
 * environment points into the run, and nothing else (the machine's own redis-server stays).
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findLeaks } from './global-setup.ts';

describe('findLeaks', () => {
  it('flags processes by working directory or run marker, and no other', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-leak-'));
    const byCwd = spawn('sleep', ['30'], { cwd: dir, stdio: 'ignore', env: { PATH: process.env.PATH } });
    const byEnv = spawn('sleep', ['30'], { stdio: 'ignore', env: { PATH: process.env.PATH, KEYGATE_TEST_RUN: 'probe-id' } });
    const other = spawn('sleep', ['30'], { stdio: 'ignore', env: { PATH: process.env.PATH } });
    try {
      await new Promise((r) => setTimeout(r, 100));
      // self = 1: look at everything, as the teardown does once the workers are gone.
      const pids = findLeaks(dir, 'KEYGATE_TEST_RUN=probe-id', 1).map((l) => l.pid);
      expect(pids).toContain(byCwd.pid);
      expect(pids).toContain(byEnv.pid);
      expect(pids).not.toContain(other.pid);
      // As seen from this process, its own children are not leaks.
      expect(findLeaks(dir, 'KEYGATE_TEST_RUN=probe-id').map((l) => l.pid)).not.toContain(byCwd.pid);
    } finally {
      for (const c of [byCwd, byEnv, other]) c.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('flags a process a live worker started (a worker still exiting at teardown hides nothing)', async () => {
    // Vitest's fork workers are this process's children and may still be alive when the teardown
    // scans; what a test started from one is a grandchild, and a leak all the same.
    const dir = mkdtempSync(join(tmpdir(), 'keygate-leak-'));
    const worker = spawn('sh', ['-c', 'cd "$1" && sleep 30 & wait', 'sh', dir], { cwd: '/', stdio: 'ignore', env: { PATH: process.env.PATH } });
    let pids: number[] = [];
    try {
      for (let i = 0; i < 50 && pids.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 50));
        pids = findLeaks(dir, 'KEYGATE_TEST_RUN=probe-id').map((l) => l.pid);
      }
      expect(pids).toHaveLength(1);
      expect(pids).not.toContain(worker.pid);
      expect(readFileSync(`/proc/${pids[0]}/cmdline`, 'latin1')).toContain('sleep');
    } finally {
      // Kill the sleep itself first (by the pid found, and by parent, waiting for pkill): killing
      // the shell first orphaned it to init before pkill looked, and the run's own check found it.
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
      await new Promise((r) => spawn('pkill', ['-KILL', '-P', String(worker.pid)]).on('exit', r));
      worker.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, 100));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails a run whose test leaves a process behind, and kills that process', async () => {
    const run = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = execFile('npx', ['vitest', 'run', '--config', 'test/fixtures/leaky.vitest.config.ts'], { timeout: 60_000 }, () => {});
      let out = '';
      p.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      p.stderr!.on('data', (c: Buffer) => (out += c.toString()));
      p.on('exit', (code) => resolve({ code, out }));
    });
    const pid = Number(/LEAKED_PID=(\d+)/.exec(run.out)?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(run.out).toMatch(/the tests left 1 process\(es\) running \(now killed\)/);
    expect(run.out).toContain(`pid ${pid}: sleep 60`);
    expect(run.code).not.toBe(0);
    // Gone, or a zombie waiting for init to reap it (this machine's init reaps late).
    const state = () => (existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] : 'gone');
    expect(['gone', 'Z']).toContain(state());
  }, 90_000);
});
