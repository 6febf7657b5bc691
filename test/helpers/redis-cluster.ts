/**
 * A three-master Redis Cluster of real processes (no replicas), created with
 * `redis-cli --cluster create`, on free loopback ports.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { destroyRedis, startRedis, type RedisServer } from './redis-server.ts';

const run = promisify(execFile);

export interface ClusterDeployment {
  /** `redis-cluster://…` with every node. */
  readonly url: string;
  readonly nodes: RedisServer[];
  /** A cluster client for seeding (queues while connecting). */
  client(): Cluster;
  /** The node that holds `key`. */
  nodeOf(key: string): Promise<RedisServer>;
  destroy(): Promise<void>;
}

/** If anything fails halfway through the setup, every node already started is stopped. */
/** `extraArgs`: more redis-server arguments for every node (e.g. `--cluster-require-full-coverage no`). */
export async function startCluster(masters = 3, extraArgs: string[] = []): Promise<ClusterDeployment> {
  const started = await Promise.allSettled(
    Array.from({ length: masters }, () => startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000', ...extraArgs])),
  );
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const probes: Redis[] = [];
  try {
    if (nodes.length < masters) throw (started.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason;
    await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 });
    for (const n of nodes) probes.push(new Redis({ port: n.port, host: '127.0.0.1' }));
    for (const p of probes) p.on('error', () => {});
    const deadline = Date.now() + 20_000;
    for (;;) {
      const infos = await Promise.all(probes.map((p) => p.cluster('INFO') as Promise<string>));
      if (infos.every((i) => i.includes('cluster_state:ok') && i.includes(`cluster_known_nodes:${masters}`))) break;
      if (Date.now() > deadline) throw new Error('cluster did not become ok');
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (err) {
    for (const p of probes) p.disconnect();
    await Promise.all(nodes.map((n) => destroyRedis(n)));
    throw err;
  }
  const clients: Cluster[] = [];
  return {
    url: `redis-cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`,
    nodes,
    client() {
      const c = new Cluster(nodes.map((n) => ({ host: '127.0.0.1', port: n.port })));
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    async nodeOf(key: string) {
      const slot = Number(await probes[0]!.cluster('KEYSLOT', key));
      const slots = (await probes[0]!.cluster('SLOTS')) as unknown as Array<[number, number, [string, number]]>;
      const owner = slots.find(([lo, hi]) => slot >= lo && slot <= hi)!;
      return nodes.find((n) => n.port === Number(owner[2][1]))!;
    },
    async destroy() {
      for (const c of clients) c.disconnect();
      for (const p of probes) p.disconnect();
      await Promise.all(nodes.map((n) => destroyRedis(n)));
    },
  };
}
