/**
 * A Sentinel deployment of real processes: a master, one replica and one sentinel (quorum 1, fast
 * failure detection), on free loopback ports. `failover()` kills the master and waits until the
 * sentinel has promoted the replica.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { destroyRedis, freePort, startRedis, type RedisServer } from './redis-server.ts';

export const MASTER_NAME = 'keygate-test';

export interface SentinelDeployment {
  /** `redis-sentinel://…/keygate-test` */
  readonly url: string;
  master: RedisServer;
  replica: RedisServer;
  /** Kills the master; resolves once the sentinel reports the replica as master. */
  failover(timeoutMs?: number): Promise<void>;
  destroy(): Promise<void>;
}

async function waitUntil(cond: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startSentinel(): Promise<SentinelDeployment> {
  let master = await startRedis();
  let replica = await startRedis(['--replicaof', '127.0.0.1', String(master.port)]);
  const probe = replica.client();
  await waitUntil(async () => /master_link_status:up/.test(await probe.info('replication')), 'replication', 15_000);
  probe.disconnect();

  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-sentinel-'));
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
      `sentinel failover-timeout ${MASTER_NAME} 10000`,
      `sentinel parallel-syncs ${MASTER_NAME} 1`,
      '',
    ].join('\n'),
  );
  const proc: ChildProcess = spawn('redis-sentinel', [conf], { stdio: 'ignore' });
  const sentinel = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 100, maxRetriesPerRequest: 1 });
  sentinel.on('error', () => {});
  const masterPort = async () => {
    const addr = (await sentinel.call('SENTINEL', 'get-master-addr-by-name', MASTER_NAME)) as string[] | null;
    return addr ? Number(addr[1]) : 0;
  };
  // Ready when the sentinel has discovered the replica.
  await waitUntil(async () => {
    const replicas = (await sentinel.call('SENTINEL', 'replicas', MASTER_NAME)) as unknown[];
    return (await masterPort()) === master.port && replicas.length === 1;
  }, 'sentinel discovery', 20_000);

  const d: SentinelDeployment = {
    url: `redis-sentinel://127.0.0.1:${port}/${MASTER_NAME}`,
    master,
    replica,
    async failover(timeoutMs = 30_000) {
      const old = d.master;
      await old.stop();
      await waitUntil(async () => (await masterPort()) === d.replica.port, 'sentinel failover', timeoutMs);
      d.master = d.replica;
      d.replica = old;
    },
    async destroy() {
      sentinel.disconnect();
      proc.kill('SIGKILL');
      await Promise.all([destroyRedis(master), destroyRedis(replica)]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return d;
}
