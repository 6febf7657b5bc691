/**
 * Console commands of the CLI, on the console library:
 *   keys create --account ID --name NAME [--models a,b] [--expires ISO-8601] [--limit AMOUNT --limit-period P] [--json]
 *   keys list --account ID [--json]          keys show KEY_ID [--json]      keys reveal KEY_ID [--json]
 *   keys update KEY_ID [--name NAME] [--models a,b | --all-models] [--expires ISO-8601 | --no-expiry]
 *                      [--limit AMOUNT --limit-period P | --no-limit]
 *   keys revoke KEY_ID                       accounts show|disable|enable ID
 *   accounts limit ID [--rate N/UNIT | --no-rate] [--token-rate N/UNIT | --no-token-rate]
 *   accounts credit ID --amount AMOUNT --reference REF
 *   accounts update ID --billing metered|external
 *   usage record --key KEY_ID --amount AMOUNT --request-id ID [--model M]
 *   usage export --since ISO-8601 [--until ISO-8601] [--account ID]   (JSON lines)
 * Every command takes --redis URL (else REDIS_URL) and --json (one JSON object on stdout).
 * Bad input: one line on stderr, non-zero exit, nothing written (the library validates first).
 */
import { Option, type Command } from 'commander';
import { loadConsoleConfig } from '../config.ts';
import { withLedgerReads } from './ledger-commands.ts';
import { ConsoleError, isStoreOutage } from '../console/errors.ts';
import type { KeyUpdate, KeyView } from '../console/keys.ts';
import { CLI_ACTOR } from '../console/management.ts';
import { ConsoleService } from '../console/service.ts';
import { parseIsoInstant, parseModelList } from '../console/validate.ts';
import { accountJson, creditJson, keyJson, keyRecordJson, usageEntryJson, usageJson } from '../console/views.ts';
import { formatAmount, LIMIT_PERIODS, MAX_TOKEN_COUNT, parseAmount, type KeyLimit, type LimitPeriod } from '../schema/money.ts';
import type { KeyRecord } from '../schema/redis-schema.ts';
import { windowUseWords } from '../core/key-rules.ts';
import { formatRate, parseRateText, type Rate } from '../schema/rates.ts';
import type { RatesPatch, RateUse } from '../console/rates.ts';
import { parseThresholdList } from '../console/alerts.ts';
import { unfinishedWarning } from '../console/best-effort.ts';

export interface Common {
  redis?: string;
  json?: boolean;
}

export function common(cmd: Command): Command {
  return cmd
    .option('--redis <url>', 'Redis URL (env REDIS_URL; default redis://127.0.0.1:6379)')
    .option('--json', 'print one JSON object instead of text');
}

/**
 * Opens the console on the configured Redis, runs `fn`, always closes; store faults get one clear
 * line. Changes and reveals are given the actor `cli`, so they are audited and publish their events.
 */
export async function withConsole<T>(o: Common, fn: (mc: ConsoleService) => Promise<T>): Promise<T> {
  const config = loadConsoleConfig({ redisUrl: o.redis });
  const kc = new ConsoleService({ redis: config.redisUrl, namespace: config.redisNamespace, keyPrefix: config.keyPrefix, requireWallet: config.requireWallet, usageLogMaxEntries: config.usageLogMax });
  try {
    return await fn(kc);
  } catch (err) {
    // A store outage (by type, src/console/errors.ts) gets one line naming Redis; anything else is itself.
    if (!isStoreOutage(err)) throw err;
    const cause = kc.lastRedisError ?? err;
    throw new Error(`Redis error: ${cause instanceof Error ? cause.message : String(cause)}`);
  } finally {
    await kc.close();
  }
}

/** The JSON form of a key record (snake_case, ISO-8601 times, never plaintext). */
export const recordJson: (r: KeyRecord) => Record<string, unknown> = keyRecordJson;

/** `AMOUNT` of the CLI: a positive decimal with at most 6 decimals → micro-units. */
export function amountArg(text: string, what = '--amount'): number {
  const micros = parseAmount(text);
  if (micros === null) {
    throw new ConsoleError('INVALID_INPUT', `${what} ${JSON.stringify(text.slice(0, 40))} is not a positive amount: digits with at most 6 decimals, e.g. 12.50 or 0.000001`);
  }
  return micros;
}

function limitArgs(amount: string | undefined, period: string | undefined): KeyLimit | undefined {
  if (amount === undefined && period === undefined) return undefined;
  if (amount === undefined || period === undefined) throw new ConsoleError('INVALID_INPUT', '--limit and --limit-period go together');
  if (!(LIMIT_PERIODS as readonly string[]).includes(period)) throw new ConsoleError('INVALID_INPUT', `--limit-period must be one of ${LIMIT_PERIODS.join(', ')}`);
  return { amountMicros: amountArg(amount, '--limit'), period: period as LimitPeriod };
}

/** `--rate N/UNIT` / `--token-rate N/UNIT` / `--no-rate` / `--no-token-rate` → a rates patch (bad text: a clear error, nothing changed). */
export function rateArgs(o: { rate?: string | boolean; tokenRate?: string | boolean }): RatesPatch {
  const one = (v: string | boolean | undefined, kind: 'requests' | 'tokens', flag: string): Rate | null | undefined => {
    if (v === undefined || v === true) return undefined;
    if (v === false) return null;
    const r = parseRateText(v, kind);
    if ('error' in r) throw new ConsoleError('INVALID_INPUT', `${flag}: ${r.error}`);
    return r;
  };
  const requests = one(o.rate, 'requests', '--rate');
  const tokens = one(o.tokenRate, 'tokens', '--token-rate');
  return { ...(requests !== undefined && { requests }), ...(tokens !== undefined && { tokens }) };
}

/**
 * `5/s (3 used this window)`, `1000/h (26 used this window, up to 25 of them reserved ahead by
 * sidecars)` or `none`.
 */
function rateText(r: Rate | null, use: RateUse | null): string {
  if (r === null) return 'none';
  return `${formatRate(r)}${windowUseWords(use)}`;
}
const ratesText = (v: KeyView) => `rate ${rateText(v.rates.requests, v.rateUse.requests)}; token rate ${rateText(v.rates.tokens, v.rateUse.tokens)}`;

/** Booked input and output tokens (metered or recorded): `1117 in, 46 out`. */
const tokensText = (t: { input: number; output: number }) => `${t.input} in, ${t.output} out`;

const limitText = (v: KeyView) => (v.usage.limit === null ? 'none' : `${formatAmount(v.usage.limit.amountMicros)}/${v.usage.limit.period}`);
const spendText = (v: KeyView) =>
  `${formatAmount(v.usage.spend.periodMicros)}${v.usage.limit ? ` of ${formatAmount(v.usage.limit.amountMicros)}` : ''} this ${v.usage.spend.period === 'total' ? 'lifetime' : v.usage.spend.period}`;

export function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** A write done with best-effort parts left unfinished (Cluster with a master down): one warning line on stderr, exit 0. */
export function warnUnfinished(what: string, unfinished: readonly string[] | undefined): void {
  const line = unfinishedWarning(what, unfinished);
  if (line !== null) process.stderr.write(`${line}\n`);
}

export function json(value: unknown): void {
  out(JSON.stringify(value));
}

const modelsText = (m: readonly string[] | null) => (m === null ? 'all' : m.join(','));
const dateText = (ms: number | null, none: string) => (ms === null ? none : new Date(ms).toISOString().replace(/\.000Z$/, 'Z'));

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max([...h].length, ...rows.map((r) => [...(r[i] ?? '')].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(widths[i]! - [...c].length)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** The status a user cares about: an active key past its expiry is refused, so it shows as `expired`. */
export function shownStatus(r: KeyRecord, nowMs = Date.now()): string {
  return r.status === 'active' && r.expiresAt !== null && r.expiresAt <= nowMs ? 'expired' : r.status;
}

const clip = (s: string, n: number) => ([...s].length > n ? `${[...s].slice(0, n - 1).join('')}…` : s);

export function registerConsoleCommands(program: Command): void {
  // One-line errors: no "(Did you mean …?)" second line; subcommands inherit this setting.
  const keys = program.command('keys').description('create, list, reveal, update and revoke API keys').showSuggestionAfterError(false);

  common(
    keys
      .command('create')
      .description('create a key; prints its id and the key (needs KEYGATE_REVEAL_KEY)')
      .requiredOption('--account <id>', 'owning account id')
      .requiredOption('--name <name>', `display name (1-128 characters)`)
      .option('--models <list>', 'allowed models, comma-separated: provider/model, provider/* or * (default: all)')
      .option('--expires <iso-8601>', 'expiry instant, e.g. 2026-12-31 or 2026-12-31T23:59:59Z (default: never)')
      .option('--limit <amount>', 'spend limit per period, e.g. 25.00 (with --limit-period)')
      .option('--limit-period <period>', 'day, week (Monday to Sunday), month or total; periods reset at 00:00 UTC')
      .option('--rate <N/UNIT>', 'request rate, e.g. 5/s or 1000/m (UNIT: s, m, h, d; windows aligned to UTC)')
      .option('--token-rate <N/UNIT>', 'token rate (input + output tokens), e.g. 100000/m'),
  ).action(async (o: Common & { account: string; name: string; models?: string; expires?: string; limit?: string; limitPeriod?: string; rate?: string; tokenRate?: string }) => {
    const models = o.models === undefined ? undefined : parseModelList(o.models);
    const limit = limitArgs(o.limit, o.limitPeriod);
    const rates = rateArgs(o);
    await withConsole(o, async (kc) => {
      const created = await kc.createKey({ account: o.account, name: o.name, models, expiresAt: o.expires, limit, rates }, CLI_ACTOR);
      warnUnfinished(`created key ${created.id}`, created.unfinished);
      if (o.json) return json({ ...keyJson(await kc.getKeyView(created.id)), key: created.key });
      out(`Created key ${created.id} for account ${created.record.account} (models: ${modelsText(created.record.models)}, expires: ${dateText(created.record.expiresAt, 'never')}).`);
      out(`Store it now; \`keygate keys reveal ${created.id}\` shows it again:`);
      out(created.key);
    });
  });

  common(keys.command('list').description("list an account's keys (never the plaintext)").requiredOption('--account <id>', 'account id')).action(
    async (o: Common & { account: string }) => {
      await withConsole(o, async (kc) => {
        const list = await kc.listKeyViews(o.account);
        if (o.json) return json({ account: o.account, keys: list.map((r) => ({ ...keyJson(r), expired: shownStatus(r) === 'expired' })) });
        if (list.length === 0) return out(`No keys for account ${o.account}.`);
        out(
          table(
            ['ID', 'NAME', 'STATUS', 'KEY', 'MODELS', 'EXPIRES', 'CREATED', 'LAST USED', 'REQUESTS TODAY', 'SPEND', 'TOKENS TODAY', 'LIMIT', 'RATE', 'TOKEN RATE'],
            list.map((r) => [
              r.id,
              clip(r.name, 40),
              shownStatus(r),
              r.hint,
              clip(modelsText(r.models), 40),
              dateText(r.expiresAt, 'never'),
              dateText(r.createdAt, ''),
              dateText(r.usage.lastUsedAt, 'never'),
              String(r.usage.requests.today),
              formatAmount(r.usage.spend.periodMicros),
              tokensText(r.usage.tokens.today),
              limitText(r),
              rateText(r.rates.requests, r.rateUse.requests),
              rateText(r.rates.tokens, r.rateUse.tokens),
            ]),
          ),
        );
      });
    },
  );

  common(keys.command('show').description('show a key: settings, last use, requests, spend, tokens, limit and rates (never the plaintext)').argument('<key-id>', 'key id')).action(
    async (keyId: string, o: Common) => {
      await withConsole(o, async (kc) => {
        const v = await kc.getKeyView(keyId);
        if (o.json) return json(keyJson(v));
        out(
          [
            `Key ${v.id} (${v.hint}) "${v.name}" of account ${v.account}: ${v.status}`,
            `  models: ${modelsText(v.models)}; expires: ${dateText(v.expiresAt, 'never')}; created: ${dateText(v.createdAt, '')}`,
            `  limit: ${limitText(v)}; spend: ${spendText(v)}, ${formatAmount(v.usage.spend.totalMicros)} in total`,
            `  last used: ${dateText(v.usage.lastUsedAt, 'never')}; requests: ${v.usage.requests.today} today, ${v.usage.requests.month} this month; refused: endpoint ${v.usage.refused.endpoint}`,
            `  tokens: ${tokensText(v.usage.tokens.today)} today; ${tokensText(v.usage.tokens.month)} this month`,
            `  ${ratesText(v)}`,
          ].join('\n'),
        );
      });
    },
  );

  common(keys.command('reveal').description("print a key's plaintext again (needs KEYGATE_REVEAL_KEY)").argument('<key-id>', 'key id')).action(
    async (keyId: string, o: Common) => {
      await withConsole(o, async (kc) => {
        const r = await kc.revealKey(keyId, CLI_ACTOR);
        if (o.json) return json({ id: r.id, key: r.key });
        out(r.key);
      });
    },
  );

  common(
    keys
      .command('update')
      .description("change a key's name, allowed models or expiry; other fields are kept")
      .argument('<key-id>', 'key id')
      .option('--name <name>', 'new display name')
      .addOption(new Option('--models <list>', 'allowed models, comma-separated (replaces the list)').conflicts('allModels'))
      .addOption(new Option('--all-models', 'allow every model').conflicts('models'))
      .addOption(new Option('--expires <iso-8601>', 'new expiry instant').conflicts('expiry'))
      .addOption(new Option('--no-expiry', 'remove the expiry').conflicts('expires'))
      .option('--limit <amount>', 'new spend limit per period (with --limit-period)')
      .option('--limit-period <period>', 'day, week, month or total')
      .option('--no-limit', 'remove the spend limit')
      .option('--rate <N/UNIT>', 'new request rate, e.g. 5/s')
      .option('--no-rate', 'remove the request rate')
      .option('--token-rate <N/UNIT>', 'new token rate, e.g. 100000/m')
      .option('--no-token-rate', 'remove the token rate')
      .option('--alert-at <list>', "key.limit.threshold at these percentages of the limit, e.g. 50,80,100 ('' = none)"),
  ).action(async (keyId: string, o: Common & { name?: string; models?: string; allModels?: boolean; expires?: string; expiry?: boolean; limit?: string | false; limitPeriod?: string; alertAt?: string; rate?: string | boolean; tokenRate?: string | boolean }) => {
    const patch: { -readonly [K in keyof KeyUpdate]: KeyUpdate[K] } = {};
    const rates = rateArgs(o);
    if (Object.keys(rates).length > 0) patch.rates = rates;
    if (o.name !== undefined) patch.name = o.name;
    if (o.models !== undefined) patch.models = parseModelList(o.models);
    if (o.allModels) patch.models = null;
    if (o.expires !== undefined) patch.expiresAt = o.expires;
    if (o.expiry === false) patch.expiresAt = null;
    if (o.limit === false) {
      if (o.limitPeriod !== undefined) throw new ConsoleError('INVALID_INPUT', '--no-limit takes no --limit-period');
      patch.limit = null;
    } else {
      const limit = limitArgs(o.limit, o.limitPeriod);
      if (limit !== undefined) patch.limit = limit;
    }
    const alertAt = o.alertAt === undefined ? undefined : o.alertAt.trim() === '' ? [] : parseThresholdList(o.alertAt); // events
    if (Object.keys(patch).length === 0 && alertAt === undefined) {
      throw new ConsoleError('INVALID_INPUT', 'nothing to update: give --name, --models, --all-models, --expires, --no-expiry, --limit, --no-limit, --rate, --no-rate, --token-rate, --no-token-rate or --alert-at');
    }
    await withConsole(o, async (kc) => {
      if (Object.keys(patch).length > 0) await kc.updateKey(keyId, patch, CLI_ACTOR);
      if (alertAt !== undefined) await kc.setKeyAlertThresholds(keyId, alertAt, CLI_ACTOR); // events
      const r = await kc.getKeyView(keyId);
      if (o.json) return json(keyJson(r));
      out(`Updated key ${r.id}: name ${JSON.stringify(r.name)}, models ${modelsText(r.models)}, expires ${dateText(r.expiresAt, 'never')}, limit ${limitText(r)}, ${ratesText(r)}.`);
    });
  });

  common(keys.command('revoke').description('revoke a key: refused at once by every sidecar; cannot be undone').argument('<key-id>', 'key id')).action(
    async (keyId: string, o: Common) => {
      await withConsole(o, async (kc) => {
        const r = await kc.revokeKey(keyId, CLI_ACTOR);
        warnUnfinished(`revoked key ${r.id}`, r.unfinished);
        if (o.json) return json({ id: r.id, account: r.account, status: 'revoked', already_revoked: r.alreadyRevoked });
        out(r.alreadyRevoked ? `Key ${r.id} was already revoked.` : `Revoked key ${r.id}.`);
      });
    },
  );

  const accounts = program.command('accounts').description("show an account, credit its wallet, disable or enable all of its keys").showSuggestionAfterError(false);

  common(accounts.command('show').description("an account's status, wallet, rates and tokens").argument('<account-id>', 'account id')).action(async (account: string, o: Common) => {
    await withConsole(o, async (kc) => {
      const a = await kc.accountInfo(account);
      const m = await kc.accountPriceMultiplier(account); // section 16: shown when set
      if (o.json) return json({ ...accountJson(a), ...(m !== '1' ? { price_multiplier: m } : {}) });
      const wallet = !a.wallet.enforced
        ? 'no wallet (not metered)'
        : `balance ${formatAmount(a.wallet.balance_micros)} (${a.wallet.rule === 'mixed' ? 'enforced by some sidecars, not all' : 'enforced'})`;
      out(`Account ${a.id}: ${a.status}; ${wallet}; rate ${rateText(a.rates.requests, a.rateUse.requests)}; token rate ${rateText(a.rates.tokens, a.rateUse.tokens)}; tokens ${tokensText(a.tokens.today)} today; ${tokensText(a.tokens.month)} this month; billing ${a.billing}.${m !== '1' ? ` Price multiplier ${m}.` : ''}`);
    });
  });

  common(
    accounts
      .command('limit')
      .description("set or remove the account's request and token rates (every key of the account counts against them)")
      .argument('<account-id>', 'account id')
      .option('--rate <N/UNIT>', 'request rate, e.g. 100/s')
      .option('--no-rate', 'remove the request rate')
      .option('--token-rate <N/UNIT>', 'token rate, e.g. 1000000/h')
      .option('--no-token-rate', 'remove the token rate'),
  ).action(async (account: string, o: Common & { rate?: string | boolean; tokenRate?: string | boolean }) => {
    const rates = rateArgs(o);
    if (Object.keys(rates).length === 0) throw new ConsoleError('INVALID_INPUT', 'nothing to change: give --rate, --no-rate, --token-rate or --no-token-rate');
    await withConsole(o, async (kc) => {
      await kc.setAccountRates(account, rates, CLI_ACTOR);
      const a = await kc.accountInfo(account);
      const m = await kc.accountPriceMultiplier(account); // section 16: shown when set
      if (o.json) return json({ ...accountJson(a), ...(m !== '1' ? { price_multiplier: m } : {}) });
      out(`Account ${a.id}: rate ${rateText(a.rates.requests, a.rateUse.requests)}; token rate ${rateText(a.rates.tokens, a.rateUse.tokens)}.`);
    });
  });

  common(
    accounts
      .command('update')
      .description("set the account's billing (metered: keygate books its usage; external: its router books every request, and unbillable endpoints open) or its price multiplier for metered usage (applied after every other price rule)")
      .argument('<account-id>', 'account id')
      .addOption(new Option('--billing <mode>', 'metered or external').choices(['metered', 'external']))
      .option('--price-multiplier <multiplier>', 'a decimal from 0 to 1000, at most 6 decimals (1.2; 0 = free; 1 = the default)'),
  ).action(async (account: string, o: Common & { billing?: 'metered' | 'external'; priceMultiplier?: string }) => {
    if (o.billing === undefined && o.priceMultiplier === undefined) throw new ConsoleError('INVALID_INPUT', 'nothing to change: give --billing metered|external or --price-multiplier M');
    await withConsole(o, async (kc) => {
      // The multiplier is checked (and refused) before the billing is written: a bad value changes nothing.
      const m = o.priceMultiplier === undefined ? undefined : await kc.setAccountPriceMultiplier(account, o.priceMultiplier, CLI_ACTOR);
      if (o.billing !== undefined) await kc.setAccountBilling(account, o.billing, CLI_ACTOR);
      const a = await kc.accountInfo(account);
      const shown = await kc.accountPriceMultiplier(account);
      if (o.json) return json({ ...accountJson(a), ...(shown !== '1' ? { price_multiplier: shown } : {}) });
      const parts = [...(o.billing !== undefined ? [`billing ${a.billing}`] : []), ...(m !== undefined ? [`price multiplier ${m}`] : [])];
      out(`Account ${a.id}: ${parts.join('; ')}.`);
    });
  });

  common(
    accounts
      .command('credit')
      .description("add to the account's prepaid wallet (idempotent on --reference)")
      .argument('<account-id>', 'account id')
      .requiredOption('--amount <amount>', 'amount to add, e.g. 12.50')
      .requiredOption('--reference <ref>', 'payment reference; the same reference is credited once'),
  ).action(async (account: string, o: Common & { amount: string; reference: string }) => {
    const amount = amountArg(o.amount);
    await withConsole(o, async (kc) => {
      const r = await kc.creditAccount(account, amount, o.reference, CLI_ACTOR);
      if (o.json) return json(creditJson(r));
      out(
        r.credited
          ? `Credited ${formatAmount(r.amountMicros)} to account ${r.account}; balance ${formatAmount(r.balanceMicros)}.`
          : `Reference ${r.reference} was already credited (${formatAmount(r.amountMicros)}); nothing changed. Balance ${formatAmount(r.balanceMicros)}.`,
      );
    });
  });
  for (const [verb, status] of [
    ['disable', 'disabled'],
    ['enable', 'active'],
  ] as const) {
    common(
      accounts
        .command(verb)
        .description(verb === 'disable' ? "refuse all of the account's keys (403 USER_BLOCKED)" : 'accept the account\'s keys again')
        .argument('<account-id>', 'account id'),
    ).action(async (account: string, o: Common) => {
      await withConsole(o, async (kc) => {
        // A kill switch with a typo in the account id must not look like it worked: it still
        // disables (the account may get keys later), but says on stderr that it has none.
        if (verb === 'disable' && (await kc.listKeys(account)).length === 0) {
          process.stderr.write(`keygate: warning: account ${account} has no keys; check the account id (disabled anyway)\n`);
        }
        const r = await kc.setAccountStatus(account, verb === 'disable' ? 'disabled' : 'active', CLI_ACTOR);
        warnUnfinished(`${verb}d account ${r.account}`, r.unfinished);
        if (o.json) return json({ account: r.account, status: r.status, changed: r.changed });
        const word = verb === 'disable' ? 'disabled' : 'enabled';
        out(r.changed ? `Account ${r.account} ${word}.` : `Account ${r.account} was already ${word}.`);
      });
    });
  }

  const usage = program.command('usage').description('record the cost of a request; export the usage log').showSuggestionAfterError(false);

  common(
    usage
      .command('record')
      .description("book one request's cost: debits the wallet, adds to the key's spend, logs it (idempotent on --request-id)")
      .requiredOption('--key <key-id>', 'the key id the request was allowed with (x-keygate-key-id)')
      .requiredOption('--amount <amount>', 'cost, e.g. 0.0042')
      .requiredOption('--request-id <id>', "the request's id; recording it again changes nothing")
      .option('--model <model>', 'the model that ran')
      .option('--input-tokens <n>', 'input tokens')
      .option('--output-tokens <n>', 'output tokens'),
  ).action(async (o: Common & { key: string; amount: string; requestId: string; model?: string; inputTokens?: string; outputTokens?: string }) => {
    const amountMicros = amountArg(o.amount);
    const count = (v: string | undefined, what: string) => {
      if (v === undefined) return undefined;
      // A number at all; its bound is the library's (recordUsage names it).
      if (!/^\d{1,15}$/.test(v)) throw new ConsoleError('INVALID_INPUT', `${what} must be a non-negative integer, at most ${MAX_TOKEN_COUNT}`);
      return Number(v);
    };
    const input = {
      keyId: o.key,
      amountMicros,
      requestId: o.requestId,
      model: o.model,
      inputTokens: count(o.inputTokens, '--input-tokens'),
      outputTokens: count(o.outputTokens, '--output-tokens'),
    };
    await withConsole(o, async (kc) => {
      const r = await kc.recordUsage(input);
      if (o.json) {
        return json(usageJson(r));
      }
      if (!r.booked) return out(`Request ${r.requestId} was already recorded; nothing changed.`);
      const bal = r.balanceMicros === null ? 'no wallet' : `balance ${formatAmount(r.balanceMicros)}`;
      out(`Recorded ${formatAmount(r.amountMicros)} for key ${r.keyId} (account ${r.account}); ${bal}.`);
    });
  });

  common(
    usage
      .command('export')
      .description('print the usage log as JSON lines, oldest first')
      .requiredOption('--since <iso-8601>', 'first instant (inclusive)')
      .option('--until <iso-8601>', 'last instant (exclusive; default: now)')
      .option('--account <id>', 'one account only'),
  ).action(async (o: Common & { since: string; until?: string; account?: string }) => {
    const instant = (v: string, what: string) => {
      try {
        return parseIsoInstant(v);
      } catch {
        throw new ConsoleError('INVALID_INPUT', `${what} is not an ISO-8601 instant, e.g. 2026-11-01 or 2026-11-01T00:00:00Z`);
      }
    };
    const since = instant(o.since, '--since');
    const until = o.until === undefined ? undefined : instant(o.until, '--until');
    await withConsole(o, (kc) =>
      // with KEYGATE_LEDGER_URL: every booking, from PostgreSQL (docs/ledger.md)
      withLedgerReads(kc, async () => {
        for await (const e of kc.exportUsage({ since, until, account: o.account })) {
          json(usageEntryJson(e));
        }
      }),
    );
  });
}
