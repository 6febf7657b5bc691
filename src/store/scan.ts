/**
 * Every key name under a prefix, by SCAN on each master (a Cluster's keys are spread over its
 * masters; a standalone or Sentinel client is its own one master), `count` names a step. For the
 * console's rare whole-dataset passes; the sidecar never scans.
 */
import type { Cluster, Redis } from 'ioredis';

export async function* scanPrefix(r: Redis | Cluster, prefix: string, count = 200): AsyncGenerator<string> {
  const nodes: Redis[] = 'nodes' in r && typeof r.nodes === 'function' ? (r as Cluster).nodes('master') : [r as Redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, names] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', count);
      cursor = next;
      yield* names;
    } while (cursor !== '0');
  }
}
