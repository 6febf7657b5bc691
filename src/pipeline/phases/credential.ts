/** 1. Which key the headers carry: none, two, or a non-Bearer scheme are denied here (pure). */
import { credentialDeny } from '../../core/decision.ts';
import type { Phase } from '../phase.ts';

export const credential: Phase = {
  name: 'credential',
  run: (d) => credentialDeny(d.credential),
};
