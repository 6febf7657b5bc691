import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Fails the run when a test leaves a process behind (see the file).
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: keep parallel redis-server/sidecar pairs modest.
    maxWorkers: 2,
  },
});
