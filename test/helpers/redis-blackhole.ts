/**
 * A TCP proxy in front of a real redis-server (node:net) that can stop forwarding without closing
 * any socket: a link that dies silently, with no FIN and no RST, as behind a dead NAT or a
 * partitioned network. Bytes read while blackholed are dropped; `heal()` forwards again and
 * closes the connections that lost bytes (a real peer would never resync them).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface BlackholeProxy {
  readonly port: number;
  /** `redis://127.0.0.1:<proxy port>` */
  readonly url: string;
  /** Stop forwarding in both directions on every connection, open or new; nothing is closed. */
  blackhole(): void;
  /** Forward again; connections that dropped bytes are destroyed (the client reconnects). */
  heal(): void;
  close(): Promise<void>;
}

export async function startBlackholeProxy(targetPort: number): Promise<BlackholeProxy> {
  let holed = false;
  const pairs = new Set<{ client: Socket; upstream: Socket; lost: boolean }>();
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    const pair = { client, upstream, lost: false };
    pairs.add(pair);
    const forward = (from: Socket, to: Socket) =>
      from.on('data', (chunk) => {
        if (holed) pair.lost = true;
        else to.write(chunk);
      });
    forward(client, upstream);
    forward(upstream, client);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    blackhole() {
      holed = true;
    },
    heal() {
      holed = false;
      for (const p of pairs) if (p.lost) {
        p.client.destroy();
        p.upstream.destroy();
      }
    },
    async close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
