/**
 * `bin/keygate ledger` (the ledger's sink) as a child process, for the fault tests: it can be
 * SIGKILLed at any point, and `waitOutput` waits for a log line (the commit hook's).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { until } from './until.ts';

const BIN = fileURLToPath(new URL('../../bin/keygate', import.meta.url));

export interface LedgerChild {
  readonly proc: ChildProcess;
  output(): string;
  /** Resolves once the output (from `from`) matches `re`. */
  waitOutput(re: RegExp, ms?: number, from?: number): Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export function ledgerChild(redisUrl: string, ledgerUrl: string, env: Record<string, string> = {}): LedgerChild {
  let out = '';
  const proc = spawn(BIN, ['ledger'], {
    env: {
      ...process.env,
      KEYGATE_NODE: process.execPath,
      REDIS_URL: redisUrl,
      KEYGATE_LEDGER_URL: ledgerUrl,
      KEYGATE_LEDGER_ADMIN_PORT: '0',
      KEYGATE_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  return {
    proc,
    output: () => out,
    waitOutput: (re, ms = 30_000, from = 0) => until(() => `${re} in the sink's output: ${out.slice(-1500)}`, () => re.test(out.slice(from)), ms).then(() => undefined),
    kill: (signal = 'SIGKILL') =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill(signal);
      }),
  };
}
