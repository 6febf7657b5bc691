/**
 * 3. The key record by the SHA-256 digest of the key: unknown, revoked or corrupt is an invalid key.
 * Sets `grant`. The record is read first by a decision, so even a cached answer waits for the
 * I/O callbacks pending in this turn (`KEY_RECORD.afterPendingIo`): the one wait of a warm key
 * (a promise only when the lookup returns one; no async function around it).
 */
import { keyRecordDeny } from '../../core/decision.ts';
import { keyDigest } from '../../core/key-format.ts';
import { KEY_RECORD } from '../../schema/records.ts';
import type { ParsedKey } from '../../schema/redis-schema.ts';
import { isPending } from '../../store/record-source.ts';
import type { DecisionState, Phase, PhaseAnswer } from '../phase.ts';

export const key: Phase = {
  name: 'key',
  run: (d) => {
    const parsed = d.env.records.lookup(KEY_RECORD, keyDigest(d.key));
    return isPending(parsed) ? parsed.then((p) => found(d, p)) : found(d, parsed);
  },
};

function found(d: DecisionState, parsed: ParsedKey): PhaseAnswer {
  if (parsed.kind === 'grant') d.grant = parsed.grant;
  return keyRecordDeny(parsed);
}
