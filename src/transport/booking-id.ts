/**
 * Minting booking ids (`src/core/booking-id.ts`) on the Check's allow: 128 bits from the CSPRNG
 * each, drawn 4 KiB at a time (one `randomFillSync` per 256 ids), written as hex straight into the
 * bytes of the answer (`writeBookingId`) or as a string (`nextBookingId`). No id is ever drawn
 * twice from the pool: each 16-byte slice is used once, then the pool is refilled.
 */
import { randomFillSync } from 'node:crypto';
import { BOOKING_ID_HEX, BOOKING_ID_PREFIX } from '../core/booking-id.ts';

const POOL_BYTES = 4096;
const ID_BYTES = BOOKING_ID_HEX / 2;
const pool = Buffer.allocUnsafeSlow(POOL_BYTES);
let at = POOL_BYTES;
const HEX = Buffer.from('0123456789abcdef', 'latin1');

function take(): number {
  if (at + ID_BYTES > POOL_BYTES) {
    randomFillSync(pool);
    at = 0;
  }
  const start = at;
  at += ID_BYTES;
  return start;
}

/** Writes a fresh id's 32 hex digits (not the prefix) into `out` at `offset`. */
export function writeBookingHex(out: Buffer, offset: number): void {
  const s = take();
  for (let i = 0; i < ID_BYTES; i++) {
    const b = pool[s + i]!;
    out[offset + 2 * i] = HEX[b >> 4]!;
    out[offset + 2 * i + 1] = HEX[b & 15]!;
  }
}

/** A fresh booking id, `kb:` + 32 hex digits. */
export function nextBookingId(): string {
  const s = take();
  return BOOKING_ID_PREFIX + pool.toString('hex', s, s + ID_BYTES);
}

/** The id written into kept answers before it is replaced per request (same length as every id). */
export const PLACEHOLDER_BOOKING_ID = BOOKING_ID_PREFIX + '0'.repeat(BOOKING_ID_HEX);
