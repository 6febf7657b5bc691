/**
 * CLI commands of management (roll, tokens, audit), on the same console service as the management API:
 *   console [--redis URL] [--port N]                   the management API server
 *   keys roll KEY_ID [--grace SECONDS] [--name NAME] [--json]
 *   tokens create --name NAME (--all-accounts | --account ID) [--json]
 *   tokens list [--json]          tokens revoke TOKEN_ID
 *   audit list [--account ID] [--limit N] [--json]
 * Every change is audited with actor `cli`.
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { ConsoleError } from '../console/errors.ts';
import { CLI_ACTOR } from '../console/management.ts';
import { stopOnSignals } from './signals.ts';
import { common, json, out, recordJson, table, warnUnfinished, withConsole, type Common } from './console-commands.ts';

function intArg(name: string, max: number) {
  return (v: string) => {
    if (!/^\d{1,9}$/.test(v) || Number(v) > max) throw new InvalidArgumentError(`${name} must be an integer from 0 to ${max}`);
    return Number(v);
  };
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function registerManagementCommands(program: Command): void {
  program
    .command('console')
    .description('run the management API (HTTP, OpenAPI at /openapi.json; needs KEYGATE_REVEAL_KEY to create and reveal)')
    .option('--redis <url>', 'Redis URL (env REDIS_URL; default redis://127.0.0.1:6379)')
    .option('--port <n>', 'listen port (env KEYGATE_CONSOLE_PORT; default 9004)', intArg('--port', 65535))
    .addHelpText('after', '\nSettings: KEYGATE_CONSOLE_HOST, KEYGATE_CONSOLE_TRUST_PROXY, KEYGATE_CONSOLE_RATE_LIMIT; see README "Management API".')
    .action(async (o: { redis?: string; port?: number }) => {
      const [{ loadConsoleApiConfig }, { startConsole }, { createLogger }] = await Promise.all([
        import('../console-api/config.ts'),
        import('../console-api/main.ts'),
        import('../telemetry/logger.ts'),
      ]);
      const config = loadConsoleApiConfig({ port: o.port, redisUrl: o.redis });
      const log = createLogger(config.logLevel, undefined, { keyPrefix: config.keyPrefix });
      const server = await startConsole(config, log);
      stopOnSignals(log, config.shutdownTimeoutMs, () => server.shutdown());
    });

  const keys = program.commands.find((c) => c.name() === 'keys');
  if (keys === undefined) throw new Error('register the console commands first');
  common(
    keys
      .command('roll')
      .description('replace a key with a new one of the same settings; the old one expires after the grace (default 0: at once)')
      .argument('<key-id>', 'key id')
      .option('--grace <seconds>', 'seconds the old key keeps working (default 0)', intArg('--grace', 30 * 86400))
      .option('--name <name>', 'the new key\'s name (default: the old name with " (rolled)", then " (rolled 2)"…)'),
  ).action(async (keyId: string, o: Common & { grace?: number; name?: string }) => {
    await withConsole(o, async (mc) => {
      const r = await mc.rollKey(keyId, { graceSeconds: o.grace ?? 0, name: o.name ?? null }, CLI_ACTOR);
      warnUnfinished(`rolled key ${keyId} to ${r.id}`, r.unfinished);
      if (o.json) return json({ ...recordJson(r.record), key: r.key, rolled_from: keyId, old: { ...recordJson(r.old), rolled_to: r.id } });
      out(`Rolled key ${keyId} to ${r.id}; the old key ${o.grace ? `expires at ${iso(r.old.expiresAt)}` : 'is revoked'}.`);
      out(`Store it now; \`keygate keys reveal ${r.id}\` shows it again:`);
      out(r.key);
    });
  });

  const tokens = program.command('tokens').description('management tokens for the management API').showSuggestionAfterError(false);
  common(
    tokens
      .command('create')
      .description('create a management token (shown once)')
      .requiredOption('--name <name>', 'display name')
      .addOption(new Option('--all-accounts', 'may manage every account and run operator operations').conflicts('account'))
      .addOption(new Option('--account <id>', 'may manage this one account only').conflicts('allAccounts')),
  ).action(async (o: Common & { name: string; allAccounts?: boolean; account?: string }) => {
    if (!o.allAccounts && o.account === undefined) throw new ConsoleError('INVALID_INPUT', 'give --all-accounts or --account ID');
    await withConsole(o, async (mc) => {
      const t = await mc.createToken({ name: o.name, account: o.account ?? null }, CLI_ACTOR);
      const scope = t.record.account ?? 'all';
      if (o.json) return json({ id: t.record.id, token: t.token, name: t.record.name, scope });
      out(`Created management token ${t.record.id} (scope: ${scope}). Store it now; it is not shown again:`);
      out(t.token);
    });
  });

  common(tokens.command('list').description('list management tokens (never the token)')).action(async (o: Common) => {
    await withConsole(o, async (mc) => {
      const list = await mc.listTokens();
      const rows = list.map((t) => ({ id: t.id, name: t.name, scope: t.account ?? 'all', status: t.status, hint: t.hint, created_at: iso(t.createdAt), revoked_at: iso(t.revokedAt) }));
      if (o.json) return json({ tokens: rows });
      if (rows.length === 0) return out('No management tokens.');
      out(table(['ID', 'NAME', 'SCOPE', 'STATUS', 'TOKEN', 'CREATED'], rows.map((t) => [t.id, t.name, t.scope, t.status, t.hint, t.created_at ?? ''])));
    });
  });

  common(tokens.command('revoke').description('revoke a management token').argument('<token-id>', 'token id')).action(async (id: string, o: Common) => {
    await withConsole(o, async (mc) => {
      const r = await mc.revokeToken(id, CLI_ACTOR);
      if (o.json) return json({ id: r.id, status: 'revoked', already_revoked: r.alreadyRevoked });
      out(r.alreadyRevoked ? `Token ${id} was already revoked.` : `Revoked token ${id}.`);
    });
  });

  const audit = program.command('audit').description('read the audit log').showSuggestionAfterError(false);
  common(
    audit
      .command('list')
      .description('audit events, newest first')
      .option('--account <id>', "only this account's events")
      .option('--limit <n>', 'at most N events (1-1000, default 100)', intArg('--limit', 1000)),
  ).action(async (o: Common & { account?: string; limit?: number }) => {
    await withConsole(o, async (mc) => {
      const events = await mc.listAudit({ account: o.account, limit: o.limit });
      if (o.json) return json({ events });
      if (events.length === 0) return out('No audit events.');
      out(
        table(
          ['TIME', 'ACTION', 'ACTOR', 'ACCOUNT', 'KEY', 'CHANGES'],
          events.map((e) => [e.time, e.action, e.actor.type === 'cli' ? 'cli' : `${e.actor.name} (${e.actor.id})`, e.account ?? '', e.key_id ?? '', JSON.stringify(e.changes)]),
        ),
      );
    });
  });
}
