/**
 * Accounts' own upstream credentials from the CLI (SPEC 18, docs/credentials.md):
 *   accounts credential set ACCOUNT --provider openai|anthropic|google (--from-env VAR | --stdin) [--json]
 *   accounts credential list ACCOUNT [--json]          accounts credential remove ACCOUNT --provider P
 *   accounts credential reseal   (a key rotation's last step: every credential under the ring's first key)
 * The secret is never taken on the command line (it would stay in the shell history and the process
 * list): from an environment variable named by --from-env, or from standard input. Setting needs
 * KEYGATE_CREDENTIAL_KEY. Changes are audited (actor `cli`) without the secret.
 */
import { Option, type Command } from 'commander';
import { CLI_ACTOR } from '../console/management.ts';
import { ConsoleError } from '../console/errors.ts';
import { credentialJson } from '../console/views.ts';
import { FAMILIES } from '../core/families/index.ts';
import { common, json, out, table, withConsole, type Common } from './console-commands.ts';

const MAX_STDIN = 64 * 1024;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of process.stdin as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_STDIN) throw new ConsoleError('INVALID_INPUT', 'standard input is over 64 KiB: give the credential alone');
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The secret from --from-env or --stdin (exactly one), surrounding whitespace and the final newline trimmed. */
async function secretOf(o: { fromEnv?: string; stdin?: boolean; secret?: string }): Promise<string> {
  if (o.secret !== undefined) {
    throw new ConsoleError('INVALID_INPUT', 'a credential on the command line is refused (it would stay in the shell history and the process list): use --from-env VAR or --stdin');
  }
  if ((o.fromEnv === undefined) === (o.stdin !== true)) throw new ConsoleError('INVALID_INPUT', 'give the credential with exactly one of --from-env VAR or --stdin');
  if (o.fromEnv !== undefined) {
    const v = process.env[o.fromEnv];
    if (v === undefined || v.trim() === '') throw new ConsoleError('INVALID_INPUT', `--from-env: the environment variable ${o.fromEnv.slice(0, 64)} is not set or empty`);
    return v.trim();
  }
  return (await readStdin()).trim();
}

export function registerCredentialCommands(program: Command): void {
  const accounts = program.commands.find((c) => c.name() === 'accounts');
  if (accounts === undefined) throw new Error('the accounts command must be registered first');
  const credential = accounts
    .command('credential')
    .description("an account's own upstream credential per provider, injected by the sidecars in place of the gateway's")
    .showSuggestionAfterError(false);
  const provider = () => new Option('--provider <provider>', 'the provider').choices(FAMILIES).makeOptionMandatory();

  common(
    credential
      .command('set')
      .description("set (or replace) the account's credential for a provider; needs KEYGATE_CREDENTIAL_KEY")
      .argument('<account-id>', 'account id')
      .addOption(provider())
      .option('--from-env <var>', 'read the credential from this environment variable')
      .option('--stdin', 'read the credential from standard input')
      .addOption(new Option('--secret <value>').hideHelp())
      // Taken, to be refused with our message: the parser's own would echo the extra argument or option.
      .allowExcessArguments(true)
      .allowUnknownOption(true),
  ).action(async (account: string, o: Common & { provider: string; fromEnv?: string; stdin?: boolean; secret?: string }, cmd: Command) => {
    if (cmd.args.length > 1) {
      throw new ConsoleError('INVALID_INPUT', 'an unexpected argument or option (not shown: it may be a credential, and a credential on the command line is refused); give the credential with --from-env VAR or --stdin');
    }
    const secret = await secretOf(o);
    await withConsole(o, async (mc) => {
      const c = await mc.setCredential(account, o.provider, secret, CLI_ACTOR);
      if (o.json) return json(credentialJson(c));
      out(`Set the ${c.provider} credential of account ${account} (ending ${c.hint}); every sidecar uses it from the next request.`);
    });
  });

  common(credential.command('list').description("the account's credentials: provider, last four, set time (never the secret)").argument('<account-id>', 'account id')).action(
    async (account: string, o: Common) => {
      await withConsole(o, async (mc) => {
        const list = (await mc.listCredentials(account)).map(credentialJson);
        if (o.json) return json({ credentials: list });
        if (list.length === 0) return out(`Account ${account} has no credential of its own: its requests go upstream with the gateway's.`);
        out(table(['PROVIDER', 'HINT', 'SET'], list.map((c) => [c.provider, `…${c.hint}`, c.set_at])));
      });
    },
  );

  common(credential.command('remove').description("remove the account's credential for a provider").argument('<account-id>', 'account id').addOption(provider())).action(
    async (account: string, o: Common & { provider: string }) => {
      await withConsole(o, async (mc) => {
        await mc.removeCredential(account, o.provider, CLI_ACTOR);
        if (o.json) return json({ account, provider: o.provider, removed: true });
        out(`Removed the ${o.provider} credential of account ${account}; its requests go upstream with the gateway's from the next one.`);
      });
    },
  );

  common(credential.command('reseal').description("a key rotation's last step: seal every account's credentials again under KEYGATE_CREDENTIAL_KEY's first key")).action(async (o: Common) => {
    await withConsole(o, async (mc) => {
      const r = await mc.resealCredentials(CLI_ACTOR);
      if (o.json) return json(r);
      out(`Sealed ${r.resealed} credential(s) again under the first key of KEYGATE_CREDENTIAL_KEY; keys no longer named by any envelope may now leave the ring.`);
    });
  });
}
