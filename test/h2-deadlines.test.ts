/** The h2 server's deadlines on one timer: due calls fire on time, finished ones never, in any order; the queue stays bounded. */
import { describe, expect, it } from 'vitest';
import { Deadlines } from '../src/transport/grpc/deadlines.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Deadlines', () => {
  it('fires the calls that are due, in time order, and not the finished ones', async () => {
    const dl = new Deadlines();
    const fired: string[] = [];
    const t0 = performance.now();
    const at: Record<string, number> = {};
    const add = (name: string, ms: number) => dl.add(ms, () => ((at[name] = performance.now() - t0), fired.push(name)));
    add('c', 120);
    const b = add('b', 60);
    add('a', 30); // earlier than the armed timer: re-armed
    add('d', 120);
    dl.finish(b);
    await sleep(400);
    expect(fired).toEqual(['a', 'c', 'd']);
    expect(at.a).toBeGreaterThanOrEqual(29);
    expect(at.c).toBeGreaterThanOrEqual(119);
    expect(dl.size).toBe(0);
  });

  it('a finished deadline never fires, and finishing twice is harmless', async () => {
    const dl = new Deadlines();
    let fired = 0;
    const d = dl.add(20, () => fired++);
    dl.finish(d);
    dl.finish(d);
    await sleep(80);
    expect(fired).toBe(0);
  });

  it('stays bounded when calls finish long before their deadline', () => {
    const dl = new Deadlines();
    for (let i = 0; i < 100_000; i++) dl.finish(dl.add(250, () => {}));
    expect(dl.size).toBeLessThanOrEqual(2 * 1024 + 2);
  });

  it('keeps firing the others when one answer throws', async () => {
    const dl = new Deadlines();
    let fired = 0;
    dl.add(10, () => {
      throw new Error('boom');
    });
    dl.add(10, () => fired++);
    await sleep(80);
    expect(fired).toBe(1);
  });
});
