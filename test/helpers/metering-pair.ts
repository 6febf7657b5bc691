/**
 * Two sidecars (h2 and grpc-js transports) on one real Redis with prices for the recorded metering
 * fixtures, and what the metering tests do with them: Envoy-faithful ext_proc clients, accounts with
 * a credited wallet and a key, the balance waited for exactly.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import { KeyConsole } from '../../src/console/service.ts';
import { encodePrice } from '../../src/schema/prices.ts';
import { schema } from '../../src/schema/redis-schema.ts';
import { ExtProcClient } from './ext-proc-client.ts';
import { destroyRedis, startRedis, type RedisServer } from './redis-server.ts';
import { startTestSidecar, waitFor, waitTracking, type TestSidecar } from './sidecars.ts';

export interface MeteringPair {
  readonly redis: RedisServer;
  readonly db: Redis;
  readonly kc: KeyConsole;
  readonly h2: TestSidecar;
  readonly gjs: TestSidecar;
  /** An ext_proc client of `sc` (closed by `close`). */
  client(sc: TestSidecar): ExtProcClient;
  /** A new account credited with `creditMicros`, and a key of it. */
  newAccount(creditMicros: number): Promise<{ account: string; keyId: string; key: string }>;
  balance(account: string): Promise<number>;
  /** Waits until the balance is `want`, then a little more to see that nothing else is booked. */
  expectBalance(account: string, want: number): Promise<void>;
  close(): Promise<void>;
}

export async function startMeteringPair(): Promise<MeteringPair> {
  const s = schema();
  const redis = await startRedis();
  const db = redis.client();
  const kc = new KeyConsole({ redis: redis.url, revealKey: `k1:${randomBytes(32).toString('base64')}` });
  const clients: ExtProcClient[] = [];
  const sidecars: TestSidecar[] = [];
  const close = async () => {
    for (const c of clients) c.close();
    for (const sc of sidecars) await sc.close();
    await kc.close();
    await destroyRedis(redis);
  };
  try {
    await db.hset(
      s.prices(),
      'openai/*',
      encodePrice({ input: 2_500_000, output: 10_000_000, cachedInput: 1_250_000 }),
      'anthropic/*',
      encodePrice({ input: 3_000_000, output: 15_000_000, cachedInput: 300_000, cacheWrite: 3_750_000 }),
    );
    const base = { meterFlushMs: 50, stalenessBoundMs: 2000 };
    const h2 = await startTestSidecar(redis.url, { ...base, grpcTransport: 'h2' });
    sidecars.push(h2);
    const gjs = await startTestSidecar(redis.url, { ...base, grpcTransport: 'grpc-js' });
    sidecars.push(gjs);
    await waitTracking(h2, gjs);
    const balance = async (account: string) => Number(await db.hget(s.wallet(account), 'balance'));
    return {
      redis,
      db,
      kc,
      h2,
      gjs,
      client(sc) {
        const c = new ExtProcClient(`127.0.0.1:${sc.sidecar.grpcPort}`);
        clients.push(c);
        return c;
      },
      async newAccount(creditMicros) {
        const account = `acct-${randomBytes(5).toString('hex')}`;
        const k = await kc.createKey({ account, name: 'metered' });
        await kc.creditAccount(account, creditMicros, `c-${randomBytes(4).toString('hex')}`);
        return { account, keyId: k.id, key: k.key };
      },
      balance,
      async expectBalance(account, want) {
        await waitFor(async () => (await balance(account)) <= want, `balance ${want}`, 10_000);
        await new Promise((r) => setTimeout(r, 300));
        expect(await balance(account)).toBe(want);
      },
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}
