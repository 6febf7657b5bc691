/**
 * The delivery worker's start and stop over a Redis client and namespace (`keygate console` starts
 * it: src/console-api/main.ts calls `startEventDelivery`).
 */
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { loadWebhookConfig, type WebhookConfig } from './config.ts';
import type { Resolver } from './ssrf.ts';
import { WebhookStore } from './webhooks.ts';
import { DeliveryWorker } from './worker.ts';

export interface EventDelivery {
  readonly worker: DeliveryWorker;
  readonly config: WebhookConfig;
  stop(timeoutMs?: number): Promise<void>;
}

/** Where the events are: the console's Redis client and namespace. */
export interface EventStore {
  readonly redis: Redis | Cluster;
  readonly namespace: string;
}

/** Starts the worker; the endpoints' secrets are opened with `revealKey`, else KEYGATE_REVEAL_KEY. */
export function startEventDelivery(store: EventStore, log: Logger, opts: { revealKey?: string; env?: NodeJS.ProcessEnv; pollMs?: number; leaseMs?: number; resolve?: Resolver } = {}): EventDelivery {
  const config = loadWebhookConfig(opts.env);
  const worker = new DeliveryWorker({
    redis: store.redis,
    namespace: store.namespace,
    webhooks: new WebhookStore(store.redis, store.namespace, opts.revealKey),
    config,
    log,
    pollMs: opts.pollMs,
    leaseMs: opts.leaseMs,
    resolve: opts.resolve,
  });
  worker.start();
  return { worker, config, stop: (t) => worker.stop(t) };
}
