/**
 * A Sentinel deployment of real processes: a master, one replica and one sentinel (quorum 1, fast
 * failure detection), on free loopback ports. `failover()` kills the master and waits until the
 * sentinel has promoted the replica; `switchover()` asks the sentinel for a planned failover
 * (`SENTINEL FAILOVER`): the old master stays up and is turned into a replica.
 * If anything fails halfway through the setup, everything already started is stopped.
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
  /** `SENTINEL FAILOVER`: resolves once the sentinel reports the replica as master (the old one stays up). */
  switchover(timeoutMs?: number): Promise<void>;
  destroy(): Promise<void>;
}

async function waitUntil(cond: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `sentinelConfig`: extra lines for sentinel.conf (a test of a failed setup passes a bad one). */
export async function startSentinel(opts: { sentinelConfig?: string[] } = {}): Promise<SentinelDeployment> {
  const servers: RedisServer[] = [];
  let proc: ChildProcess | undefined;
  let sentinel: Redis | undefined;
  let dir: string | undefined;
  const destroy = async () => {
    sentinel?.disconnect();
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const p = proc;
      await new Promise<void>((resolve) => {
        p.once('exit', () => resolve());
        p.kill('SIGKILL');
      });
    }
    await Promise.all(servers.map((s) => destroyRedis(s)));
    if (dir) rmSync(dir, { recursive: true, force: true });
  };
  try {
    const master = await startRedis();
    servers.push(master);
    const replica = await startRedis(['--replicaof', '127.0.0.1', String(master.port)]);
    servers.push(replica);
    const probe = replica.client();
    await waitUntil(async () => /master_link_status:up/.test(await probe.info('replication')), 'replication', 15_000);
    probe.disconnect();

    const port = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'keygate-sentinel-'));
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
        ...(opts.sentinelConfig ?? []),
        '',
      ].join('\n'),
    );
    // `redis-server <conf> --sentinel` is what the `redis-sentinel` name runs (that link is not always installed).
    const p = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
    proc = p;
    const exited = new Promise<never>((_, reject) => {
      p.once('error', reject);
      p.once('exit', (code) => reject(new Error(`redis sentinel exited with ${code}`)));
    });
    exited.catch(() => {});
    const sc = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 100, maxRetriesPerRequest: 1 });
    sentinel = sc;
    sc.on('error', () => {});
    const masterPort = async () => {
      const addr = (await sc.call('SENTINEL', 'get-master-addr-by-name', MASTER_NAME)) as string[] | null;
      return addr ? Number(addr[1]) : 0;
    };
    // Ready when the sentinel has discovered the replica.
    await Promise.race([
      exited,
      waitUntil(async () => {
        const replicas = (await sc.call('SENTINEL', 'replicas', MASTER_NAME)) as unknown[];
        return (await masterPort()) === master.port && replicas.length === 1;
      }, 'sentinel discovery', 20_000),
    ]);

    const promoted = async (timeoutMs: number) => {
      const old = d.master;
      await waitUntil(async () => (await masterPort()) === d.replica.port, 'sentinel failover', timeoutMs);
      d.master = d.replica;
      d.replica = old;
    };
    const d: SentinelDeployment = {
      url: `redis-sentinel://127.0.0.1:${port}/${MASTER_NAME}`,
      master,
      replica,
      async failover(timeoutMs = 30_000) {
        await d.master.stop();
        await promoted(timeoutMs);
      },
      async switchover(timeoutMs = 30_000) {
        await sc.call('SENTINEL', 'FAILOVER', MASTER_NAME);
        await promoted(timeoutMs);
      },
      destroy,
    };
    return d;
  } catch (err) {
    await destroy();
    throw err;
  }
}
