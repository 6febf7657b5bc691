/**
 * Accounts' own upstream credentials, one resource of the console service (src/console/service.ts;
 * SPEC 18, docs/credentials.md): set (sealed under `KEYGATE_CREDENTIAL_KEY`, bound to the account and
 * the provider), list (provider, hint: the last four characters, set time; never the secret) and
 * remove. The record is `cred:{acct}` (`CredentialField`); the account record's `credentials` field
 * lists the providers that have one, so the sidecar reads the credential record only for those
 * accounts. Standalone and Sentinel write both in one script; on Cluster (two slots) the credential
 * record first, then the list, so a sidecar never sees the list name a credential not yet written.
 * Audited (`credential_set`, `credential_remove`) with the provider and the hint, never the secret.
 */
import { FAMILIES, isFamily, type Family } from '../core/families/index.ts';
import { credentialHint, credentialProblem } from '../core/upstream-credential.ts';
import { envelopeKid } from '../keys/crypto.ts';
import { openCredential, sealCredential } from '../keys/credential-crypto.ts';
import { AccountField, CredentialField } from '../schema/redis-schema.ts';
import type { ConsoleContext } from './context.ts';
import { ConsoleError } from './errors.ts';
import { audit, type Actor } from './management.ts';
import { NOW } from './scripts.ts';
import { scanPrefix } from '../store/scan.ts';
import { validateAccountId } from './validate.ts';

/** One provider's credential as the console shows it: never the secret. */
export interface CredentialInfo {
  readonly provider: Family;
  /** The credential's last four characters. */
  readonly hint: string;
  /** When it was set (epoch ms, the store's clock). */
  readonly setAt: number;
}

/**
 * KEYS: the credential record, the account record (absent on Cluster). ARGV: provider, envelope ('' =
 * remove), hint, then every provider in order. Returns {1 if the provider had one before, the new
 * list of providers, the time}.
 */
const WRITE_CREDENTIAL = `${NOW}
local p = ARGV[1]
local had = redis.call('HEXISTS', KEYS[1], p)
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], p, p .. ':hint', p .. ':set_at')
else
  redis.call('HSET', KEYS[1], p, ARGV[2], p .. ':hint', ARGV[3], p .. ':set_at', now_s)
end
local list = {}
for i = 4, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then table.insert(list, ARGV[i]) end
end
local marker = table.concat(list, ',')
if KEYS[2] then
  if marker == '' then redis.call('HDEL', KEYS[2], '${AccountField.credentials}') else redis.call('HSET', KEYS[2], '${AccountField.credentials}', marker) end
end
return {had, marker, now_s}`;

/** KEYS: the account record. ARGV: the list of providers ('' = none). Cluster's second step. */
const WRITE_MARKER = `if ARGV[1] == '' then redis.call('HDEL', KEYS[1], '${AccountField.credentials}') else redis.call('HSET', KEYS[1], '${AccountField.credentials}', ARGV[1]) end
return 'OK'`;

function validateProvider(provider: unknown): Family {
  if (!isFamily(provider)) throw new ConsoleError('INVALID_INPUT', `provider must be one of ${FAMILIES.join(', ')}`);
  return provider;
}

async function write(ctx: ConsoleContext, account: string, provider: Family, envelope: string, hint: string): Promise<{ had: boolean; setAt: number }> {
  const cred = ctx.schema.credentials(account);
  const acct = ctx.schema.account(account);
  const keys = ctx.isCluster ? [cred] : [cred, acct];
  const [had, marker, now] = (await ctx.redis.eval(WRITE_CREDENTIAL, keys.length, ...keys, provider, envelope, hint, ...FAMILIES)) as [number, string, string];
  if (ctx.isCluster) await ctx.redis.eval(WRITE_MARKER, 1, acct, String(marker));
  return { had: Number(had) === 1, setAt: Number(now) };
}

/**
 * Sets (or replaces) the account's own credential for `provider`. Refused, with nothing written,
 * when the secret is not a credential (the message never echoes it) or `KEYGATE_CREDENTIAL_KEY` is
 * not usable. Taken into account at every sidecar on its next request.
 */
export async function setCredential(ctx: ConsoleContext, account: string, provider: string, secret: string, actor?: Actor): Promise<CredentialInfo> {
  validateAccountId(account);
  const p = validateProvider(provider);
  const problem = credentialProblem(secret);
  if (problem !== null) throw new ConsoleError('INVALID_INPUT', problem);
  const envelope = sealCredential(ctx.credentialKeyring(), account, p, secret);
  const hint = credentialHint(secret);
  const { had, setAt } = await write(ctx, account, p, envelope, hint);
  if (actor) await audit(ctx, actor, 'credential_set', account, null, { provider: p, hint, replaced: had });
  return { provider: p, hint, setAt };
}

/** Removes the account's credential for `provider` (NOT_FOUND when it has none); the gateway's own applies from the next request. */
export async function removeCredential(ctx: ConsoleContext, account: string, provider: string, actor?: Actor): Promise<void> {
  validateAccountId(account);
  const p = validateProvider(provider);
  const { had } = await write(ctx, account, p, '', '');
  if (!had) throw new ConsoleError('NOT_FOUND', `account ${account} has no ${p} credential`);
  if (actor) await audit(ctx, actor, 'credential_remove', account, null, { provider: p });
}

/** The account's credentials, in provider order: provider, hint, set time (never the secret). */
export async function listCredentials(ctx: ConsoleContext, account: string): Promise<CredentialInfo[]> {
  validateAccountId(account);
  const h = await ctx.redis.hgetall(ctx.schema.credentials(account));
  return FAMILIES.filter((f) => h[CredentialField.envelope(f)] !== undefined).map((f) => ({
    provider: f,
    hint: h[CredentialField.hint(f)] ?? '',
    setAt: Number(h[CredentialField.setAt(f)] ?? 0),
  }));
}

/** KEYS: the credential record. ARGV: provider, the envelope read, the new one. Replaces it only if unchanged since read. */
const RESEAL = `if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1`;

/**
 * A key rotation's last step (docs/credentials.md): every credential sealed under a key id other
 * than the ring's first is opened and sealed again under the first, in place (only if it did not
 * change meanwhile), so the old key can then leave the ring. Every account's record is found with
 * SCAN (on each master of a Cluster). The secrets are never returned; each re-seal is audited as
 * `credential_set` with `resealed: <the old key id>`. → how many were sealed again.
 */
export async function resealCredentials(ctx: ConsoleContext, actor?: Actor): Promise<{ resealed: number }> {
  const ring = ctx.credentialKeyring();
  const prefix = ctx.schema.credentials('').slice(0, -2);
  const r = ctx.redis;
  // A Cluster client knows its masters only once connected: one command first (a fresh console has sent none).
  await r.exists(prefix);
  let resealed = 0;
  for await (const name of scanPrefix(r, prefix)) {
    const account = /^\{(.*)\}$/.exec(name.slice(prefix.length))?.[1];
    if (account === undefined) continue;
    const h = await r.hgetall(name);
    for (const p of FAMILIES) {
      const env = h[CredentialField.envelope(p)];
      const kid = env === undefined ? null : envelopeKid(env);
      if (env === undefined || kid === null || kid === ring.primary) continue;
      let fresh: string;
      try {
        fresh = sealCredential(ring, account, p, openCredential(ring, account, p, env));
      } catch (err) {
        throw new ConsoleError('CREDENTIAL_KEY', `account ${account}'s ${p} credential: ${(err as Error).message}`);
      }
      if (Number(await r.eval(RESEAL, 1, name, p, env, fresh)) !== 1) continue;
      resealed++;
      if (actor) await audit(ctx, actor, 'credential_set', account, null, { provider: p, hint: h[CredentialField.hint(p)] ?? '', resealed: kid });
    }
  }
  return { resealed };
}
