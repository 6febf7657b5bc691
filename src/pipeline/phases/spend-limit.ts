/** 7. The key's spend limit: blocked until the end of the period it was reached in, on the injected clock (pure). */
import { spendLimitDeny } from '../../core/money.ts';
import type { Phase } from '../phase.ts';

export const spendLimit: Phase = {
  name: 'spend-limit',
  // `wallet` has denied a corrupt gate already.
  run: (d) => spendLimitDeny(d.gate as Exclude<typeof d.gate, 'corrupt' | null>, d.grant!.id, d.env.now()),
};
