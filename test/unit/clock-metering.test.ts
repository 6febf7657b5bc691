/**
 * The metering bounds on a fake clock, each at its edge (one tick before, at): the booker's batch
 * closes at its size or its delay and its close retries until the deadline; the meter ends a stream
 * at its lifetime bound, reads an unavailable price table again on its schedule, and its close
 * drains the booker until the deadline. The booker's write is a plain function (no Redis).
 */
import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Booker, type PricedBooking } from '../../src/metering/booker.ts';
import { Meter } from '../../src/metering/meter.ts';
import { PriceTable } from '../../src/schema/prices.ts';
import type { Booking } from '../../src/metering/session.ts';
import { MeteringMetrics } from '../../src/metering/metrics.ts';
import { FakeClock } from './fake-clock.ts';
import { fixture, meterOptions, run } from './metering-helpers.ts';

const silent = pino({ level: 'silent' });
let n = 0;
const priced = (clock: FakeClock): PricedBooking => ({ booking: { request_id: `r${++n}` } as unknown as Booking, amountMicros: 5, unpriced: false, endedAt: clock.now() });

/** A booker on `clock` whose writes are recorded (at their instant) and answered by `answer`. */
function bookerOn(clock: FakeClock, opts: { intervalMs?: number; maxBatch?: number } = {}, answer: () => 'ok' | 'fail' = () => 'ok') {
  const writes: Array<{ at: number; size: number }> = [];
  const unbooked: string[] = [];
  const booker = new Booker(
    async (batch) => {
      writes.push({ at: clock.now(), size: batch.length });
      if (answer() === 'fail') throw new Error('connection lost');
      return batch.map(() => 'booked' as const);
    },
    silent,
    { booked: () => {}, unbooked: (_p, reason) => unbooked.push(reason), flushFailed: () => {} },
    { ...opts, clock },
  );
  return { booker, writes, unbooked };
}

describe('booker batching on the clock', () => {
  it('a batch closes at its delay: written one tick after the delay less one, not before', async () => {
    const clock = new FakeClock(1_000_000);
    const { booker, writes } = bookerOn(clock, { intervalMs: 250, maxBatch: 10 });
    booker.add(priced(clock));
    await clock.tickAsync(100);
    booker.add(priced(clock)); // joins the batch: the delay runs from the first booking
    await clock.tickAsync(149); // 249 ms
    expect(writes).toEqual([]);
    await clock.tickAsync(1); // 250 ms
    expect(writes).toEqual([{ at: 1_000_250, size: 2 }]);
    expect(booker.pending).toBe(0);
    expect(clock.pending).toBe(0); // nothing queued: no timer left
  });

  it('a batch closes at its size at once, without waiting for the delay', async () => {
    const clock = new FakeClock(0);
    const { booker, writes } = bookerOn(clock, { intervalMs: 250, maxBatch: 3 });
    booker.add(priced(clock));
    booker.add(priced(clock));
    await clock.tickAsync(0);
    expect(writes).toEqual([]);
    booker.add(priced(clock)); // the third: the batch is full
    await clock.tickAsync(0);
    expect(writes).toEqual([{ at: 0, size: 3 }]);
    await clock.tickAsync(1000);
    expect(writes).toHaveLength(1);
  });

  it('a failed batch is kept and written at the next delay', async () => {
    const clock = new FakeClock(0);
    let fail = true;
    const { booker, writes } = bookerOn(clock, { intervalMs: 250 }, () => (fail ? 'fail' : 'ok'));
    booker.add(priced(clock));
    await clock.tickAsync(250);
    expect(writes).toEqual([{ at: 250, size: 1 }]);
    fail = false;
    await clock.tickAsync(249);
    expect(writes).toHaveLength(1);
    await clock.tickAsync(1);
    expect(writes).toEqual([{ at: 250, size: 1 }, { at: 500, size: 1 }]);
    expect(booker.pending).toBe(0);
  });

  it('close retries every 100 ms until the deadline, then counts what is left as lost', async () => {
    const clock = new FakeClock(0);
    const { booker, writes, unbooked } = bookerOn(clock, { intervalMs: 60_000 }, () => 'fail');
    booker.add(priced(clock));
    let closed = false;
    void booker.close(350).then(() => (closed = true));
    await clock.tickAsync(349);
    expect(writes.map((w) => w.at)).toEqual([0, 100, 200, 300]);
    expect(closed).toBe(false);
    await clock.tickAsync(1); // at the deadline: the last try, then lost
    expect(writes.map((w) => w.at)).toEqual([0, 100, 200, 300, 350]);
    expect(closed).toBe(true);
    expect(unbooked).toEqual(['lost']);
  });
});

function meterOn(clock: FakeClock, o: { maxStreamMs?: number; prices?: () => PriceTable | Promise<PriceTable>; answer?: () => 'ok' | 'fail' } = {}) {
  const b = bookerOn(clock, { intervalMs: 250 }, o.answer);
  const metrics = new MeteringMetrics(new Registry(), () => 0, () => 0);
  const meter = new Meter({
    booker: b.booker,
    prices: o.prices ?? (() => new PriceTable()),
    metrics,
    log: silent,
    options: meterOptions(),
    limits: { maxStreams: 10, maxStreamMs: o.maxStreamMs ?? 60_000 },
    clock,
  });
  return { meter, ...b };
}

/** A real outcome with a booking (a chat completion read by a session). */
async function bookingOutcome() {
  const { outcome } = await run({ path: '/v1/chat/completions', contentType: 'application/json', chunks: [fixture('openai-chat.json')] });
  expect(outcome.kind).toBe('booking');
  return outcome;
}

describe('meter bounds on the clock', () => {
  it('a stream is ended at its lifetime bound, not a tick before', async () => {
    const clock = new FakeClock(0);
    const { meter } = meterOn(clock, { maxStreamMs: 1000 });
    const s = meter.open()!;
    let expired = 0;
    s.onExpire = () => expired++;
    clock.tick(999);
    expect([meter.openStreams, expired]).toEqual([1, 0]);
    clock.tick(1);
    expect([meter.openStreams, expired]).toEqual([0, 1]);
    clock.tick(10_000);
    expect(expired).toBe(1);
  });

  it('a stream ended before its bound leaves no timer', () => {
    const clock = new FakeClock(0);
    const { meter } = meterOn(clock, { maxStreamMs: 1000 });
    const before = clock.pending;
    meter.open()!.end();
    expect(clock.pending).toBe(before);
  });

  it('an unavailable price table is read again after 100 ms, doubling to 2 s; the booking is then flushed at the batch delay', async () => {
    const clock = new FakeClock(0);
    const reads: number[] = [];
    const { meter, writes } = meterOn(clock, {
      prices: () => {
        reads.push(clock.now());
        if (reads.length < 8) throw new Error('store unavailable');
        return new PriceTable();
      },
    });
    meter.settle(meter.open() as never, Promise.resolve(await bookingOutcome()));
    await clock.tickAsync(7099);
    expect(reads).toEqual([0, 100, 300, 700, 1500, 3100, 5100]);
    await clock.tickAsync(1); // 2 s after 5100: the eighth read answers
    expect(reads).toHaveLength(8);
    expect(writes).toEqual([]);
    await clock.tickAsync(250); // the booker's delay from the booking's arrival
    expect(writes).toEqual([{ at: 7350, size: 1 }]);
  });

  it('close ends the open streams and drains the booker until the deadline, not after it', async () => {
    const clock = new FakeClock(0);
    const { meter, booker, writes, unbooked } = meterOn(clock, { answer: () => 'fail' });
    const s = meter.open()!;
    let expired = 0;
    s.onExpire = () => expired++;
    booker.add(priced(clock));
    let closed = false;
    void meter.close(500).then(() => (closed = true));
    await clock.tickAsync(0);
    expect([meter.openStreams, expired]).toEqual([0, 1]);
    expect(meter.open()).toBeNull(); // refused once closing
    await clock.tickAsync(499);
    expect(closed).toBe(false);
    expect(writes.map((w) => w.at)).toEqual([0, 100, 200, 300, 400]);
    await clock.tickAsync(1);
    expect(closed).toBe(true);
    expect(writes.at(-1)!.at).toBe(500);
    expect(unbooked).toEqual(['lost']);
  });

  it('close waits for responses still being priced only until the deadline', async () => {
    const clock = new FakeClock(0);
    const { meter } = meterOn(clock, { prices: () => new Promise<PriceTable>(() => {}) }); // a read that never answers
    meter.settle(meter.open() as never, Promise.resolve(await bookingOutcome()));
    let closed = false;
    void meter.close(500).then(() => (closed = true));
    await clock.tickAsync(499);
    expect(closed).toBe(false);
    await clock.tickAsync(1);
    expect(closed).toBe(true);
  });
});
