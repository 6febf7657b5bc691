/**
 * Redis records of events and webhooks (docs/events.md, docs/redis-schema.md "Events and webhooks").
 *
 *   {ns}:v1:events:{acct}             STREAM the account's events (type, account, data), capped
 *   {ns}:v1:alerts:{acct}             HASH   alert settings and their fired flags (wallet low/empty, key thresholds)
 *   {ns}:v1:whstate:{acct}            HASH   endpoint id → delivery state of that endpoint on this account's stream (JSON)
 *   {ns}:v1:whlease:{acct}:{endpoint} STRING the console delivering this endpoint × account now (PX lease)
 *   {ns}:v1:{wh}:eventaccts           SET    accounts with an event stream ('*' = events of no account)
 *   {ns}:v1:{wh}:due                  ZSET   account → when the worker should look at it next (epoch ms; 0 = now)
 *   {ns}:v1:{wh}:endpoints            HASH   endpoint id → endpoint record (JSON, the secret sealed)
 *   {ns}:v1:{wh}:dead:{endpoint}      LIST   the endpoint's dead letters (newest first, capped)
 *   {ns}:v1:{wh}:replay:{endpoint}    LIST   dead letters asked to be delivered again
 *   {ns}:v1:{wh}:replaylease:{endpoint} STRING the console delivering the endpoint's replays now
 *   {ns}:v1:{wh}:expiries             ZSET   "account key_id" by expiry (epoch ms): key.expired
 *   {ns}:v1:{wh}:expiries:filled      STRING when a console filled `expiries` from the keys made before it existed (epoch ms)
 *
 * Account records carry the hash tag `{acct}` (the money records' slot), so a money script can XADD
 * its event in the same atomic script; the shared records carry `{wh}` (one slot).
 */
import { SCHEMA_VERSION } from './redis-schema.ts';

/** The pseudo-account of events that belong to no account (an all-accounts endpoint disabled). */
export const NO_ACCOUNT = '*';
/** Entries kept per account stream (approximate trim): an endpoint further behind loses the oldest. */
export const EVENT_STREAM_MAXLEN = 100_000;
export const DEAD_LETTERS_KEPT = 1_000;
export const ENDPOINTS_MAX = 1_000;
export const ENDPOINTS_PER_ACCOUNT_MAX = 20;
/** A webhook endpoint's id: `wh_` and 20 letters or digits. */
export const ENDPOINT_ID_PATTERN = /^wh_[0-9A-Za-z]{20}$/;
/** ENDPOINT_ID_PATTERN in words, for error messages. */
export const ENDPOINT_ID_RULE = 'wh_ followed by 20 letters and digits';

/** Fields of an event stream entry. */
export const EventField = { type: 'type', account: 'account', data: 'data' } as const;

/** Fields of the alerts hash. */
export const AlertField = {
  walletLow: 'wallet_low',
  walletLowFired: 'wallet_low_fired',
  walletEmptyFired: 'wallet_empty_fired',
  keyThresholds: (keyId: string) => `kthr:${keyId}`,
  keyFired: (keyId: string) => `kfired:${keyId}`,
} as const;

export interface EventsSchema {
  stream(account: string): string;
  alerts(account: string): string;
  deliveryState(account: string): string;
  lease(account: string, endpointId: string): string;
  accounts(): string;
  due(): string;
  endpoints(): string;
  dead(endpointId: string): string;
  replay(endpointId: string): string;
  replayLease(endpointId: string): string;
  expiries(): string;
  expiriesFilled(): string;
}

export function eventsSchema(ns: string): EventsSchema {
  const base = `${ns}:v${SCHEMA_VERSION}:`;
  return {
    stream: (a) => `${base}events:{${a}}`,
    alerts: (a) => `${base}alerts:{${a}}`,
    deliveryState: (a) => `${base}whstate:{${a}}`,
    lease: (a, e) => `${base}whlease:{${a}}:${e}`,
    accounts: () => `${base}{wh}:eventaccts`,
    due: () => `${base}{wh}:due`,
    endpoints: () => `${base}{wh}:endpoints`,
    dead: (e) => `${base}{wh}:dead:${e}`,
    replay: (e) => `${base}{wh}:replay:${e}`,
    replayLease: (e) => `${base}{wh}:replaylease:${e}`,
    expiries: () => `${base}{wh}:expiries`,
    expiriesFilled: () => `${base}{wh}:expiries:filled`,
  };
}
