/** The JSON forms of webhook endpoints and dead letters (API answers and the CLI's --json). */
import type { DeadLetter, Endpoint } from './webhooks.ts';
import type { EventJson } from './types.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export interface WebhookJson {
  id: string;
  url: string;
  account: string | null;
  events: string[] | null;
  status: 'active' | 'disabled';
  created_at: string;
  failing_since: string | null;
  disabled_at: string | null;
}

export function webhookJson(e: Endpoint): WebhookJson {
  return { id: e.id, url: e.url, account: e.account, events: e.events ? [...e.events] : null, status: e.status, created_at: iso(e.createdAt)!, failing_since: iso(e.failingSince), disabled_at: iso(e.disabledAt) };
}

export function deadJson(d: DeadLetter): { event: EventJson; attempts: number; last_error: string; dead_at: string } {
  return { event: d.event, attempts: d.attempts, last_error: d.lastError, dead_at: iso(d.deadAt)! };
}
