import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { Booker, type PricedBooking } from '../../src/metering/booker.ts';
import type { Booking } from '../../src/metering/session.ts';

describe('Booker.close', () => {
  it('writes what is pending, then runs onClosed once (the wiring lets go of its Redis connection there)', async () => {
    const order: string[] = [];
    const booker = new Booker(
      async (batch) => {
        order.push(`write ${batch.length}`);
        return batch.map(() => 'booked' as const);
      },
      pino({ level: 'silent' }),
      { booked: () => order.push('booked'), unbooked: () => order.push('unbooked'), flushFailed: () => order.push('failed') },
      { intervalMs: 60_000, onClosed: () => order.push('closed') },
    );
    const p: PricedBooking = { booking: { request_id: 'r1' } as unknown as Booking, amountMicros: 5, unpriced: false, endedAt: Date.now() };
    booker.add(p);
    await booker.close(Date.now() + 1000);
    expect(order).toEqual(['write 1', 'booked', 'closed']);
  });
});
