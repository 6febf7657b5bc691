import { windowOf } from '../../src/core/rate.ts';
import type { RateUnit } from '../../src/schema/rates.ts';

/**
 * Waits past the end of the current UTC `per` window when less than `marginMs` of it is left, so
 * what a test counts stays inside one window.
 */
export async function awayFromWindowEnd(per: RateUnit, marginMs = 30_000): Promise<void> {
  const left = windowOf(per, Date.now()).end - Date.now();
  if (left < marginMs) await new Promise((r) => setTimeout(r, left + 1_000));
}

/** Waits until `offsetMs` into the next UTC second; → that second (epoch seconds). */
export async function nextSecond(offsetMs = 20): Promise<number> {
  await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + offsetMs));
  return Math.floor(Date.now() / 1000);
}
