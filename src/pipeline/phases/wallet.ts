/** 6. The account's prepaid wallet: empty (or none, with `KEYGATE_REQUIRE_WALLET`) is INSUFFICIENT_BALANCE; a corrupt gate 503 (pure). */
import { walletDeny } from '../../core/money.ts';
import type { Phase } from '../phase.ts';

export const wallet: Phase = {
  name: 'wallet',
  run: (d) => walletDeny(d.gate!, d.grant!.id, d.env.requireWallet),
};
