/**
 * The events side of `keygate console`: the webhook store bound to a management console, and the
 * delivery worker's start and stop (src/console-api/main.ts calls `startEventDelivery`).
 */
import type { Logger } from 'pino';
import type { ConsoleService } from '../console/service.ts';
import { loadWebhookConfig, type WebhookConfig } from './config.ts';
import type { Resolver } from './ssrf.ts';
import { WebhookStore } from './webhooks.ts';
import { DeliveryWorker } from './worker.ts';

const stores = new WeakMap<ConsoleService, WebhookStore>();

/** The console's webhook store (sealed with `revealKey`, else KEYGATE_REVEAL_KEY). */
export function webhooksOf(mc: ConsoleService, revealKey?: string): WebhookStore {
  let s = stores.get(mc);
  if (!s) {
    s = new WebhookStore(mc.redis, mc.schema.ns, revealKey);
    stores.set(mc, s);
  }
  return s;
}

export interface EventDelivery {
  readonly worker: DeliveryWorker;
  readonly config: WebhookConfig;
  stop(timeoutMs?: number): Promise<void>;
}

export function startEventDelivery(mc: ConsoleService, log: Logger, opts: { revealKey?: string; env?: NodeJS.ProcessEnv; pollMs?: number; leaseMs?: number; resolve?: Resolver } = {}): EventDelivery {
  const config = loadWebhookConfig(opts.env);
  const worker = new DeliveryWorker({
    redis: mc.redis,
    namespace: mc.schema.ns,
    webhooks: webhooksOf(mc, opts.revealKey),
    config,
    log,
    pollMs: opts.pollMs,
    leaseMs: opts.leaseMs,
    resolve: opts.resolve,
  });
  worker.start();
  return { worker, config, stop: (t) => worker.stop(t) };
}
