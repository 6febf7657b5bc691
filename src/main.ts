/**
 * Wiring only: config → store → authorizer → transports → admin. `startSidecar` returns a handle
 * that the CLI (`keygate serve`), the tests and the benchmark all use.
 */
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import { AdminServer } from './admin/server.ts';
import { Authorizer } from './authorizer.ts';
import type { Config } from './config.ts';
import { closeAll, shutdownSequence, type Closable } from './lifecycle.ts';
import { schema } from './schema/redis-schema.ts';
import { createKeyStore, type CachedKeyStore } from './store/index.ts';
import { decisionLogger } from './telemetry/decision-log.ts';
import { Metrics } from './telemetry/metrics.ts';
import { GrpcTransport } from './transport/grpc/server.ts';
import { H2GrpcTransport } from './transport/grpc-h2/server.ts';
import { HttpTransport } from './transport/http/server.ts';

/**
 * The ext_authz gRPC server by `KEYGATE_GRPC_TRANSPORT`; all serve the same services with the same
 * wire behaviour. connect loads lazily: its codecs are generated at install time.
 */
const GRPC_TRANSPORTS = {
  'grpc-js': async () => GrpcTransport,
  h2: async () => H2GrpcTransport,
  connect: async () => (await import('./transport/grpc-connect/server.ts')).ConnectGrpcTransport,
} as const;

export interface Sidecar {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly adminPort: number;
  readonly authorizer: Authorizer;
  readonly metrics: Metrics;
  /** The cached store: `stats()` (hits, misses, invalidations, flushes, …), `ready()`. */
  readonly store: CachedKeyStore;
  /** Ready as `/readyz` reports it: store reachable and not draining. */
  ready(): boolean;
  /**
   * Graceful stop (SIGTERM): readiness false at once, keep serving for `drainDelayMs` so that
   * Envoy and the kubelet notice, then close the transports (in-flight checks finish), the admin
   * port and the store. Everything is bounded by `shutdownTimeoutMs` from the call.
   */
  shutdown(): Promise<void>;
  /** `shutdown` without the drain delay (tests, embedding). */
  close(): Promise<void>;
}

export type { Closable } from './lifecycle.ts';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

export async function startSidecar(config: Config, log: Logger): Promise<Sidecar> {
  const metrics = new Metrics({ version });
  const s = schema(config.redisNamespace);
  const store = createKeyStore(config, s, log, (client, connection) => metrics.watchRedis(client, connection));
  metrics.addStoreStats(() => {
    const st = store.stats();
    return { cacheHits: st.hits, cacheMisses: st.misses, cacheInvalidations: st.invalidations, cacheSize: st.size };
  });
  const authorizer = new Authorizer(store, { keyPrefix: config.keyPrefix, pathPrefixes: config.pathPrefixes }, log);
  authorizer.observe(metrics.observer);
  authorizer.observe(decisionLogger(authorizer, log));

  let draining = false;
  const readiness = () => ({ store: store.ready(), draining });
  const ready = () => {
    const r = readiness();
    return r.store && !r.draining;
  };
  metrics.setReadiness(ready);

  /** Transports in the order they are closed (all at once); new ones slot in here. */
  const transports: Closable[] = [];

  try {
    const Transport = await GRPC_TRANSPORTS[config.grpcTransport]();
    const grpc = new Transport(
      authorizer,
      {
        host: config.listenHost,
        port: config.grpcPort,
        maxReceiveBytes: config.grpcMaxReceiveBytes,
        accountHeader: config.accountHeader,
        keyIdHeader: config.keyIdHeader,
        stripKeyHeaders: config.stripKeyHeaders,
        errorDomain: config.errorDomain,
      },
      log,
    );
    transports.push({
      name: 'grpc',
      close: async (timeoutMs) => {
        await grpc.close(timeoutMs);
      },
    });
    metrics.addInFlight(() => grpc.inFlight);
    const grpcPort = await grpc.listen();

    const http = new HttpTransport(
      authorizer,
      {
        host: config.listenHost,
        port: config.httpPort,
        maxBodyBytes: config.httpMaxBodyBytes,
        accountHeader: config.accountHeader,
        keyIdHeader: config.keyIdHeader,
        stripKeyHeaders: config.stripKeyHeaders,
        errorDomain: config.errorDomain,
      },
      log,
    );
    transports.push({ name: 'http', close: (timeoutMs) => http.close(timeoutMs) });
    metrics.addInFlight(() => http.inFlight);
    const httpPort = await http.listen();
    grpc.setServing(true);

    const admin = new AdminServer({ host: config.adminHost, port: config.adminPort, readiness, metrics }, log);
    const adminPort = await admin.listen();
    log.info({ grpcPort, httpPort, adminPort }, 'keygate listening');

    const stop = shutdownSequence(
      {
        shutdownTimeoutMs: config.shutdownTimeoutMs,
        drain: () => {
          draining = true;
          grpc.setServing(false);
        },
        transports,
        admin: { name: 'admin', close: (t) => admin.close(t) },
        store,
      },
      log,
    );

    return {
      grpcPort,
      httpPort,
      adminPort,
      authorizer,
      metrics,
      store,
      ready,
      shutdown: () => stop(config.drainDelayMs),
      close: () => stop(0),
    };
  } catch (err) {
    await closeAll(transports, Date.now() + 1000, log);
    await store.close();
    throw err;
  }
}
