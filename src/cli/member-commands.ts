/**
 * CLI commands of members (who signs in on the page with SSO, and their role; src/console/members.ts):
 *   members add ACCOUNT (--email E | --subject S) --role owner|developer|viewer [--json]
 *   members list ACCOUNT [--json]
 *   members update ACCOUNT MEMBER_ID --role R [--json]
 *   members remove ACCOUNT MEMBER_ID [--json]
 * Every change is audited with actor `cli`.
 */
import { Option, type Command } from 'commander';
import { ConsoleError } from '../console/errors.ts';
import { CLI_ACTOR } from '../console/management.ts';
import { memberJson, ROLES, type MemberRecord } from '../console/members.ts';
import { common, json, out, table, withConsole, type Common } from './console-commands.ts';

const roleOption = () => new Option('--role <role>', 'owner, developer or viewer').choices(ROLES).makeOptionMandatory();
const who = (m: MemberRecord) => (m.email !== null ? `email ${m.email}` : `subject ${m.subject}`);

export function registerMemberCommands(program: Command): void {
  const members = program.command('members').description("the people who sign in on an account's page with SSO, and their roles").showSuggestionAfterError(false);

  common(
    members
      .command('add')
      .description('add a member by email (matched only when the identity provider verified it) or by subject (the ID token `sub`)')
      .argument('<account>', 'account id')
      .addOption(new Option('--email <email>', "the person's email").conflicts('subject'))
      .addOption(new Option('--subject <sub>', "the person's subject at the identity provider").conflicts('email'))
      .addOption(roleOption()),
  ).action(async (account: string, o: Common & { email?: string; subject?: string; role: string }) => {
    if (o.email === undefined && o.subject === undefined) throw new ConsoleError('INVALID_INPUT', 'give --email E or --subject S');
    await withConsole(o, async (mc) => {
      const m = await mc.members.add(account, { email: o.email ?? null, subject: o.subject ?? null }, o.role, CLI_ACTOR);
      if (o.json) return json(memberJson(m));
      out(`Added member ${m.id} (${who(m)}) to ${m.account} as ${m.role}.`);
    });
  });

  common(members.command('list').description("an account's members").argument('<account>', 'account id')).action(async (account: string, o: Common) => {
    await withConsole(o, async (mc) => {
      const list = await mc.members.list(account);
      if (o.json) return json({ members: list.map(memberJson) });
      if (list.length === 0) return out(`No members in ${account}.`);
      out(table(['ID', 'EMAIL', 'SUBJECT', 'ROLE', 'SOURCE'], list.map((m) => [m.id, m.email ?? '', m.subject ?? '', m.role, m.source])));
    });
  });

  common(members.command('update').description("change a member's role").argument('<account>', 'account id').argument('<member-id>', 'member id (mem_…)').addOption(roleOption())).action(
    async (account: string, id: string, o: Common & { role: string }) => {
      await withConsole(o, async (mc) => {
        const m = await mc.members.update(account, id, o.role, CLI_ACTOR);
        if (o.json) return json(memberJson(m));
        out(`Member ${m.id} (${who(m)}) of ${m.account} is now ${m.role}.`);
      });
    },
  );

  common(members.command('remove').description('remove a member (their sessions end at their next request)').argument('<account>', 'account id').argument('<member-id>', 'member id (mem_…)')).action(
    async (account: string, id: string, o: Common) => {
      await withConsole(o, async (mc) => {
        const m = await mc.members.remove(account, id, CLI_ACTOR);
        if (o.json) return json({ ...memberJson(m), removed: true });
        out(`Removed member ${m.id} (${who(m)}) from ${m.account}.`);
      });
    },
  );
}
