/**
 * Settings of webhook delivery (environment only; read by `keygate console` and the CLI):
 *   KEYGATE_WEBHOOK_RETRY_SCHEDULE      seconds before each retry, comma-separated (default below: 13 attempts over ~52 h)
 *   KEYGATE_WEBHOOK_ALLOW_PRIVATE       true: loopback/private/link-local destinations allowed (default false)
 *   KEYGATE_WEBHOOK_DISABLE_AFTER_DAYS  an endpoint failing without a success this long is disabled (default 5)
 *   KEYGATE_WEBHOOK_TIMEOUT_MS          one delivery attempt, connect to answer (default 10000)
 *   KEYGATE_WEBHOOK_CONCURRENCY         deliveries in flight per console (default 8)
 */
import { ConfigError } from '../config.ts';

export const DEFAULT_RETRY_SCHEDULE = [10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400] as const;

export interface WebhookConfig {
  readonly retryScheduleSeconds: readonly number[];
  readonly allowPrivate: boolean;
  readonly disableAfterMs: number;
  readonly timeoutMs: number;
  readonly concurrency: number;
}

function int(env: NodeJS.ProcessEnv, name: string, d: number, min: number, max: number): number {
  const v = env[name];
  if (v === undefined || v === '') return d;
  if (!/^\d{1,9}$/.test(v.trim()) || Number(v) < min || Number(v) > max) throw new ConfigError(`invalid setting ${name}: an integer from ${min} to ${max}`);
  return Number(v);
}

export function loadWebhookConfig(env: NodeJS.ProcessEnv = process.env): WebhookConfig {
  let schedule: readonly number[] = DEFAULT_RETRY_SCHEDULE;
  const raw = env.KEYGATE_WEBHOOK_RETRY_SCHEDULE;
  if (raw !== undefined && raw.trim() !== '') {
    const parts = raw.split(',').map((s) => s.trim());
    if (parts.length > 50 || !parts.every((p) => /^\d{1,7}(\.\d{1,3})?$/.test(p) && Number(p) > 0)) {
      throw new ConfigError('invalid setting KEYGATE_WEBHOOK_RETRY_SCHEDULE: up to 50 positive numbers of seconds, comma-separated, e.g. 10,60,300');
    }
    schedule = parts.map(Number);
  }
  const ap = (env.KEYGATE_WEBHOOK_ALLOW_PRIVATE ?? '').trim();
  if (ap !== '' && ap !== 'true' && ap !== 'false') throw new ConfigError('invalid setting KEYGATE_WEBHOOK_ALLOW_PRIVATE: true or false');
  return {
    retryScheduleSeconds: schedule,
    allowPrivate: ap === 'true',
    disableAfterMs: int(env, 'KEYGATE_WEBHOOK_DISABLE_AFTER_DAYS', 5, 1, 365) * 86_400_000,
    timeoutMs: int(env, 'KEYGATE_WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
    concurrency: int(env, 'KEYGATE_WEBHOOK_CONCURRENCY', 8, 1, 256),
  };
}
