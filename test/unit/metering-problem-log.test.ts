import { describe, expect, it } from 'vitest';
import { ProblemLog } from '../../src/metering/problem-log.ts';
import { FakeClock } from './fake-clock.ts';

describe('ProblemLog (bounded warnings for responses read with a problem)', () => {
  it('tells at most perWindow a window, holds the rest, and says how many at the next window', () => {
    const clock = new FakeClock(1_000_000);
    const p = new ProblemLog({ perWindow: 3, windowMs: 1000, clock });
    expect([p.take(), p.take(), p.take()].map((x) => x.tell)).toEqual([true, true, true]);
    for (let i = 0; i < 500; i++) expect(p.take()).toEqual({ tell: false, held: 0 });
    clock.tick(999); // one tick before the window ends: still held
    expect(p.take()).toEqual({ tell: false, held: 0 });
    clock.tick(1); // at the window's end: a new window, told, with the 501 held before
    expect(p.take()).toEqual({ tell: true, held: 501 });
    expect(p.take()).toEqual({ tell: true, held: 0 });
    clock.tick(5000); // a quiet stretch: nothing held
    expect(p.take()).toEqual({ tell: true, held: 0 });
  });
});
