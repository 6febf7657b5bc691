/**
 * Keys, one resource of the console service (src/console/service.ts): create, roll, read, list,
 * reveal, update and revoke, each atomic in Redis on the schema of `src/schema/redis-schema.ts`
 * (prose: docs/redis-schema.md). Every input is validated before the first write. Each operation
 * takes the service's shared context first; given an actor, it is audited (in the change's own
 * script where Redis allows) and publishes its event (docs/events.md); without one (the library's
 * plain call) it writes the change alone.
 */
import { randomInt } from 'node:crypto';
import { rolledName } from '../core/key-rules.ts';
import { openSecret, sealSecret } from '../keys/crypto.ts';
import { BASE62, generateKey, keyDigest, maskKey } from '../core/key-format.ts';
import { encodeKeyRecord, encodeModels, KeyField, parseKeyRecord, SCHEMA_VERSION, type KeyRecord } from '../schema/redis-schema.ts';
import { encodeRateFields } from '../schema/rates.ts';
import type { KeyLimit } from '../schema/money.ts';
import { ConsoleError, isStoreOutage } from './errors.ts';
import type { ConsoleContext } from './context.ts';
import { appendAudit, audit, auditWrite, type Actor, type AuditWrite } from './management.ts';
import { bestEffort, reportUnfinished, type Unfinished } from './best-effort.ts';
import { keyData } from '../events/publish.ts';
import { rateChanges, rateOps, validateRatesPatch, type RatesPatch, type RatesUse } from './rates.ts';
import * as lua from './scripts.ts';
import { validateAccountId, validateExpiry, validateKeyId, validateModels, validateName } from './validate.ts';
import { validateLimit, type KeyUsage } from './wallet.ts';

export type ExpiryInput = Date | string | number;

/** A key record with its roll relations (`rolled_to`, `rolled_from`: key ids). */
export interface ManagedKey extends KeyRecord {
  readonly rolledTo: string | null;
  readonly rolledFrom: string | null;
}

/** A key record with its usage (last used, requests, spend, limit) and its rates' current windows. */
export interface KeyView extends ManagedKey {
  readonly usage: KeyUsage;
  readonly rateUse: RatesUse;
}

/** The same as KeyView (the name the API's routes used). */
export type ManagedKeyView = KeyView;

export interface CreateKeyInput {
  readonly account: string;
  readonly name: string;
  /** Allowed model patterns; absent or null = every model. */
  readonly models?: readonly string[] | null;
  /** Expiry instant; absent or null = never. ISO-8601 strings need a zone (or are a plain date, UTC). */
  readonly expiresAt?: ExpiryInput | null;
  /** Spend limit per period; absent or null = none. */
  readonly limit?: KeyLimit | null;
  /** Request and token rates; absent or null = none. */
  readonly rates?: RatesPatch;
}

export interface CreatedKey {
  readonly id: string;
  /** The plaintext key. Shown once; revealKey can show it again. */
  readonly key: string;
  readonly record: ManagedKey;
  /** Best-effort parts that could not be written (src/console/best-effort.ts); absent when whole. */
  readonly unfinished?: readonly string[];
}

/** Fields to change; a field left out is untouched. `null` models = every model; `null` expiry = never. */
export interface KeyUpdate {
  readonly name?: string;
  readonly models?: readonly string[] | null;
  readonly expiresAt?: ExpiryInput | null;
  /** `null` = no limit. */
  readonly limit?: KeyLimit | null;
  /** `null` removes a rate; a rate left out is untouched. */
  readonly rates?: RatesPatch;
}

export interface RevokeResult {
  readonly id: string;
  readonly account: string;
  /** True when the key was already revoked (revoking is idempotent). */
  readonly alreadyRevoked: boolean;
  /** Best-effort parts that could not be written (src/console/best-effort.ts); absent when whole. */
  readonly unfinished?: readonly string[];
}

const KEY_ID_RANDOM_CHARS = 24; // 142.9 bits

export function generateKeyId(): string {
  let s = 'key_';
  for (let i = 0; i < KEY_ID_RANDOM_CHARS; i++) s += BASE62[randomInt(62)];
  return s;
}

/** Most a roll's grace can be: 30 days. */
export const MAX_ROLL_GRACE_SECONDS = 30 * 86400;

/** Creates an active key. Returns its id and plaintext (the only time it is returned unasked). */
export async function createKey(ctx: ConsoleContext, input: CreateKeyInput, actor?: Actor): Promise<CreatedKey> {
  const account = validateAccountId(input.account);
  const name = validateName(input.name);
  const models = input.models === undefined ? null : validateModels(input.models);
  const expiresAt = input.expiresAt === undefined || input.expiresAt === null ? null : validateExpiry(input.expiresAt, Date.now());
  const limit = input.limit === undefined || input.limit === null ? null : validateLimit(input.limit);
  const rates = validateRatesPatch(input.rates);
  const ring = ctx.keyring();
  const s = ctx.schema;
  const write = auditWrite(ctx, actor, 'create');

  // On Cluster a new key whose id index or record falls in an unreachable slot is undone and made
  // again with another id and key (they are ours to place): up to NEW_KEY_PLACEMENTS tries.
  let unplaced = 0;
  for (let attempt = 0; attempt < 3 + unplaced; attempt++) {
    const key = generateKey(ctx.keyPrefix);
    const id = generateKeyId();
    const digest = keyDigest(key);
    const fields = encodeKeyRecord({ id, account, name, models, expiresAt, hint: maskKey(key, ctx.keyPrefix), secret: sealSecret(ring, id, key) });
    fields.push(...encodeRateFields(rates).set);
    const expiryArg = expiresAt === null ? '' : String(expiresAt);
    const ev = write && {
      audit: write,
      account,
      keyId: id,
      changes: { name, models, expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(), ...(limit !== null ? { limit: limitJson(limit) } : {}), ...rateChanges(rates) },
    };
    // The limit first: the key is usable only once its record exists, and never without its limit.
    if (limit !== null) await ctx.money.setLimit(account, id, limit);
    // Likewise its token-rate mirror (bookings count against it from the key's first request).
    if (rates.tokens) await ctx.rates.setTokenRate(account, id, rates.tokens);
    const result = ctx.isCluster
      ? await createStepwise(ctx, account, id, digest, expiryArg, fields)
      : await evalAudited(ctx, lua.CREATE_ALL, [s.keyRecord(digest), s.keyIdIndex(id), s.accountKeys(account), s.accountActiveKeys(account), ...indexKeys(ctx, account)], [String(ctx.maxActive), id, digest, expiryArg, ...fields], ev);
    if (result !== 'OK' && limit !== null) await ctx.money.dropSpend(account, id);
    if (result === 'EXISTS') continue;
    if (result === UNPLACED) {
      if (unplaced + 1 >= NEW_KEY_PLACEMENTS) throw new ConsoleError('CONFLICT', `could not place a new key on a reachable Redis node after ${NEW_KEY_PLACEMENTS} tries; nothing was created`);
      unplaced++;
      continue;
    }
    expectOk(ctx, result, id);
    const unfinished: Unfinished = [];
    if (ctx.isCluster) await bestEffort(unfinished, 'key list index', () => indexRecords(ctx, account, [s.keyRecord(digest)]));
    if (ctx.isCluster && ev) await bestEffort(unfinished, 'audit log', () => auditAfter(ctx, ev));
    const record = await readRecord(ctx, digest, id);
    await keyEventAfter(ctx, unfinished, 'key.created', record);
    return { id, key, record, ...reportUnfinished(unfinished) };
  }
  throw new ConsoleError('CONFLICT', 'could not allocate a unique key id and key after 3 attempts');
}

/** What a roll may be given: the old key's grace (seconds, default 0) and the new key's name. */
export interface RollOptions {
  readonly graceSeconds?: number;
  /** The new key's name (validated like a create's); default `rolledName(old name)`. */
  readonly name?: string | null;
}

/**
 * Replaces an active key with a new one of the same account, models and expiry, named by the roll
 * (`RollOptions.name`, else "NAME (rolled)", "NAME (rolled 2)"…: `rolledName`), carrying its
 * spend record (every period, the total and the limit: rolling never resets a spend limit). Exactly
 * one roll of a key succeeds: the "already rolled" check and the new key are one script (on Cluster
 * the old record is claimed for the new key first). Another roll gets REVOKED ("already rolled").
 * The old key is revoked at once (`graceSeconds` 0; then it does not count against the active-key
 * limit) or expires after the grace. Both records name each other (`rolled_to`/`rolled_from`).
 */
export async function rollKey(ctx: ConsoleContext, keyId: string, options: RollOptions = {}, actor?: Actor): Promise<CreatedKey & { old: ManagedKey }> {
  const graceSeconds = options.graceSeconds ?? 0;
  if (!Number.isSafeInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_ROLL_GRACE_SECONDS) {
    throw new ConsoleError('INVALID_INPUT', 'grace_seconds must be an integer from 0 to 2592000 (30 days)');
  }
  const asked = options.name === undefined || options.name === null ? null : validateName(options.name);
  validateKeyId(keyId);
  const graceMs = graceSeconds * 1000;
  const s = ctx.schema;
  const oldDigest = await digestOf(ctx, keyId);
  const old = await readRecord(ctx, oldDigest, keyId);
  if (old.status === 'revoked') throw new ConsoleError('REVOKED', `key ${keyId} is revoked; revoked keys cannot be rolled`);
  const ring = ctx.keyring();
  const account = old.account;
  const name = asked ?? rolledName(old.name);
  const write = auditWrite(ctx, actor, 'roll');
  for (let attempt = 0; attempt < 3; attempt++) {
    const key = generateKey(ctx.keyPrefix);
    const id = generateKeyId();
    const digest = keyDigest(key);
    const fields = [
      ...encodeKeyRecord({ id, account, name, models: old.models, expiresAt: old.expiresAt, hint: maskKey(key, ctx.keyPrefix), secret: sealSecret(ring, id, key) }),
      KeyField.rolledFrom,
      keyId,
    ];
    const expiryArg = old.expiresAt === null ? '' : String(old.expiresAt);
    const ev = write && { audit: write, account, keyId, changes: { rolled_to: id, grace_seconds: graceSeconds, name } };
    // The spend first, like a create's limit: the new key is usable only once its record exists.
    await ctx.money.copySpend(account, keyId, id);
    const result = ctx.isCluster
      ? await rollStepwise(ctx, s.keyRecord(oldDigest), keyId, account, id, digest, expiryArg, fields, graceMs)
      : await evalAudited(
          ctx,
          lua.ROLL_ALL,
          [s.keyRecord(oldDigest), s.keyRecord(digest), s.keyIdIndex(id), s.accountKeys(account), s.accountActiveKeys(account), ...indexKeys(ctx, account)],
          [keyId, id, String(graceMs), String(ctx.maxActive), digest, expiryArg, ...fields],
          ev,
        );
    if (result !== 'OK') await ctx.money.dropSpend(account, id);
    if (result === 'EXISTS' || result === UNPLACED) continue; // UNPLACED: the new key's slots unreachable (Cluster), claim undone
    if (result === 'ROLLED') throw new ConsoleError('REVOKED', `key ${keyId} was already rolled`);
    expectOk(ctx, result, keyId);
    const unfinished: Unfinished = [];
    if (ctx.isCluster) {
      if (graceSeconds === 0) await bestEffort(unfinished, 'active-key set', () => ctx.redis.srem(s.accountActiveKeys(account), keyId));
      await bestEffort(unfinished, 'key list index', () => indexRecords(ctx, account, [s.keyRecord(digest), s.keyRecord(oldDigest)]));
    }
    if (ctx.isCluster && ev) await bestEffort(unfinished, 'audit log', () => auditAfter(ctx, ev));
    const [fresh, oldNow] = await Promise.all([readRecord(ctx, digest, id), readRecord(ctx, oldDigest, keyId)]);
    await bestEffort(unfinished, 'key.rolled event', () => ctx.events.keyRolled(oldNow, fresh, graceSeconds));
    return { id, key, record: fresh, old: oldNow, ...reportUnfinished(unfinished) };
  }
  throw new ConsoleError('CONFLICT', 'could not allocate a unique key id and key after 3 attempts');
}

/** Cluster roll: claim the old record, create the new key stepwise (undoing the claim if it fails), retire the old key. */
async function rollStepwise(ctx: ConsoleContext, oldRec: string, keyId: string, account: string, id: string, digest: string, expiryArg: string, fields: string[], graceMs: number): Promise<string> {
  const claim = await evalAudited(ctx, lua.ROLL_CLAIM, [oldRec], [keyId, id]);
  if (claim !== 'OK') return claim;
  const created = await createStepwise(ctx, account, id, digest, expiryArg, fields, graceMs === 0 ? keyId : '');
  if (created !== 'OK') {
    await evalAudited(ctx, lua.ROLL_UNCLAIM, [oldRec], [id]);
    return created;
  }
  // the old key's active-set entry and the list index after it, best-effort (the caller's)
  return evalAudited(ctx, lua.ROLL_FINISH, [oldRec], [keyId, id, String(graceMs)]);
}

/** createStepwise's answer when the new key's own slots were unreachable (undone: place it again). */
const UNPLACED = 'UNPLACED';
/** How many ids and keys a Cluster create tries before it gives up on unreachable slots. */
const NEW_KEY_PLACEMENTS = 12;

/** Cluster: indexes first (each a single-slot write), the key record last; undo the indexes on a collision. */
async function createStepwise(ctx: ConsoleContext, account: string, id: string, digest: string, expiryArg: string, fields: string[], replacing = ''): Promise<string> {
  const s = ctx.schema;
  const redis = ctx.redis;
  const reserved = await evalAudited(ctx, lua.CREATE_RESERVE, [s.accountActiveKeys(account)], [String(ctx.maxActive), id, replacing]);
  if (reserved !== 'OK') return reserved;
  const undo = async () => {
    await redis.srem(s.accountActiveKeys(account), id);
    await redis.srem(s.accountKeys(account), id);
  };
  await redis.sadd(s.accountKeys(account), id);
  // The new key's own slots (id index, record) may be unreachable where the account's are not:
  // undone, and the caller places the key again under another id (UNPLACED).
  let indexed: string | null;
  try {
    indexed = await redis.set(s.keyIdIndex(id), digest, 'NX');
  } catch (err) {
    if (!isStoreOutage(err)) throw err;
    await undo();
    return UNPLACED;
  }
  if (indexed === null) {
    await undo();
    return 'EXISTS';
  }
  let result: string;
  try {
    result = await evalAudited(ctx, lua.CREATE_RECORD, [s.keyRecord(digest)], [expiryArg, ...fields]);
  } catch (err) {
    if (!isStoreOutage(err)) throw err;
    result = UNPLACED;
  }
  if (result !== 'OK') {
    await redis.del(s.keyIdIndex(id));
    await undo();
  }
  // the list index after it, best-effort (the caller's)
  return result;
}

/** An account's keys, active and revoked, oldest first. Never plaintext. */
export async function listKeys(ctx: ConsoleContext, account: string): Promise<ManagedKey[]> {
  validateAccountId(account);
  const s = ctx.schema;
  const redis = ctx.redis;
  const [ids, active] = await Promise.all([redis.smembers(s.accountKeys(account)), redis.smembers(s.accountActiveKeys(account))]);
  const digests = await Promise.all(ids.map((id) => redis.get(s.keyIdIndex(id))));
  const hashes = await Promise.all(digests.map((d) => (d === null ? Promise.resolve({}) : redis.hgetall(s.keyRecord(d)))));
  const out: ManagedKey[] = [];
  const activeSet = new Set(active);
  const heal: string[] = [];
  hashes.forEach((h, i) => {
    const id = ids[i]!;
    const r = parseKeyRecord(h);
    // An index entry without a record is a create that has not finished (or crashed): not a key.
    if (r === null) return;
    if (typeof r === 'string') throw new ConsoleError('CORRUPT', `key ${id}: record does not follow schema v${SCHEMA_VERSION} (${r})`);
    if (r.id !== id || r.account !== account) throw new ConsoleError('CORRUPT', `key ${id}: index points at a record of another key`);
    if (r.status === 'revoked' && activeSet.has(id)) heal.push(id);
    out.push(withRoll(r, h));
  });
  // A revoke interrupted between its steps on Cluster leaves the id in the active set; revoked is
  // terminal, so removing it is always safe.
  if (heal.length > 0) await redis.srem(s.accountActiveKeys(account), ...heal);
  return out.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
}

/**
 * The account of a key id, or null for an unknown id: always the same two reads (the id index, then
 * one field of a record — a placeholder name for an unknown id), so an unknown id and a known one
 * cost the same round trips.
 */
export async function accountOfKeyId(ctx: ConsoleContext, keyId: string): Promise<string | null> {
  validateKeyId(keyId);
  const digest = await ctx.redis.get(ctx.schema.keyIdIndex(keyId));
  const ok = digest !== null && /^[0-9a-f]{64}$/.test(digest);
  const account = await ctx.redis.hget(ctx.schema.keyRecord(ok ? digest : '0'.repeat(64)), KeyField.account);
  return ok ? account : null;
}

/** One key's record with its roll relations (never plaintext). */
export async function getKey(ctx: ConsoleContext, keyId: string): Promise<ManagedKey> {
  validateKeyId(keyId);
  return readRecord(ctx, await digestOf(ctx, keyId), keyId);
}

/** The plaintext of an active key, decrypted from its envelope. Revoked keys cannot be revealed. Audited as `reveal` when an actor is given. */
export async function revealKey(ctx: ConsoleContext, keyId: string, actor?: Actor): Promise<{ id: string; key: string }> {
  validateKeyId(keyId);
  const account = actor ? (await getKey(ctx, keyId)).account : null;
  const ring = ctx.keyring();
  const digest = await digestOf(ctx, keyId);
  const [id, status, secret] = await ctx.redis.hmget(ctx.schema.keyRecord(digest), KeyField.id, KeyField.status, KeyField.secret);
  if (id !== keyId) throw notFound(keyId);
  if (status === 'revoked') throw new ConsoleError('REVOKED', `key ${keyId} is revoked; its plaintext was destroyed at revocation`);
  if (secret === null || secret === undefined) throw new ConsoleError('CORRUPT', `key ${keyId} has no stored secret`);
  let key: string;
  try {
    key = openSecret(ring, keyId, secret);
  } catch (err) {
    throw new ConsoleError('REVEAL_KEY', `cannot reveal key ${keyId}: ${(err as Error).message}`);
  }
  if (keyDigest(key) !== digest) throw new ConsoleError('CORRUPT', `key ${keyId}: the decrypted secret does not match the record's digest`);
  if (actor) await audit(ctx, actor, 'reveal', account, keyId);
  return { id: keyId, key };
}

/** Changes name, allowed models, expiry, limit and/or rates of an active key; other fields are untouched. */
export async function updateKey(ctx: ConsoleContext, keyId: string, patch: KeyUpdate, actor?: Actor): Promise<ManagedKey> {
  validateKeyId(keyId);
  const ops: string[] = [];
  if (patch.name !== undefined) ops.push('set', KeyField.name, validateName(patch.name));
  if (patch.models !== undefined) {
    const models = validateModels(patch.models);
    if (models === null) ops.push('del', KeyField.models);
    else ops.push('set', KeyField.models, encodeModels(models));
  }
  if (patch.expiresAt !== undefined) {
    if (patch.expiresAt === null) ops.push('del', KeyField.expiresAt);
    else ops.push('set', KeyField.expiresAt, String(validateExpiry(patch.expiresAt, Date.now())));
  }
  const limit = patch.limit === undefined ? undefined : patch.limit === null ? null : validateLimit(patch.limit);
  const rates = validateRatesPatch(patch.rates);
  ops.push(...rateOps(rates));
  if (ops.length === 0 && limit === undefined) throw new ConsoleError('INVALID_INPUT', 'nothing to update: give a name, models, expiry, limit or rate');
  const digest = await digestOf(ctx, keyId);
  const account = await ctx.redis.hget(ctx.schema.keyRecord(digest), KeyField.account);
  if (account === null) throw notFound(keyId);
  const write = auditWrite(ctx, actor, 'update');
  let ev: AuditEval | undefined;
  if (write) {
    const changes: Record<string, unknown> = {};
    for (let i = 0; i < ops.length; ) {
      const field = ops[i + 1]!;
      const key = field === KeyField.expiresAt ? 'expires_at' : field;
      if (ops[i] === 'set') changes[key] = field === KeyField.models ? JSON.parse(ops[i + 2]!) : field === KeyField.expiresAt ? new Date(Number(ops[i + 2])).toISOString() : ops[i + 2];
      else changes[key] = null;
      i += ops[i] === 'set' ? 3 : 2;
    }
    if (limit !== undefined) changes.limit = limit === null ? null : limitJson(limit);
    ev = { audit: write, account, keyId, changes };
  }
  if (ops.length > 0) {
    const rec = ctx.schema.keyRecord(digest);
    expectOk(ctx, await evalAudited(ctx, lua.UPDATE, ctx.isCluster ? [rec] : [rec, ...indexKeys(ctx, account)], [keyId, ...ops], ev), keyId);
    if (ctx.isCluster) await indexRecords(ctx, account, [rec]);
    if (ctx.isCluster && ev) await auditAfter(ctx, ev);
  }
  if (rates.tokens !== undefined) {
    // The mirror after the record (a revoked key was refused above); a change lifts a block it no longer justifies.
    const r = await readRecord(ctx, digest, keyId);
    await ctx.rates.setTokenRate(r.account, keyId, rates.tokens);
  }
  if (limit !== undefined) {
    // The limit lives with the account's money records (one Cluster slot per account); the record
    // is checked first so that a revoked key's limit is not changed.
    const before = await readRecord(ctx, digest, keyId);
    if (before.status === 'revoked') expectOk(ctx, 'REVOKED', keyId);
    await ctx.money.setLimit(before.account, keyId, limit);
    // A change of the limit alone has no record script to carry its audit event: it follows the write.
    if (ops.length === 0 && ev) await auditAfter(ctx, ev);
  }
  const r = await readRecord(ctx, digest, keyId);
  await ctx.events.trackExpiry(r);
  return r;
}

/**
 * Revokes a key: the record stays (status revoked, revoked_at) for audit and lists; the sidecar
 * treats it as unknown; the encrypted plaintext is deleted, so it can never be revealed again.
 */
export async function revokeKey(ctx: ConsoleContext, keyId: string, actor?: Actor): Promise<RevokeResult> {
  validateKeyId(keyId);
  const s = ctx.schema;
  const digest = await digestOf(ctx, keyId);
  const account = await ctx.redis.hget(s.keyRecord(digest), KeyField.account);
  if (account === null) throw notFound(keyId);
  let result: string;
  const write = auditWrite(ctx, actor, 'revoke');
  const ev = write && { audit: write, account, keyId, changes: { status: 'revoked' } };
  // The revoke is the key record's (its one essential write: a Check refuses the key from then on);
  // on Cluster the rest follows it best-effort, reported in `unfinished`, never failing a done revoke.
  const unfinished: Unfinished = [];
  if (ctx.isCluster) {
    result = await evalAudited(ctx, lua.REVOKE_RECORD_ONLY, [s.keyRecord(digest)], [keyId]);
    if (result === 'OK' || result === 'ALREADY') {
      await bestEffort(unfinished, 'active-key set', () => ctx.redis.srem(s.accountActiveKeys(account), keyId));
      await bestEffort(unfinished, 'key list index', () => indexRecords(ctx, account, [s.keyRecord(digest)]));
    }
    if (result === 'OK' && ev) await bestEffort(unfinished, 'audit log', () => auditAfter(ctx, ev));
  } else {
    result = await evalAudited(ctx, lua.REVOKE_ALL, [s.keyRecord(digest), s.accountActiveKeys(account), ...indexKeys(ctx, account)], [keyId, account], ev);
  }
  if (result === 'ALREADY') return { id: keyId, account, alreadyRevoked: true, ...reportUnfinished(unfinished) };
  expectOk(ctx, result, keyId);
  await keyEventAfter(ctx, unfinished, 'key.revoked', await readRecord(ctx, digest, keyId));
  return { id: keyId, account, alreadyRevoked: false, ...reportUnfinished(unfinished) };
}

/** One key with its usage (last used, requests today and this month, spend, limit), rate windows and roll relations. */
export async function getKeyView(ctx: ConsoleContext, keyId: string): Promise<KeyView> {
  const r = await getKey(ctx, keyId);
  const [[usage], rateUse] = await Promise.all([ctx.money.usage([r]), ctx.rates.use(r.account, r.id, r.rates)]);
  return { ...r, usage: usage!, rateUse };
}

/** The account's keys with their usage, oldest first. */
export async function listKeyViews(ctx: ConsoleContext, account: string): Promise<KeyView[]> {
  const list = await listKeys(ctx, account);
  const [usage, rateUse] = await Promise.all([ctx.money.usage(list), Promise.all(list.map((r) => ctx.rates.use(r.account, r.id, r.rates)))]);
  return list.map((r, i) => ({ ...r, usage: usage[i]!, rateUse: rateUse[i]! }));
}

/** The account's key list index: keyorder, keycur, keyinfo (one Cluster slot). */
function indexKeys(ctx: ConsoleContext, account: string): [string, string, string] {
  const s = ctx.schema;
  return [s.keyOrder(account), s.keyCurrent(account), s.keyInfo(account)];
}

/**
 * Writes the list index entries of the given key records (by record key name) from what they hold
 * now: the Cluster steps (the records are in other slots than the index) and the lazy build. An
 * entry is only replaced by a newer `rev`, so a late or repeated write never undoes a change.
 * `built`: the marker of a full build (see `KEY_INFO_BUILT`).
 */
export async function indexRecords(ctx: ConsoleContext, account: string, records: readonly string[], built = ''): Promise<number> {
  const fields = [KeyField.id, KeyField.rev, KeyField.createdAt, KeyField.expiresAt, KeyField.status, KeyField.hint, KeyField.name];
  let written = 0;
  for (let i = 0; i < records.length || (i === 0 && built !== ''); i += 500) {
    const chunk = records.slice(i, i + 500);
    const rows = await Promise.all(chunk.map((r) => ctx.redis.hmget(r, ...fields)));
    const args: string[] = [];
    for (const v of rows) {
      if (v[0] === null || v[0] === undefined) continue;
      args.push(v[0], v[1] ?? '0', v[2] ?? '0', v[3] ?? '', v[4] ?? 'active', v[5] ?? '', v[6] ?? '');
    }
    const last = i + 500 >= records.length;
    written += Number(await ctx.redis.eval(lua.INDEX_PUT, 3, ...indexKeys(ctx, account), last ? built : '', ...args));
  }
  return written;
}

async function digestOf(ctx: ConsoleContext, keyId: string): Promise<string> {
  const digest = await ctx.redis.get(ctx.schema.keyIdIndex(keyId));
  if (digest === null) throw notFound(keyId);
  if (!/^[0-9a-f]{64}$/.test(digest)) throw new ConsoleError('CORRUPT', `key ${keyId}: id index does not hold a SHA-256 digest`);
  return digest;
}

/** The record and its roll relations, from one HGETALL. */
async function readRecord(ctx: ConsoleContext, digest: string, keyId: string): Promise<ManagedKey> {
  const h = await ctx.redis.hgetall(ctx.schema.keyRecord(digest));
  const r = parseKeyRecord(h);
  if (r === null) throw notFound(keyId);
  if (typeof r === 'string') throw new ConsoleError('CORRUPT', `key ${keyId}: record does not follow schema v${SCHEMA_VERSION} (${r})`);
  if (r.id !== keyId) throw new ConsoleError('CORRUPT', `key ${keyId}: id index points at a record of another key`);
  return withRoll(r, h);
}

function withRoll(r: KeyRecord, h: Record<string, string>): ManagedKey {
  return { ...r, rolledTo: h[KeyField.rolledTo] ?? null, rolledFrom: h[KeyField.rolledFrom] ?? null };
}

interface AuditEval {
  readonly audit: AuditWrite;
  readonly account: string;
  readonly keyId: string | null;
  readonly changes: Record<string, unknown>;
}

/** Runs a script; with an audit event (not on Cluster, where the lists are in other slots), the script writes it too. */
async function evalAudited(ctx: ConsoleContext, script: string, keys: string[], args: string[], audit?: AuditEval): Promise<string> {
  if (audit && !ctx.isCluster) {
    keys = [...keys, ...audit.audit.lists(audit.account)];
    args = [...args, audit.audit.event(audit.account, audit.keyId, audit.changes)];
  }
  const r = await ctx.redis.eval(script, keys.length, ...keys, ...args);
  return String(r);
}

/** A key's event and its expiry tracking after the change, each best-effort (`{wh}` and the account's stream may be elsewhere). */
async function keyEventAfter(ctx: ConsoleContext, unfinished: Unfinished, type: 'key.created' | 'key.revoked', r: ManagedKey): Promise<void> {
  await bestEffort(unfinished, `${type} event`, () => ctx.events.publish(r.account, type, keyData(r)));
  // a key without an expiry is not tracked (the update that took its expiry away took it out)
  if (r.expiresAt !== null) await bestEffort(unfinished, 'expiry tracking', () => ctx.events.trackExpiry(r));
}

/** Cluster: the audit event right after the change, one list at a time (they are in other slots). */
async function auditAfter(ctx: ConsoleContext, e: AuditEval): Promise<void> {
  await appendAudit(ctx.redis, true, e.audit.lists(e.account), e.audit.event(e.account, e.keyId, e.changes));
}

function expectOk(ctx: ConsoleContext, result: string, keyId: string): void {
  switch (result) {
    case 'OK':
      return;
    case 'NOTFOUND':
      throw notFound(keyId);
    case 'REVOKED':
      throw new ConsoleError('REVOKED', `key ${keyId} is revoked; revoked keys cannot be changed`);
    case 'LIMIT':
      throw new ConsoleError('LIMIT', `the account already has ${ctx.maxActive} active keys; revoke one first`);
    case 'PAST':
      throw new ConsoleError('INVALID_INPUT', 'expiry is not in the future (by the Redis server clock)');
    case 'EXISTS':
      throw new ConsoleError('CONFLICT', `key ${keyId} collides with an existing record`);
    default:
      throw new ConsoleError('CORRUPT', `key ${keyId}: the record does not follow schema v${SCHEMA_VERSION} (${result})`);
  }
}

/** A limit as the audit log and the JSON views show it. */
export function limitJson(l: KeyLimit): { amount_micros: number; period: string } {
  return { amount_micros: l.amountMicros, period: l.period };
}

function notFound(keyId: string): ConsoleError {
  return new ConsoleError('NOT_FOUND', `no key with id ${keyId}`);
}
