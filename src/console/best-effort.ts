/**
 * The parts of a console write that are not its own records (docs/operations.md, "Redis Cluster with
 * a master down"). On a Redis Cluster the records of one write live in several slots; a write
 * succeeds when its own records are written (a revoke: the key record; a create: the key record,
 * its id index, the account's key sets and money records), and these parts follow it, best-effort:
 *
 *   - the audit entry (`{mgmt}` lists), written after the change on Cluster;
 *   - the event (`events:{account}` stream, listed in `{wh}:eventaccts`) and the key's expiry
 *     tracking (`{wh}:expiries`);
 *   - the account's key list index (`keyorder`/`keycur`/`keyinfo`, rebuilt from the records when
 *     incomplete) and, on a revoke, the account's active-key set (healed on the next list);
 *   - the creator of a key a person created or rolled on the page (`{mgmt}` `keyby`; without it only
 *     an owner manages the key).
 *
 * A part that cannot be written does not turn a done write into a failure: its name is added to the
 * write's `unfinished` list, which the library returns, the CLI prints as a warning and the API sends
 * as the `keygate-unfinished` header. The wake-up of the delivery worker (`{wh}:due`) is not even
 * reported: a lost wake-up is made good by the worker's sweep.
 */

/** Names of best-effort parts that could not be written (empty: the write is whole). */
export type Unfinished = string[];

/** Runs one best-effort part; a failure adds `part` to `unfinished` instead of failing the write. */
export async function bestEffort(unfinished: Unfinished, part: string, step: () => Promise<unknown>): Promise<void> {
  try {
    await step();
  } catch {
    unfinished.push(part);
  }
}

/** `{ unfinished }` when something was left undone, else nothing (results stay as they were when whole). */
export function reportUnfinished(unfinished: Unfinished): { readonly unfinished?: readonly string[] } {
  return unfinished.length > 0 ? { unfinished: [...unfinished] } : {};
}

/** The API's response header naming the unfinished parts, comma-separated. */
export const UNFINISHED_HEADER = 'keygate-unfinished';

/** The CLI's warning line (stderr) for a write done with parts left unfinished; null when whole. */
export function unfinishedWarning(what: string, unfinished: readonly string[] | undefined): string | null {
  if (unfinished === undefined || unfinished.length === 0) return null;
  return `keygate: warning: ${what}, but could not write ${unfinished.join(', ')} (their Redis Cluster slots are unreachable; see docs/operations.md)`;
}
