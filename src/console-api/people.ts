/**
 * The web page's view of members (src/console/members.ts), for sign-in with SSO: a person's role in
 * an account, their accounts, and the memberships their roles claim adds (audited as the person).
 */
import type { ConsoleService } from '../console/service.ts';
import type { PeopleDirectory } from '../console-web/oidc.ts';
import type { SessionUser } from '../console-web/sessions.ts';

const person = (u: SessionUser) => ({ iss: u.iss, sub: u.sub, email: u.email, emailVerified: u.emailVerified });

export function peopleOf(mc: ConsoleService): PeopleDirectory {
  return {
    roleOf: (account, u) => mc.members.roleOf(account, person(u)),
    accountsOf: (u) => mc.members.accountsOf(person(u)),
    applyClaim: (u, entries) => mc.members.applyClaim(person(u), entries, { type: 'user', id: u.sub, name: u.name }),
  };
}
