/** The roles claim (KEYGATE_OIDC_ROLES_CLAIM): which entries add a membership, and that anything else is ignored. */
import { describe, expect, it } from 'vitest';
import { rolesFromClaim } from '../../src/console-web/oidc.ts';

describe('rolesFromClaim', () => {
  it('reads account:role entries from a list or a string (the role after the last colon: account ids may hold colons)', () => {
    expect(rolesFromClaim(['acct-1:owner', 'acct.2:viewer', 'team:a:developer'])).toEqual([
      { account: 'acct-1', role: 'owner' },
      { account: 'acct.2', role: 'viewer' },
      { account: 'team:a', role: 'developer' },
    ]);
    expect(rolesFromClaim('acct-1:developer, acct-2:viewer')).toEqual([
      { account: 'acct-1', role: 'developer' },
      { account: 'acct-2', role: 'viewer' },
    ]);
  });

  it('ignores what is not an entry: other roles, bad account ids, non-strings, other shapes', () => {
    expect(rolesFromClaim(['acct-1:admin', ':owner', 'acct 1:owner', '-acct:owner', 'acct-1', 42, null, { account: 'a' }])).toEqual([]);
    expect(rolesFromClaim(undefined)).toEqual([]);
    expect(rolesFromClaim({ 'acct-1': 'owner' })).toEqual([]);
  });

  it('reads at most 100 entries', () => {
    expect(rolesFromClaim(Array.from({ length: 500 }, (_, i) => `a${i}:viewer`))).toHaveLength(100);
  });
});
