/**
 * OPA-Envoy (`opa` built with the envoy_ext_authz_grpc plugin, `OPA_ENVOY_BIN`) as a benchmark
 * target running keygate's decision (`bench/opa/policy.rego`) over the bench's seeded keys,
 * written as its data in the run's temporary directory (shape: `bench/opa/data.example.json`).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { childTarget, type Target } from './procs.ts';

const POLICY = join(dirname(fileURLToPath(import.meta.url)), '..', 'opa', 'policy.rego');

export interface OpaKey {
  digest: string;
  id: string;
  account: string;
  models: string[] | null;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export async function startOpaEnvoy(bin: string, keys: readonly OpaKey[], dir: string, ready: (port: number) => Promise<boolean>): Promise<Target> {
  const data = {
    keygate: {
      keys: Object.fromEntries(keys.map((k) => [k.digest, { id: k.id, account: k.account, status: 'active', models: k.models, expires_at: null }])),
      disabled_accounts: {},
    },
  };
  const dataFile = join(dir, 'opa-data.json');
  writeFileSync(dataFile, JSON.stringify(data));
  const port = await freePort();
  const child = spawn(
    bin,
    [
      'run', '--server', '--addr=127.0.0.1:0', '--log-level=error',
      `--set=plugins.envoy_ext_authz_grpc.addr=127.0.0.1:${port}`,
      '--set=plugins.envoy_ext_authz_grpc.path=keygate/authz/result',
      '--set=decision_logs.console=false',
      POLICY, dataFile,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  let spawnError: Error | undefined;
  child.once('error', (e) => (spawnError = e));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (spawnError) throw new Error(`OPA-Envoy: cannot run ${bin} (OPA_ENVOY_BIN): ${spawnError.message}`);
    if (child.exitCode !== null) throw new Error(`OPA-Envoy (${bin}) exited ${child.exitCode} before listening`);
    if (await ready(port).catch(() => false)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`OPA-Envoy (${bin}) did not answer on 127.0.0.1:${port} within 30 s`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return childTarget('OPA-Envoy', child, port, child.pid!);
}
