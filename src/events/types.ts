/**
 * Events: the types, the JSON a receiver gets (`{id, type, created_at, account, data}`), and the
 * event id. An event's id and time come from its stream entry id (`<ms>-<seq>`, stamped by Redis),
 * so a Lua script publishes with one XADD and no id of its own:
 *   id = "evt_" <ms> "_" <seq> "_" <first 8 hex of sha1(account)>
 * unique across accounts, stable across redeliveries (receivers de-duplicate on it).
 */
import { createHash } from 'node:crypto';
import { NO_ACCOUNT } from '../schema/events.ts';

export const EVENT_TYPES = [
  'key.created',
  'key.revoked',
  'key.rolled',
  'key.expired',
  'key.limit.threshold',
  'account.disabled',
  'account.enabled',
  'wallet.credited',
  'wallet.low',
  'wallet.empty',
  'webhook.disabled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const EVENT_ID_PATTERN = /^evt_(\d{1,16})_(\d{1,16})_([0-9a-f]{8})$/;

export interface EventJson {
  readonly id: string;
  readonly type: string;
  readonly created_at: string;
  readonly account: string | null;
  readonly data: Record<string, unknown>;
}

export function accountTag(account: string): string {
  return createHash('sha1').update(account).digest('hex').slice(0, 8);
}

export function eventId(streamId: string, account: string): string {
  const [ms, seq] = streamId.split('-');
  return `evt_${ms}_${seq}_${accountTag(account)}`;
}

/** An event from its stream entry (XRANGE form); null when the entry is not an event. */
export function eventFromEntry(streamId: string, fields: readonly string[], account: string): EventJson | null {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
  if (typeof f.type !== 'string') return null;
  let data: Record<string, unknown> = {};
  try {
    const d = JSON.parse(f.data ?? '{}') as unknown;
    if (d !== null && typeof d === 'object' && !Array.isArray(d)) data = d as Record<string, unknown>;
  } catch {
    return null;
  }
  const ms = Number(streamId.split('-')[0]);
  return { id: eventId(streamId, account), type: f.type, created_at: new Date(ms).toISOString(), account: account === NO_ACCOUNT ? null : account, data };
}
