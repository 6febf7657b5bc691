/**
 * Console commands of the CLI (SPEC §5), on the console library:
 *   keys create --account ID --name NAME [--models a,b] [--expires ISO-8601] [--json]
 *   keys list --account ID [--json]          keys reveal KEY_ID [--json]
 *   keys update KEY_ID [--name NAME] [--models a,b | --all-models] [--expires ISO-8601 | --no-expiry]
 *   keys revoke KEY_ID                       accounts disable|enable ID
 * Every command takes --redis URL (else REDIS_URL) and --json (one JSON object on stdout).
 * Bad input: one line on stderr, non-zero exit, nothing written (the library validates first).
 */
import { Option, type Command } from 'commander';
import { loadConfig } from '../config.ts';
import { ConsoleError } from '../console/errors.ts';
import { KeyConsole, type KeyUpdate } from '../console/key-console.ts';
import { parseModelList } from '../console/validate.ts';
import type { KeyRecord } from '../schema/redis-schema.ts';

interface Common {
  redis?: string;
  json?: boolean;
}

function common(cmd: Command): Command {
  return cmd
    .option('--redis <url>', 'Redis URL (env REDIS_URL; default redis://127.0.0.1:6379)')
    .option('--json', 'print one JSON object instead of text');
}

/** Opens the console on the configured Redis, runs `fn`, always closes; store faults get one clear line. */
async function withConsole<T>(o: Common, fn: (kc: KeyConsole) => Promise<T>): Promise<T> {
  const config = loadConfig({ redisUrl: o.redis });
  const kc = new KeyConsole({ redis: config.redisUrl, namespace: config.redisNamespace, keyPrefix: config.keyPrefix });
  try {
    return await fn(kc);
  } catch (err) {
    if (err instanceof ConsoleError) throw err;
    const cause = kc.lastRedisError ?? err;
    throw new Error(`Redis error: ${cause instanceof Error ? cause.message : String(cause)}`);
  } finally {
    await kc.close();
  }
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The JSON form of a key record (snake_case, ISO-8601 times, never plaintext). */
export function recordJson(r: KeyRecord): Record<string, unknown> {
  return {
    id: r.id,
    account: r.account,
    name: r.name,
    status: r.status,
    models: r.models,
    expires_at: iso(r.expiresAt),
    created_at: iso(r.createdAt),
    updated_at: iso(r.updatedAt),
    revoked_at: iso(r.revokedAt),
    hint: r.hint,
  };
}

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

function json(value: unknown): void {
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
      .option('--expires <iso-8601>', 'expiry instant, e.g. 2026-12-31 or 2026-12-31T23:59:59Z (default: never)'),
  ).action(async (o: Common & { account: string; name: string; models?: string; expires?: string }) => {
    const models = o.models === undefined ? undefined : parseModelList(o.models);
    await withConsole(o, async (kc) => {
      const created = await kc.createKey({ account: o.account, name: o.name, models, expiresAt: o.expires });
      if (o.json) return json({ ...recordJson(created.record), key: created.key });
      out(`Created key ${created.id} for account ${created.record.account} (models: ${modelsText(created.record.models)}, expires: ${dateText(created.record.expiresAt, 'never')}).`);
      out(`Store it now; \`keygate keys reveal ${created.id}\` shows it again:`);
      out(created.key);
    });
  });

  common(keys.command('list').description("list an account's keys (never the plaintext)").requiredOption('--account <id>', 'account id')).action(
    async (o: Common & { account: string }) => {
      await withConsole(o, async (kc) => {
        const list = await kc.listKeys(o.account);
        if (o.json) return json({ account: o.account, keys: list.map(recordJson) });
        if (list.length === 0) return out(`No keys for account ${o.account}.`);
        out(
          table(
            ['ID', 'NAME', 'STATUS', 'KEY', 'MODELS', 'EXPIRES', 'CREATED'],
            list.map((r) => [r.id, clip(r.name, 40), r.status, r.hint, clip(modelsText(r.models), 40), dateText(r.expiresAt, 'never'), dateText(r.createdAt, '')]),
          ),
        );
      });
    },
  );

  common(keys.command('reveal').description("print a key's plaintext again (needs KEYGATE_REVEAL_KEY)").argument('<key-id>', 'key id')).action(
    async (keyId: string, o: Common) => {
      await withConsole(o, async (kc) => {
        const r = await kc.revealKey(keyId);
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
      .addOption(new Option('--no-expiry', 'remove the expiry').conflicts('expires')),
  ).action(async (keyId: string, o: Common & { name?: string; models?: string; allModels?: boolean; expires?: string; expiry?: boolean }) => {
    const patch: { -readonly [K in keyof KeyUpdate]: KeyUpdate[K] } = {};
    if (o.name !== undefined) patch.name = o.name;
    if (o.models !== undefined) patch.models = parseModelList(o.models);
    if (o.allModels) patch.models = null;
    if (o.expires !== undefined) patch.expiresAt = o.expires;
    if (o.expiry === false) patch.expiresAt = null;
    if (Object.keys(patch).length === 0) throw new ConsoleError('INVALID_INPUT', 'nothing to update: give --name, --models, --all-models, --expires or --no-expiry');
    await withConsole(o, async (kc) => {
      const r = await kc.updateKey(keyId, patch);
      if (o.json) return json(recordJson(r));
      out(`Updated key ${r.id}: name ${JSON.stringify(r.name)}, models ${modelsText(r.models)}, expires ${dateText(r.expiresAt, 'never')}.`);
    });
  });

  common(keys.command('revoke').description('revoke a key: refused at once by every sidecar; cannot be undone').argument('<key-id>', 'key id')).action(
    async (keyId: string, o: Common) => {
      await withConsole(o, async (kc) => {
        const r = await kc.revokeKey(keyId);
        if (o.json) return json({ id: r.id, account: r.account, status: 'revoked', already_revoked: r.alreadyRevoked });
        out(r.alreadyRevoked ? `Key ${r.id} was already revoked.` : `Revoked key ${r.id}.`);
      });
    },
  );

  const accounts = program.command('accounts').description('disable or enable every key of an account').showSuggestionAfterError(false);
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
        const r = verb === 'disable' ? await kc.disableAccount(account) : await kc.enableAccount(account);
        if (o.json) return json({ account: r.account, status: r.status, changed: r.changed });
        const word = verb === 'disable' ? 'disabled' : 'enabled';
        out(r.changed ? `Account ${r.account} ${word}.` : `Account ${r.account} was already ${word}.`);
      });
    });
  }
}
