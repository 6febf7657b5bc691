/**
 * The run-wide leak check of test/global-setup.ts: it finds a process whose working directory or
 * environment points into the run, and nothing else (the machine's own redis-server stays).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
});
