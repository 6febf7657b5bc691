/**
 * The console service: the one class the library (exported as `KeyConsole`), the CLI (`keygate keys|
 * accounts|usage|prices|tokens|audit`) and the management API (`keygate console`) call. Each method
 * is one operation whose body lives in its resource module — keys.ts, accounts.ts, wallet.ts (money:
 * credits, usage records, export), rates.ts, prices.ts, management.ts (audit log, management tokens,
 * idempotency) — over one shared context (context.ts: the Redis client, the schemas of src/schema/,
 * the keyring, the events publisher). There is no second layer: the API and the CLI call these
 * methods, never a wrapper of them.
 *
 * Changes take an optional `actor` last: given one (the CLI passes `CLI_ACTOR`, the API the token's
 * actor), the change is audited in its own script where Redis allows; without one (the library's
 * plain call) no audit entry is written. Every change publishes its event (docs/events.md) whoever
 * made it: an owner's webhook hears of a key the platform created through the library too.
 *
 *   import { KeyConsole } from 'keygate';
 *   const kc = new KeyConsole({ redis: process.env.REDIS_URL! });
 *   const { id, key } = await kc.createKey({ account: 'acct-42', name: 'ci', models: ['openai/*'] });
 */
import { accountPriceMultiplier, setAccountPriceMultiplier } from './price-multiplier.ts';
import { catalogEnabled, priceCatalog } from '../prices/index.ts';
import { catalogEntries, catalogInfo, explainPrice, type CatalogEntryJson, type CatalogInfo, type PriceExplanation } from './price-catalog.ts';
import type { AccountBilling, AccountStatus, Schema } from '../schema/redis-schema.ts';
import type { KeyLimit, UsageEntry } from '../schema/money.ts';
import type { Rates } from '../schema/rates.ts';
import type { RedisClient } from '../store/redis.ts';
import type { EventPublisher } from '../events/publish.ts';
import { ConsoleError } from './errors.ts';
import { ConsoleContext, type KeyConsoleOptions } from './context.ts';
import * as keys from './keys.ts';
import * as accounts from './accounts.ts';
import * as billing from './billing.ts';
import * as mgmt from './management.ts';
import { Members } from './members.ts';
import * as credentials from './credentials.ts';
import * as webhooks from './webhooks.ts';
import * as alerts from './alerts.ts';
import { activeKeyIdOf } from './key-self.ts';
import type { DeadLetter, Endpoint } from '../events/webhooks.ts';
import type { CredentialInfo } from './credentials.ts';
import type { CreatedKey, CreateKeyInput, KeyUpdate, KeyView, ManagedKey, RevokeResult, RollOptions } from './keys.ts';
import type { AccountInfo, AccountResult } from './accounts.ts';
import type { Actor, AuditAction, AuditEvent, IdempotencyClaim, TokenRecord } from './management.ts';
import type { RateSettings, RatesPatch } from './rates.ts';
import { priceJson, validatePrice, type PriceBook, type PriceEntry, type PriceInput } from './prices.ts';
import type { CreditResult, UsageInput, UsageResult } from './wallet.ts';
import { summarizeUsage, summaryOfSums, summarySpan, type UsageGrouping, type UsageSummary } from './usage-summary.ts';
import type { UsageHistory } from '../ledger/reads.ts';
import { validateAccountId } from './validate.ts';
import { bareModelReadings, liveSidecars, type BareModels } from '../store/sidecar-settings.ts';

export type { KeyConsoleOptions } from './context.ts';

export class ConsoleService {
  readonly #c: ConsoleContext;
  #history: UsageHistory | null = null;

  constructor(opts: KeyConsoleOptions) {
    this.#c = new ConsoleContext(opts);
  }

  get redis(): RedisClient {
    return this.#c.redis;
  }

  get schema(): Schema {
    return this.#c.schema;
  }

  get keyPrefix(): string {
    return this.#c.keyPrefix;
  }

  get isCluster(): boolean {
    return this.#c.isCluster;
  }

  /** The last connection error of a client this console opened itself (for a clearer message). */
  get lastRedisError(): Error | undefined {
    return this.#c.lastRedisError;
  }

  /** Rate settings and window reads (docs/rate-limits.md). */
  get rates(): RateSettings {
    return this.#c.rates;
  }

  /** Events of key and account changes (docs/events.md), published right after each change. */
  get events(): EventPublisher {
    return this.#c.events;
  }

  /** The price table (docs/metering.md, "Prices"). */
  get prices(): PriceBook {
    return this.#c.prices;
  }

  #members: Members | undefined;
  /** Members of accounts and their roles, for sign-in with OpenID Connect (members.ts). */
  get members(): Members {
    return (this.#members ??= new Members(this.#c));
  }

  // ---- keys (keys.ts) ----------------------------------------------------------------------

  /** Creates an active key. Returns its id and plaintext (the only time it is returned unasked). */
  createKey(input: CreateKeyInput, actor?: Actor): Promise<CreatedKey> {
    return keys.createKey(this.#c, input, actor);
  }

  /**
   * A new key in the place of an active one, carrying its spend; the old one expires after
   * `graceSeconds` (0: revoked at once). The new key is named `name`, by default the old name with
   * " (rolled)" (then " (rolled 2)"…: `rolledName`). A number is `graceSeconds` alone.
   */
  rollKey(keyId: string, options: number | RollOptions = {}, actor?: Actor): Promise<CreatedKey & { old: ManagedKey }> {
    return keys.rollKey(this.#c, keyId, typeof options === 'number' ? { graceSeconds: options } : options, actor);
  }

  /** One key's record with its roll relations (never plaintext). */
  getKey(keyId: string): Promise<ManagedKey> {
    return keys.getKey(this.#c, keyId);
  }

  /** An account's keys, active and revoked, oldest first. Never plaintext. */
  listKeys(account: string): Promise<ManagedKey[]> {
    return keys.listKeys(this.#c, account);
  }

  /** The id of the active, unexpired key this plaintext is, or null (one read whatever it is: GET /v1/key). */
  activeKeyIdOf(plaintext: string): Promise<string | null> {
    return activeKeyIdOf(this.#c, plaintext);
  }

  /** The account of a key id, or null for an unknown id (the same round trips either way). */
  accountOfKeyId(keyId: string): Promise<string | null> {
    return keys.accountOfKeyId(this.#c, keyId);
  }

  /** The plaintext of an active key, decrypted from its envelope; audited as `reveal` when an actor is given. */
  revealKey(keyId: string, actor?: Actor): Promise<{ id: string; key: string }> {
    return keys.revealKey(this.#c, keyId, actor);
  }

  /** Changes name, allowed models, expiry, limit and/or rates of an active key; other fields are untouched. */
  updateKey(keyId: string, patch: KeyUpdate, actor?: Actor): Promise<ManagedKey> {
    return keys.updateKey(this.#c, keyId, patch, actor);
  }

  /** Sets or (null) removes a key's spend limit; takes effect on the next request at every sidecar. */
  setKeyLimit(keyId: string, limit: KeyLimit | null, actor?: Actor): Promise<ManagedKey> {
    return keys.updateKey(this.#c, keyId, { limit }, actor);
  }

  /** Revokes a key (idempotent): the record stays, the sidecar treats it as unknown, the plaintext is destroyed. */
  revokeKey(keyId: string, actor?: Actor): Promise<RevokeResult> {
    return keys.revokeKey(this.#c, keyId, actor);
  }

  /** One key with its usage: last used, requests today and this month, spend, limit, rate windows. */
  getKeyView(keyId: string): Promise<KeyView> {
    return keys.getKeyView(this.#c, keyId);
  }

  /** The account's keys with their usage, oldest first. */
  listKeyViews(account: string): Promise<KeyView[]> {
    return keys.listKeyViews(this.#c, account);
  }

  /** Writes the list index entries of the given key records (the Cluster steps, the lazy build). */
  indexRecords(account: string, records: readonly string[], built = ''): Promise<number> {
    return keys.indexRecords(this.#c, account, records, built);
  }

  // ---- accounts (accounts.ts) --------------------------------------------------------------

  /** Every key of the account is refused (403 USER_BLOCKED) until it is enabled again. */
  disableAccount(account: string, actor?: Actor): Promise<AccountResult> {
    return accounts.setAccountStatus(this.#c, account, 'disabled', actor);
  }

  enableAccount(account: string, actor?: Actor): Promise<AccountResult> {
    return accounts.setAccountStatus(this.#c, account, 'active', actor);
  }

  setAccountStatus(account: string, status: AccountStatus, actor?: Actor): Promise<AccountResult> {
    return accounts.setAccountStatus(this.#c, account, status, actor);
  }

  /** The account's status (a missing account record is an enabled account). */
  accountStatus(account: string): Promise<AccountStatus> {
    return accounts.accountStatus(this.#c, account);
  }

  /** `{id, status, wallet: {enforced, balance_micros}, tokens, rates}`. */
  accountInfo(account: string): Promise<AccountInfo> {
    return accounts.accountInfo(this.#c, account);
  }

  /**
   * How the live sidecars read a model name without a provider, per entry family: what each
   * publishes of its KEYGATE_BARE_MODEL_PROVIDER (docs/models.md), by the rules of `wallet.rule`.
   */
  async bareModels(): Promise<BareModels> {
    return bareModelReadings(await liveSidecars(this.#c.redis, this.#c.schema.sidecars()));
  }

  /** Sets or (null) removes the account's request and token rates; audited as `update`. */
  setAccountRates(account: string, patch: RatesPatch, actor?: Actor): Promise<Rates> {
    return accounts.setAccountRates(this.#c, account, patch, actor);
  }

  /** `metered` or `external` (docs/endpoints.md): `external` opens `unbillable` endpoints to the account. */
  setAccountBilling(account: string, mode: AccountBilling, actor?: Actor): Promise<AccountBilling> {
    return billing.setAccountBilling(this.#c, account, mode, actor);
  }

  /** Adds to the account's prepaid wallet; idempotent on `reference`; audited as `credit` when it changed the balance. */
  creditAccount(account: string, amountMicros: number | string, reference: string, actor?: Actor): Promise<CreditResult> {
    return accounts.creditAccount(this.#c, account, amountMicros, reference, actor);
  }

  // ---- accounts' own upstream credentials (credentials.ts) -----------------------------------

  /** Sets the account's own credential for a provider (sealed under KEYGATE_CREDENTIAL_KEY); audited as `credential_set` without the secret. */
  setCredential(account: string, provider: string, secret: string, actor?: Actor): Promise<CredentialInfo> {
    return credentials.setCredential(this.#c, account, provider, secret, actor);
  }

  /** Removes the account's credential for a provider (NOT_FOUND when none); audited as `credential_remove`. */
  removeCredential(account: string, provider: string, actor?: Actor): Promise<void> {
    return credentials.removeCredential(this.#c, account, provider, actor);
  }

  /** A key rotation's last step: every credential sealed again under KEYGATE_CREDENTIAL_KEY's first key. */
  resealCredentials(actor?: Actor): Promise<{ resealed: number }> {
    return credentials.resealCredentials(this.#c, actor);
  }

  /** The account's credentials: provider, hint (last four), set time; never the secret. */
  listCredentials(account: string): Promise<CredentialInfo[]> {
    return credentials.listCredentials(this.#c, account);
  }

  // ---- usage (wallet.ts, usage-summary.ts) -------------------------------------------------

  /** Books one request's cost against the key's account (wallet, key spend, usage log); idempotent on the request id. Not audited. */
  recordUsage(input: UsageInput): Promise<UsageResult> {
    return this.#c.money.recordUsage(input);
  }

  /** The usage log from `since` (inclusive), oldest first, over every account or one. */
  exportUsage(o: { since: Date | number; until?: Date | number; account?: string }): AsyncGenerator<UsageEntry> {
    const ms = (v: Date | number) => (v instanceof Date ? v.getTime() : v);
    const sinceMs = ms(o.since);
    if (!Number.isFinite(sinceMs) || sinceMs < 0) throw new ConsoleError('INVALID_INPUT', 'since must be a valid instant');
    const q = { sinceMs, untilMs: o.until === undefined ? undefined : ms(o.until), account: o.account };
    if (this.#history !== null) return this.#history.exportUsage({ ...q, account: q.account === undefined ? undefined : validateAccountId(q.account) });
    return this.#c.money.exportUsage(q);
  }

  /** The account's usage log from `since` to `until` summed per day, key or model. */
  usageSummary(account: string, o: { since: number; until: number; groupBy: UsageGrouping }): Promise<UsageSummary> {
    const span = summarySpan(o.since, o.until);
    const h = this.#history;
    if (h !== null) return h.sums(validateAccountId(account), span.since, span.until, o.groupBy).then((rows) => summaryOfSums(account, rows, span, o.groupBy));
    return summarizeUsage(account, this.exportUsage({ ...span, account }), span, o.groupBy);
  }

  /**
   * The usage ledger (src/ledger) the usage reads use in place of the Redis log: the export, the
   * summary and the account's ledger read it, with no cap on history; null: the Redis log.
   */
  get usageHistory(): UsageHistory | null {
    return this.#history;
  }

  useUsageHistory(h: UsageHistory | null): void {
    this.#history = h;
  }

  // ---- prices (prices.ts) ------------------------------------------------------------------

  listPrices(): Promise<PriceEntry[]> {
    return this.#c.prices.list();
  }

  /** Sets a model's price (micro-units per million tokens); audited as `price_set` in the same script when an actor is given. */
  setPrice(model: string, price: PriceInput, actor?: Actor): Promise<PriceEntry> {
    const rec = validatePrice(price);
    return this.#c.prices.set(
      model,
      rec,
      actor &&
        ((m, p) => ({
          lists: this.#c.auditLists(null),
          event: mgmt.eventJson(actor, 'price_set', null, null, { model: m, input_micros: p.input, output_micros: p.output, cached_input_micros: p.cachedInput ?? null, cache_write_micros: p.cacheWrite ?? null, ...(p.extra || p.tiers || p.serviceTiers ? { classes: priceJson({ model: m, ...p }) } : {}) }),
        })),
    );
  }

  /** The account's price multiplier, decimal text ("1" when none is set). */
  accountPriceMultiplier(account: string): Promise<string> {
    return accountPriceMultiplier(this.#c, account);
  }

  /** Sets the account's price multiplier (decimal text; "1" removes it); audited as `update`. */
  setAccountPriceMultiplier(account: string, multiplier: string, actor?: Actor): Promise<string> {
    return setAccountPriceMultiplier(this.#c, account, multiplier, actor);
  }

  /** The price catalog in use (KEYGATE_PRICE_CATALOG; docs/metering.md, "The price catalog"). */
  priceCatalog(): CatalogInfo {
    return catalogInfo(priceCatalog(catalogEnabled()));
  }

  /** The catalog's models, priced now (empty when the catalog is off). */
  listCatalogPrices(): CatalogEntryJson[] {
    const c = priceCatalog(catalogEnabled());
    return c === null ? [] : catalogEntries(c);
  }

  /** How a model name resolves (the table, then the catalog) and its price now. */
  async explainPrice(model: string, provider?: string): Promise<PriceExplanation> {
    return explainPrice(await this.listPrices(), priceCatalog(catalogEnabled()), model, provider);
  }

  /** Removes a model's price; audited as `price_remove` in the same script when an actor is given. */
  removePrice(model: string, actor?: Actor): Promise<void> {
    return this.#c.prices.remove(model, actor && ((m) => ({ lists: this.#c.auditLists(null), event: mgmt.eventJson(actor, 'price_remove', null, null, { model: m }) })));
  }

  // ---- webhooks and alert settings (webhooks.ts, alerts.ts; docs/events.md) -------------------

  /** Adds a webhook endpoint (its secret is returned once, stored sealed); audited as `webhook_create` in the same script when an actor is given. */
  createWebhook(input: webhooks.WebhookInput, actor?: Actor, rule?: webhooks.DestinationRule): Promise<{ endpoint: Endpoint; secret: string }> {
    return webhooks.createWebhook(this.#c, input, actor, rule);
  }

  /** Every webhook endpoint, or one account's (not the all-accounts ones); never the secrets. */
  listWebhooks(account?: string | null): Promise<Endpoint[]> {
    return webhooks.listWebhooks(this.#c, account);
  }

  getWebhook(id: string): Promise<Endpoint> {
    return webhooks.getWebhook(this.#c, id);
  }

  /** Removes a webhook endpoint with its dead letters; audited as `webhook_remove`. */
  removeWebhook(id: string, actor?: Actor): Promise<void> {
    return webhooks.removeWebhook(this.#c, id, actor);
  }

  /** An endpoint's dead letters, newest first. */
  listDeadLetters(id: string, limit?: number): Promise<DeadLetter[]> {
    return webhooks.listDeadLetters(this.#c, id, limit);
  }

  /** Queues a dead letter for one more delivery; audited as `webhook_replay`. */
  replayDeadLetter(id: string, eventId: string, actor?: Actor): Promise<void> {
    return webhooks.replayDeadLetter(this.#c, id, eventId, actor);
  }

  /** The account's wallet-low threshold in micro-units (null removes it); audited as `alert`. */
  setWalletLow(account: string, micros: number | null, actor?: Actor): Promise<void> {
    return alerts.setWalletLow(this.#c, account, micros, actor);
  }

  /** A key's limit thresholds in percent (1-100, at most 10; [] = none); audited as `alert`. → the thresholds set. */
  setKeyAlertThresholds(keyId: string, thresholds: readonly number[], actor?: Actor): Promise<number[]> {
    return alerts.setKeyAlertThresholds(this.#c, keyId, thresholds, actor);
  }

  // ---- audit log, tokens, idempotency (management.ts) ---------------------------------------

  /** Appends an audit event (the server stamps the time). Never give key material in `changes`. */
  audit(actor: Actor, action: AuditAction, account: string | null, keyId: string | null, changes: Record<string, unknown> = {}): Promise<void> {
    return mgmt.audit(this.#c, actor, action, account, keyId, changes);
  }

  /** Newest first; `account` narrows to one account's events. */
  listAudit(opts: { account?: string; limit?: number } = {}): Promise<AuditEvent[]> {
    return mgmt.listAudit(this.#c, opts);
  }

  /** Creates a management token (shown once; only its digest is stored); audited as `token_create` (actor: the CLI unless given). */
  createToken(input: { name: string; account: string | null }, actor?: Actor): Promise<{ token: string; record: TokenRecord }> {
    return mgmt.createToken(this.#c, input, actor);
  }

  getToken(tokenId: string): Promise<TokenRecord> {
    return mgmt.getToken(this.#c, tokenId);
  }

  listTokens(): Promise<TokenRecord[]> {
    return mgmt.listTokens(this.#c);
  }

  revokeToken(tokenId: string, actor?: Actor): Promise<{ id: string; alreadyRevoked: boolean }> {
    return mgmt.revokeToken(this.#c, tokenId, actor);
  }

  /** The active token this plaintext is, or null (malformed, unknown or revoked: indistinguishable). */
  authenticate(token: string): Promise<TokenRecord | null> {
    return mgmt.authenticate(this.#c, token);
  }

  /** Claims an idempotency key for one creation (CONFLICT: another request, or still running). */
  claimIdempotency(scope: string, idempotencyKey: string, fingerprint: string): Promise<IdempotencyClaim> {
    return mgmt.claimIdempotency(this.#c, scope, idempotencyKey, fingerprint);
  }

  completeIdempotency(slot: string, fingerprint: string, keyId: string): Promise<void> {
    return mgmt.completeIdempotency(this.#c, slot, fingerprint, keyId);
  }

  releaseIdempotency(slot: string): Promise<void> {
    return mgmt.releaseIdempotency(this.#c, slot);
  }

  /** Closes the Redis connection if this console opened it. */
  close(): Promise<void> {
    return this.#c.close();
  }
}

/** The library's name for the console service (README "Library"): the same class, not a wrapper. */
export const KeyConsole = ConsoleService;
export type KeyConsole = ConsoleService;
