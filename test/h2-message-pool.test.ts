/** The h2 server's reused message buffers: joins are exact, a lent buffer is not lent again before it is given back, the pool is bounded. */
import { describe, expect, it } from 'vitest';
import { MessagePool } from '../src/transport/h2/message-pool.ts';

const chunks = (sizes: number[], seed: number) => sizes.map((n, k) => Buffer.alloc(n, (seed + k) & 0xff));

describe('MessagePool', () => {
  it('joins chunks exactly, small and huge messages as a fresh buffer (no lease)', () => {
    const pool = new MessagePool();
    for (const sizes of [[3, 4], [16 * 1024, 1], [40_000, 30_000, 5], [5 * 1024 * 1024, 1]]) {
      const c = chunks(sizes, 7);
      const total = sizes.reduce((a, b) => a + b, 0);
      const { buf, lease } = pool.join(c, total);
      expect(buf.equals(Buffer.concat(c))).toBe(true);
      expect(lease === undefined).toBe(total < 16 * 1024 || total > 4 * 1024 * 1024);
      pool.release(lease);
    }
  });

  it('lends a buffer once until it is given back, then reuses it', () => {
    const pool = new MessagePool();
    const a = pool.join(chunks([20_000, 20_000], 1), 40_000);
    const b = pool.join(chunks([20_000, 20_000], 2), 40_000);
    expect(a.lease).not.toBe(b.lease);
    expect(a.buf.equals(Buffer.concat(chunks([20_000, 20_000], 1)))).toBe(true);
    pool.release(a.lease);
    const c = pool.join(chunks([30_000, 10_000], 3), 40_000);
    expect(c.lease).toBe(a.lease);
    expect(b.buf.equals(Buffer.concat(chunks([20_000, 20_000], 2)))).toBe(true);
  });

  it('keeps at most its budget of free buffers', () => {
    const pool = new MessagePool(128 * 1024);
    const leases = Array.from({ length: 5 }, (_, k) => pool.join(chunks([40_000, 10_000], k), 50_000).lease);
    for (const l of leases) pool.release(l);
    // two 64 KiB buffers fit the 128 KiB budget: the third join allocates
    const again = Array.from({ length: 3 }, (_, k) => pool.join(chunks([40_000, 10_000], k), 50_000).lease);
    expect(leases.filter((l) => again.includes(l))).toHaveLength(2);
  });
});
