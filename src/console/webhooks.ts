/**
 * Webhook endpoints, one resource of the console service (src/console/service.ts; docs/events.md):
 * create (the destination checked against the SSRF rule, the secret sealed and shown once), list,
 * get, remove (with its dead letters and replays), dead letters and their replay. Each change is
 * audited (`webhook_create`, `webhook_remove`, `webhook_replay`) in its own script on standalone
 * and Sentinel; on Cluster (the audit lists are in another slot) the event follows a change that
 * took place. The records, their codec and the delivery worker's side are the events library's
 * (src/events/webhooks.ts).
 */
import { randomBytes } from 'node:crypto';
import { loadWebhookConfig } from '../events/config.ts';
import { checkDestination, DestinationError, type Resolver } from '../events/ssrf.ts';
import { EVENT_ID_PATTERN, EVENT_TYPES } from '../events/types.ts';
import { encodeEndpoint, publicEndpoint, SECRET_PREFIX, type DeadLetter, type Endpoint, type StoredEndpoint } from '../events/webhooks.ts';
import { RevealKeyError } from '../keys/crypto.ts';
import { ENDPOINT_ID_PATTERN, ENDPOINT_ID_RULE, ENDPOINTS_MAX, ENDPOINTS_PER_ACCOUNT_MAX } from '../schema/events.ts';
import { ACCOUNT_ID_PATTERN } from '../schema/redis-schema.ts';
import type { ConsoleContext } from './context.ts';
import { ConsoleError } from './errors.ts';
import { appendAudit, eventJson, type Actor, type AuditAction } from './management.ts';
import { AUDIT_WRITE, NOW } from './scripts.ts';

/** Adds an endpoint within the bounds. KEYS: endpoints [, audit, audit of the account]. ARGV: id, record, per-account max, total max, account ('' = all) [, audit event]. */
const CREATE = `${NOW}
local all = redis.call('HVALS', KEYS[1])
if #all >= tonumber(ARGV[4]) then return 'LIMIT' end
local n = 0
for _, v in ipairs(all) do
  local ok, d = pcall(cjson.decode, v)
  if ok and type(d) == 'table' and d.account == ARGV[5] then n = n + 1 end
end
if ARGV[5] ~= '' and n >= tonumber(ARGV[3]) then return 'LIMIT' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local audit_ev = false
if #KEYS == 3 then audit_ev = ARGV[6] end
${AUDIT_WRITE(2)}
return 'OK'`;

/** Removes an endpoint with its dead letters and replays. KEYS: endpoints, dead, replay [, audit, audit of the account]. ARGV: id [, audit event]. */
const REMOVE = `${NOW}
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 'NOTFOUND' end
redis.call('DEL', KEYS[2], KEYS[3])
local audit_ev = false
if #KEYS == 5 then audit_ev = ARGV[2] end
${AUDIT_WRITE(4)}
return 'OK'`;

/** Moves one dead letter (by event id) to the replay list. KEYS: dead, replay [, audit, audit of the account]. ARGV: event id [, audit event]. */
const REPLAY = `${NOW}
local all = redis.call('LRANGE', KEYS[1], 0, -1)
for _, v in ipairs(all) do
  local ok, d = pcall(cjson.decode, v)
  if ok and type(d) == 'table' and type(d.event) == 'table' and d.event.id == ARGV[1] then
    redis.call('LREM', KEYS[1], 1, v)
    redis.call('LPUSH', KEYS[2], v)
    local audit_ev = false
    if #KEYS == 4 then audit_ev = ARGV[2] end
    ${AUDIT_WRITE(3)}
    return 'OK'
  end
end
return 'NOTFOUND'`;

/** The audit event of a change: who, what, the account, the changes. */
export interface ChangeAudit {
  readonly actor: Actor;
  readonly action: AuditAction;
  readonly account: string | null;
  readonly keyId: string | null;
  readonly changes: Record<string, unknown>;
}

/**
 * Runs a change's script; with an audit event, the script writes it too (standalone, Sentinel: its
 * two lists as the last KEYS, the event as the last ARGV), or (Cluster) it follows a change that
 * answered OK.
 */
export async function evalChange(ctx: ConsoleContext, script: string, keys: readonly string[], args: readonly string[], audit: ChangeAudit | undefined): Promise<string> {
  if (audit === undefined) return String(await ctx.redis.eval(script, keys.length, ...keys, ...args));
  const lists = ctx.auditLists(audit.account);
  const event = eventJson(audit.actor, audit.action, audit.account, audit.keyId, audit.changes);
  if (!ctx.isCluster) return String(await ctx.redis.eval(script, keys.length + 2, ...keys, ...lists, ...args, event));
  const r = String(await ctx.redis.eval(script, keys.length, ...keys, ...args));
  if (r === 'OK') await appendAudit(ctx.redis, true, lists, event);
  return r;
}

export function validateEndpointId(id: unknown): string {
  if (typeof id !== 'string' || !ENDPOINT_ID_PATTERN.test(id)) throw new ConsoleError('INVALID_INPUT', `a webhook id is ${ENDPOINT_ID_RULE}`);
  return id;
}

export function validateEventTypes(events: unknown): string[] | null {
  if (events === undefined || events === null) return null;
  if (!Array.isArray(events) || events.length === 0 || events.length > EVENT_TYPES.length) throw new ConsoleError('INVALID_INPUT', `events must be a non-empty list of: ${EVENT_TYPES.join(', ')}`);
  for (const e of events) {
    if (typeof e !== 'string' || !(EVENT_TYPES as readonly string[]).includes(e)) {
      throw new ConsoleError('INVALID_INPUT', `unknown event type ${JSON.stringify(String(e).slice(0, 40))}; one of: ${EVENT_TYPES.join(', ')}`);
    }
  }
  return [...new Set(events as string[])];
}

export interface WebhookInput {
  readonly url: unknown;
  /** null: every account (all-accounts endpoint). */
  readonly account: unknown;
  /** Event types (default: every type). */
  readonly events?: unknown;
}

/** Where a destination may point: `allowPrivate` (default KEYGATE_WEBHOOK_ALLOW_PRIVATE) and how its name resolves (a test seam). */
export interface DestinationRule {
  readonly allowPrivate?: boolean;
  readonly resolve?: Resolver;
}

/** Adds an endpoint; its signing secret is returned once (stored sealed under KEYGATE_REVEAL_KEY). */
export async function createWebhook(ctx: ConsoleContext, input: WebhookInput, actor?: Actor, rule: DestinationRule = {}): Promise<{ endpoint: Endpoint; secret: string }> {
  let url: string;
  try {
    url = (await checkDestination(input.url as string, rule.allowPrivate ?? loadWebhookConfig().allowPrivate, rule.resolve)).url.href;
  } catch (err) {
    if (err instanceof DestinationError) throw new ConsoleError('INVALID_INPUT', `url: ${err.message}`);
    throw err;
  }
  const account = input.account === null ? null : (input.account as string);
  if (account !== null && (typeof account !== 'string' || !ACCOUNT_ID_PATTERN.test(account))) throw new ConsoleError('INVALID_INPUT', 'account: not a valid account id');
  const events = validateEventTypes(input.events);
  const id = `wh_${randomBytes(15).toString('base64url').replace(/[-_]/g, 'x').slice(0, 20)}`;
  const secret = SECRET_PREFIX + randomBytes(24).toString('base64url');
  let sealed: string;
  try {
    sealed = ctx.webhooks.seal(id, secret);
  } catch (err) {
    if (err instanceof RevealKeyError) throw new ConsoleError('REVEAL_KEY', err.message);
    throw err;
  }
  const [sec, us] = (await ctx.redis.time()) as unknown as [string, string];
  const now = Number(sec) * 1000 + Math.floor(Number(us) / 1000);
  const rec: StoredEndpoint = { id, url, account, events, status: 'active', createdAt: now, failingSince: null, disabledAt: null, secret: sealed };
  const audit = actor && { actor, action: 'webhook_create' as const, account, keyId: null, changes: { webhook_id: id, url, events } };
  const r = await evalChange(ctx, CREATE, [ctx.webhooks.s.endpoints()], [id, encodeEndpoint(rec), String(ENDPOINTS_PER_ACCOUNT_MAX), String(ENDPOINTS_MAX), account ?? ''], audit);
  if (r !== 'OK') throw new ConsoleError('LIMIT', `at most ${ENDPOINTS_PER_ACCOUNT_MAX} webhook endpoints per account and ${ENDPOINTS_MAX} in all`);
  return { endpoint: publicEndpoint(rec), secret };
}

/** Every endpoint, or those of one account (and not the all-accounts ones). Never the secrets. */
export function listWebhooks(ctx: ConsoleContext, account?: string | null): Promise<Endpoint[]> {
  return ctx.webhooks.list(account);
}

export async function getWebhook(ctx: ConsoleContext, id: string): Promise<Endpoint> {
  const e = await ctx.webhooks.find(validateEndpointId(id));
  if (e === null) throw new ConsoleError('NOT_FOUND', `no webhook with id ${id}`);
  return e;
}

/** Removes an endpoint with its dead letters and pending replays. */
export async function removeWebhook(ctx: ConsoleContext, id: string, actor?: Actor): Promise<void> {
  const e = await getWebhook(ctx, id);
  const s = ctx.webhooks.s;
  const audit = actor && { actor, action: 'webhook_remove' as const, account: e.account, keyId: null, changes: { webhook_id: id } };
  const r = await evalChange(ctx, REMOVE, [s.endpoints(), s.dead(id), s.replay(id)], [id], audit);
  if (r !== 'OK') throw new ConsoleError('NOT_FOUND', `no webhook with id ${id}`);
}

/** The endpoint's dead letters, newest first. */
export async function listDeadLetters(ctx: ConsoleContext, id: string, limit = 100): Promise<DeadLetter[]> {
  await getWebhook(ctx, id);
  return ctx.webhooks.listDead(id, limit);
}

/** Queues a dead letter for one more delivery (the worker's next pass). */
export async function replayDeadLetter(ctx: ConsoleContext, id: string, eventId: string, actor?: Actor): Promise<void> {
  const e = await getWebhook(ctx, id);
  if (typeof eventId !== 'string' || !EVENT_ID_PATTERN.test(eventId)) throw new ConsoleError('INVALID_INPUT', 'an event id is evt_<ms>_<seq>_<8 hex>');
  const s = ctx.webhooks.s;
  const audit = actor && { actor, action: 'webhook_replay' as const, account: e.account, keyId: null, changes: { webhook_id: id, event_id: eventId } };
  const r = await evalChange(ctx, REPLAY, [s.dead(id), s.replay(id)], [eventId], audit);
  if (r !== 'OK') throw new ConsoleError('NOT_FOUND', `no dead letter ${eventId} on webhook ${id}`);
}
