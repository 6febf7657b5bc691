/**
 * Events commands of the CLI (docs/events.md):
 *   webhooks create --url URL (--account ID | --all-accounts) [--events a,b] [--json]
 *   webhooks list [--account ID] [--json]     webhooks remove ID     webhooks dead ID [--json]
 *   webhooks replay ID EVENT_ID
 *   accounts alert ID (--wallet-low AMOUNT | --no-wallet-low)
 * Key thresholds: `keys update KEY_ID --alert-at 50,80,100` (console-commands.ts).
 * Changes are audited (actor `cli`). Creating a webhook needs KEYGATE_REVEAL_KEY (its secret is stored sealed).
 */
import { Option, type Command } from 'commander';
import { ConsoleError } from '../console/errors.ts';
import { CLI_ACTOR } from '../console/management.ts';
import { loadWebhookConfig } from '../events/config.ts';
import { deadJson, webhookJson } from '../events/views.ts';
import { EVENT_TYPES } from '../events/types.ts';
import { formatAmount } from '../schema/money.ts';
import { amountArg, common, json, out, table, withConsole, type Common } from './console-commands.ts';

function group(program: Command, name: string, description: string): Command {
  return program.commands.find((c) => c.name() === name) ?? program.command(name).description(description).showSuggestionAfterError(false);
}

export function registerEventCommands(program: Command): void {
  const wh = program.command('webhooks').description('signed webhooks for key and money events: add, list, remove; dead letters').showSuggestionAfterError(false);

  common(
    wh
      .command('create')
      .description('add a webhook endpoint; prints its signing secret once')
      .requiredOption('--url <url>', 'https:// (or http://) URL of the receiver')
      .addOption(new Option('--account <id>', "the account whose events it receives").conflicts('allAccounts'))
      .addOption(new Option('--all-accounts', 'receive every account\'s events').conflicts('account'))
      .option('--events <list>', `event types, comma-separated (default all): ${EVENT_TYPES.join(', ')}`),
  ).action(async (o: Common & { url: string; account?: string; allAccounts?: boolean; events?: string }) => {
    if (o.account === undefined && !o.allAccounts) throw new ConsoleError('INVALID_INPUT', 'give --account ID or --all-accounts');
    const events = o.events === undefined ? undefined : o.events.split(',').map((s) => s.trim()).filter((s) => s !== '');
    const allowPrivate = loadWebhookConfig().allowPrivate;
    await withConsole(o, async (mc) => {
      const { endpoint, secret } = await mc.createWebhook({ url: o.url, account: o.allAccounts ? null : o.account, events }, CLI_ACTOR, { allowPrivate });
      if (o.json) return json({ ...webhookJson(endpoint), secret });
      out(`Created webhook ${endpoint.id} → ${endpoint.url} (${endpoint.account === null ? 'all accounts' : `account ${endpoint.account}`}, ${endpoint.events?.join(', ') ?? 'every event'}).`);
      out(`Signing secret (shown once): ${secret}`);
    });
  });

  common(wh.command('list').description('list webhook endpoints (never the secrets)').option('--account <id>', "only this account's endpoints")).action(async (o: Common & { account?: string }) => {
    await withConsole(o, async (mc) => {
      const list = (await mc.listWebhooks(o.account)).map(webhookJson);
      if (o.json) return json({ webhooks: list });
      if (list.length === 0) return out('No webhooks.');
      out(table(['ID', 'URL', 'ACCOUNT', 'EVENTS', 'STATUS'], list.map((w) => [w.id, w.url, w.account ?? '(all)', w.events?.join(',') ?? '(all)', w.status + (w.failing_since ? ` (failing since ${w.failing_since})` : '')])));
    });
  });

  common(wh.command('remove').description('remove a webhook endpoint (its dead letters too)').argument('<id>', 'webhook id')).action(async (id: string, o: Common) => {
    await withConsole(o, async (mc) => {
      await mc.removeWebhook(id, CLI_ACTOR);
      if (o.json) return json({ id, removed: true });
      out(`Removed webhook ${id}.`);
    });
  });

  common(wh.command('dead').description("an endpoint's dead letters, newest first").argument('<id>', 'webhook id')).action(async (id: string, o: Common) => {
    await withConsole(o, async (mc) => {
      const dead = (await mc.listDeadLetters(id)).map(deadJson);
      if (o.json) return json({ dead });
      if (dead.length === 0) return out('No dead letters.');
      out(table(['EVENT', 'TYPE', 'ACCOUNT', 'ATTEMPTS', 'LAST ERROR', 'DEAD AT'], dead.map((d) => [d.event.id, d.event.type, d.event.account ?? '', String(d.attempts), d.last_error, d.dead_at])));
    });
  });

  common(wh.command('replay').description('deliver a dead letter once more (by the console)').argument('<id>', 'webhook id').argument('<event-id>', 'event id')).action(async (id: string, eventId: string, o: Common) => {
    await withConsole(o, async (mc) => {
      await mc.replayDeadLetter(id, eventId, CLI_ACTOR);
      if (o.json) return json({ webhook_id: id, event_id: eventId, queued: true });
      out(`Queued ${eventId} for delivery to ${id}.`);
    });
  });

  const accounts = group(program, 'accounts', 'accounts');
  common(
    accounts
      .command('alert')
      .description('wallet.low: the balance under which the account gets one event per crossing')
      .argument('<account-id>', 'account id')
      .option('--wallet-low <amount>', 'threshold, e.g. 10.00')
      .option('--no-wallet-low', 'remove the threshold'),
  ).action(async (account: string, o: Common & { walletLow?: string | false }) => {
    if (o.walletLow === undefined) throw new ConsoleError('INVALID_INPUT', 'give --wallet-low AMOUNT or --no-wallet-low');
    const micros = o.walletLow === false ? null : amountArg(o.walletLow, '--wallet-low');
    await withConsole(o, async (mc) => {
      await mc.setWalletLow(account, micros, CLI_ACTOR);
      if (o.json) return json({ account, wallet_low_micros: micros });
      out(micros === null ? `Account ${account}: no wallet-low alert.` : `Account ${account}: wallet.low below ${formatAmount(micros)}.`);
    });
  });
}
