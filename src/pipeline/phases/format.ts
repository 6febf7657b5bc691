/** 2. Prefix, length, alphabet, checksum: a malformed key is denied without a store read (pure). */
import { deny } from '../../core/decision.ts';
import { isWellFormedKey } from '../../core/key-format.ts';
import type { Phase } from '../phase.ts';

export const format: Phase = {
  name: 'format',
  run: (d) => (isWellFormedKey(d.key, d.env.keyPrefix) ? null : deny('INVALID_API_KEY')),
};
