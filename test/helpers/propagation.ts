/** Propagation checks shared by the tests of every change a console can make (keys, accounts, wallets). */
import { expect } from 'vitest';
import type { EnvoyRequest } from './envoy-client.ts';
import { outcomeOf, waitFor, type TestSidecar } from './sidecars.ts';

/**
 * Fires checks continuously (4 in flight per sidecar) while `mutate` runs; every check sent after
 * `mutate` resolved must answer `expected`, and so must the first one sent right after.
 */
export async function changeSeenAtOnce(sidecars: TestSidecar[], req: EnvoyRequest, mutate: () => Promise<unknown>, expected: string): Promise<void> {
  let after = false;
  let stop = false;
  const violations: string[] = [];
  const seenAfter = sidecars.map(() => 0);
  const loops = sidecars.flatMap((sc, i) =>
    Array.from({ length: 4 }, async () => {
      while (!stop) {
        const sentAfter = after;
        const got = outcomeOf(await sc.client.check(req));
        if (sentAfter) {
          seenAfter[i]!++;
          if (got !== expected) violations.push(`sidecar ${i}: ${got}`);
        }
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 5));
  await mutate();
  after = true;
  const next = await Promise.all(sidecars.map((sc) => sc.client.check(req)));
  await waitFor(() => seenAfter.every((n) => n >= 4), 'checks after the change');
  stop = true;
  await Promise.all(loops);
  expect(next.map(outcomeOf)).toEqual(sidecars.map(() => expected));
  expect(violations).toEqual([]);
}
