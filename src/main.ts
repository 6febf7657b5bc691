/**
 * Wiring only: config → store → authorizer → transports → admin. `startSidecar` returns a handle
 * that the CLI (`keygate serve`), the tests and the benchmark all use.
 */
import type { Logger } from 'pino';
import { Authorizer } from './authorizer.ts';
import type { Config } from './config.ts';
import { schema } from './schema/redis-schema.ts';
import { connectRedis } from './store/redis.ts';
import { RedisKeyStore } from './store/redis-store.ts';
import { GrpcTransport } from './transport/grpc/server.ts';
import { HttpTransport } from './transport/http/server.ts';

export interface Sidecar {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly authorizer: Authorizer;
  /** Graceful stop: not ready, drain, close. */
  close(): Promise<void>;
}

export async function startSidecar(config: Config, log: Logger): Promise<Sidecar> {
  const s = schema(config.redisNamespace);
  const redis = connectRedis(config.redisUrl, { commandTimeoutMs: config.redisTimeoutMs, connectionName: 'keygate-sidecar' });
  redis.on('error', (err: Error) => log.warn({ err: { message: err.message } }, 'redis connection error'));
  const store = new RedisKeyStore(redis, s, log);
  const authorizer = new Authorizer(store, { keyPrefix: config.keyPrefix, pathPrefixes: config.pathPrefixes }, log);

  const grpc = new GrpcTransport(
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
  const httpPort = await http.listen();
  grpc.setServing(true);
  log.info({ grpcPort, httpPort }, 'keygate listening');

  return {
    grpcPort,
    httpPort,
    authorizer,
    async close() {
      grpc.setServing(false);
      await Promise.all([grpc.close(config.shutdownTimeoutMs), http.close(config.shutdownTimeoutMs)]);
      await store.close();
    },
  };
}
