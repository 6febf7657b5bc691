/** 4. The key's expiry, inclusive of its instant, on the injected clock (pure). */
import { expiryDeny } from '../../core/decision.ts';
import type { Phase } from '../phase.ts';

export const expiry: Phase = {
  name: 'expiry',
  run: (d) => expiryDeny(d.grant!, d.env.now()),
};
