/**
 * Wiring only: config → store → authorizer → transports → admin. `startSidecar` returns a handle
 * that the CLI (`keygate serve`), the tests and the benchmark all use.
 */
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import { AdminServer } from './admin/server.ts';
import { Authorizer } from './authorizer.ts';
import type { Config } from './config.ts';
import { closeAll, shutdownSequence } from './lifecycle.ts';
import { decisionPhases } from './pipeline/index.ts';
import { parseCredentialKeyring } from './keys/credential-crypto.ts';
import { parseCredentialHeaders } from './core/upstream-credential.ts';
import { EndpointCatalog } from './core/endpoints/catalog.ts';
import { schema } from './schema/redis-schema.ts';
import { createSidecarStore, type CachedRecordSource } from './store/index.ts';
import { rateKeys } from './schema/rates.ts';
import type { UsageCounter } from './store/usage-counter.ts';
import { endpointRefusalObserver } from './telemetry/endpoint-metrics.ts';
import { createMeter } from './metering/wiring.ts';
import type { Meter } from './metering/meter.ts';
import { DecisionLog } from './telemetry/decision-log.ts';
import { GatewayProblemLog } from './telemetry/gateway-problem.ts';
import { AccountMetrics } from './telemetry/account-metrics.ts';
import { MeteredHub } from './telemetry/metered.ts';
import { Metrics } from './telemetry/metrics.ts';
import type { Otel } from './telemetry/otel.ts';
import type { GrpcServerOptions } from './transport/envoy/grpc.ts';
import { H2GrpcTransport } from './transport/h2/server.ts';
import { HttpTransport } from './transport/http/server.ts';
import { responseOptions } from './transport/response-options.ts';
import type { Transport } from './transport/transport.ts';
import type { ServiceSet } from './transport/service.ts';
import { envoyServices } from './transport/envoy/services/registry.ts';
import type { Clock } from './core/clock.ts';

/**
 * The gRPC server by `KEYGATE_GRPC_TRANSPORT`: h2 (production) or grpc-js (the fallback, loaded
 * only when chosen); both serve the same service set with the same wire behaviour.
 */
const GRPC_TRANSPORTS: Record<Config['grpcTransport'], (s: ServiceSet, o: GrpcServerOptions, l: Logger) => Promise<Transport>> = {
  h2: async (s, o, l) => new H2GrpcTransport(s, o, l),
  'grpc-js': async (s, o) => new (await import('./transport/grpc-js/server.ts')).GrpcTransport(s, o),
};

export interface Sidecar {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly adminPort: number;
  readonly authorizer: Authorizer;
  readonly metrics: Metrics;
  /** The cached store: `stats()` (hits, misses, invalidations, flushes, …), `ready()`. */
  readonly store: CachedRecordSource;
  /** Per-key request counts flushed once a second (null when `KEYGATE_COUNT_USAGE=false`). */
  readonly usage: UsageCounter | null;
  /**
   * Where the metering service reports each booked response (`booked(response)`): per-account
   * metrics and OpenTelemetry subscribe to it when they are on.
   */
  readonly metered: MeteredHub;
  /** The metering runtime (ext_proc streams, the booker); null when `KEYGATE_METER=false`. */
  readonly meter: Meter | null;
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

/** What a caller other than `serve` may supply: tests use a clock of their own. */
export interface SidecarDeps {
  /** The clock expiries, spend-limit blocks and rate windows are read on (default `systemClock`). */
  readonly clock?: Clock;
}

export async function startSidecar(config: Config, log: Logger, deps: SidecarDeps = {}): Promise<Sidecar> {
  const metrics = new Metrics({ version });
  const s = schema(config.redisNamespace);
  // records, Redis links, rate limiter, token views, settings, usage counters: one value
  const sidecarStore = createSidecarStore(config, s, log, { watch: (client, connection) => metrics.watchRedis(client, connection), clock: deps.clock });
  const { records: store, limiter, tokenViews, outage, usage, refusals } = sidecarStore;
  metrics.addStoreStats(() => {
    const st = store.stats();
    return { cacheHits: st.hits, cacheMisses: st.misses, cacheInvalidations: st.invalidations, cacheSize: st.size };
  });
  const authorizer = new Authorizer(
    store,
    { keyPrefix: config.keyPrefix, pathPrefixes: config.pathPrefixes, modelEndpoints: config.modelEndpoints, requireWallet: config.requireWallet, clock: deps.clock,
      phases: decisionPhases({
        rates: { limiter, tokenViews, keys: rateKeys(s) },
        // Accounts' own upstream credentials (docs/credentials.md): without the key, none is injected and
        // an account that has one is refused (503) rather than sent upstream with the gateway's.
        credentials: { ring: config.credentialKey.trim() === '' ? null : parseCredentialKeyring(config.credentialKey), headers: parseCredentialHeaders(config.credentialHeaders), requireOwn: config.requireOwnCredential },
        endpoints: new EndpointCatalog(config.endpoints, config.pathPrefixes),
        usageGuarantee: config.meterForceUsage, // SPEC 15: the Check refuses what metering could not make ask for usage
      }) },
    log,
  );
  authorizer.observe(metrics.observer);
  const metered = new MeteredHub();
  // Optional observers are installed only when switched on: off, the decision path never sees them.
  if (config.metricsAccountLabels) {
    const accounts = new AccountMetrics(metrics.registry, config.metricsMaxAccounts);
    authorizer.observe(accounts.decisionObserver);
    metered.observe(accounts.meteredObserver);
  }
  const otel = await startOtelIfConfigured(config, log);
  if (otel?.decisionObserver) authorizer.observe(otel.decisionObserver);
  if (otel) metered.observe(otel.meteredObserver);
  const problems = new GatewayProblemLog(log);
  authorizer.onGatewayProblem((problem, where) => problems.note(problem, where));
  const decisions = new DecisionLog(log);
  if (usage) {
    metrics.addStoreStats(() => ({ usageDropped: usage.dropped, usageFlushFailures: usage.failedFlushes, usagePendingKeys: usage.pendingKeys }));
    authorizer.observe((outcome) => {
      const d = outcome.decision;
      if (d.allow) usage.count(d.keyId, d.accountId);
    });
  }
  // The endpoint rule's refusals per key (the page's "refused: endpoint"), on the usage counts' connection and bounds.
  if (refusals) {
    authorizer.observe((outcome) => {
      const d = outcome.decision;
      if (!d.allow && d.refusal !== undefined && d.keyId !== undefined && outcome.accountId !== undefined) refusals.count(d.keyId, outcome.accountId);
    });
  }
  authorizer.observe(endpointRefusalObserver(metrics.registry));
  const meter = config.meter ? createMeter(config, s, store, metrics, log, metered) : null;
  const closeStore = async () => {
    // Open streams are booked from what they saw, then the booker drains (bounded).
    if (meter) await meter.close(Date.now() + Math.min(5000, config.shutdownTimeoutMs));
    decisions.close();
    await sidecarStore.close();
    await otel?.shutdown();
  };
  authorizer.observe(decisions.observer);

  let draining = false;
  const readiness = () => {
    const up = store.ready();
    const reason = draining ? 'shutting down' : up ? undefined : (outage.reason() ?? 'the key store is not ready (Redis connection or cache invalidation link not up yet)');
    return { store: up, draining, ...(reason ? { reason } : {}) };
  };
  const ready = () => {
    const r = readiness();
    return r.store && !r.draining;
  };
  metrics.setReadiness(ready);

  /** Transports started so far, closed together on stop (or when a later start fails). */
  const transports: Transport[] = [];
  const start = async (t: Transport): Promise<number> => {
    transports.push(t);
    metrics.addInFlight(() => t.inFlight);
    return t.listen();
  };
  const respond = responseOptions(config);

  try {
    const grpcPort = await start(
      await GRPC_TRANSPORTS[config.grpcTransport](
        // Check, health, and ext_proc Process when metering is on
        envoyServices({ authorizer, meter }, respond, log),
        { ...respond, host: config.listenHost, port: config.grpcPort, maxReceiveBytes: config.grpcMaxReceiveBytes,
          receiveTimeoutMs: config.grpcReceiveTimeoutMs,
          maxBufferedBytes: config.grpcMaxBufferedBytes,
          maxConnectionBufferedBytes: config.grpcMaxConnectionBufferedBytes,
        },
        log,
      ),
    );
    const httpPort = await start(
      new HttpTransport(authorizer, { ...respond, host: config.listenHost, port: config.httpPort, maxBodyBytes: config.httpMaxBodyBytes }, log),
    );
    for (const t of transports) t.setServing(true);

    const admin = new AdminServer({ host: config.adminHost, port: config.adminPort, readiness, metrics }, log);
    const adminPort = await admin.listen();
    log.info({ grpcPort, httpPort, adminPort }, 'keygate listening');
    if (config.credentialKey.trim() === '') {
      log.info("KEYGATE_CREDENTIAL_KEY is not set: accounts' own upstream credentials are not injected, and requests of an account that has one are refused (503) until it is set (docs/credentials.md)");
    }

    const stop = shutdownSequence(
      {
        shutdownTimeoutMs: config.shutdownTimeoutMs,
        drain: () => {
          draining = true;
          for (const t of transports) t.setServing(false);
        },
        transports,
        admin: { name: 'admin', close: (t) => admin.close(t) },
        store: { close: closeStore },
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
      usage,
      metered,
      meter,
      ready,
      shutdown: () => stop(config.drainDelayMs),
      close: () => stop(0),
    };
  } catch (err) {
    await closeAll(transports, Date.now() + 1000, log);
    await closeStore();
    throw err;
  }
}

/**
 * OpenTelemetry export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set and a signal is not `none`; its
 * module (and the SDK) is loaded only then.
 */
async function startOtelIfConfigured(config: Config, log: Logger): Promise<Otel | null> {
  const traces = config.otlpTraces === 'otlp';
  const metrics = config.otlpMetrics === 'otlp';
  if (config.otlpEndpoint === '' || (!traces && !metrics)) return null;
  const { startOtel } = await import('./telemetry/otel.ts');
  return startOtel(
    {
      endpoint: config.otlpEndpoint,
      traces,
      metrics,
      serviceName: config.otlpServiceName,
      version,
      unparentedRatio: config.traceUnparentedRatio,
      metricsIntervalMs: config.otlpMetricsIntervalMs,
    },
    log,
  );
}
