/**
 * 5. The account: a disabled account is USER_BLOCKED, a corrupt record 503. Reads the account's two
 * records together — its state and its gate (for `wallet` and `spend-limit`) — both from memory
 * without an await, or both at once (one round trip when cold; the gate's failure is observed even
 * when the account decides first). Sets `blocked`, `accountRates`, `accountCredentials`, `billing` and `gate`.
 */
import { accountDeny } from '../../core/decision.ts';
import { ACCOUNT_RECORD, GATE_RECORD, type AccountState, type RateGate } from '../../schema/records.ts';
import { isPending } from '../../store/record-source.ts';
import type { DecisionState, Phase, PhaseAnswer } from '../phase.ts';

export const account: Phase = {
  name: 'account',
  run: (d) => {
    const id = d.grant!.account;
    const state = d.env.records.lookup(ACCOUNT_RECORD, id);
    const gate = d.env.records.lookup(GATE_RECORD, id);
    if (isPending(state) || isPending(gate)) return fetched(d, state, gate);
    d.blocked = state.blocked;
    d.accountRates = state.rates;
    d.accountCredentials = state.credentials;
    d.billing = state.billing;
    d.gate = gate;
    return accountDeny(state.blocked, d.grant!.id);
  },
};

async function fetched(d: DecisionState, state: Promise<AccountState> | AccountState, gate: Promise<RateGate | 'corrupt'> | RateGate | 'corrupt'): Promise<PhaseAnswer> {
  if (isPending(gate)) gate.catch(noop);
  const st = await state;
  d.blocked = st.blocked;
  d.accountRates = st.rates;
  d.accountCredentials = st.credentials;
  d.billing = st.billing;
  const a = accountDeny(d.blocked, d.grant!.id);
  if (a) return a;
  d.gate = await gate;
  return null;
}

function noop(): void {}
