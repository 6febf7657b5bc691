/**
 * A served response is not lost because the price table could not be read when it ended: the
 * sidecar's store was down (here: its redis-server stopped; in CI once, a Cluster connection not yet
 * ready right after start), and the meter reads the prices again until they answer, then books.
 * Real redis-server, real sidecar, an Envoy-faithful ext_proc stream.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { encodePrice } from '../src/schema/prices.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { ExtProcClient } from './helpers/ext-proc-client.ts';
import { startStack, waitFor, type Stack } from './helpers/sidecars.ts';
import { fixture } from './unit/metering-helpers.ts';

const s = schema();
/** openai-chat.json at `openai/*` (see metering-service.test.ts): 1973 micro-units. */
const COST = 1973;
let stack: Stack | undefined;
let kc: KeyConsole | undefined;
let c: ExtProcClient | undefined;

afterAll(async () => {
  c?.close();
  await kc?.close();
  await stack?.close();
});

it('a response that ends while the store is down is booked at its price once the store is back', async () => {
  stack = await startStack({ meterFlushMs: 50, redisTimeoutMs: 300, stalenessBoundMs: 1000, shutdownTimeoutMs: 2000, drainDelayMs: 0 });
  kc = new KeyConsole({ redis: stack.redis.url, revealKey: `k1:${randomBytes(32).toString('base64')}` });
  await stack.db.hset(s.prices(), 'openai/*', encodePrice({ input: 2_500_000, output: 10_000_000, cachedInput: 1_250_000 }));
  const account = `acct-${randomBytes(4).toString('hex')}`;
  const k = await kc.createKey({ account, name: 'metered' });
  await kc.creditAccount(account, 1_000_000, 'c1');
  c = new ExtProcClient(`127.0.0.1:${stack.sidecar.grpcPort}`);
  // The price table was never read by this sidecar: the response's end must read it, and cannot.
  await stack.db.save(); // kept across the stop (dump.rdb in the server's dir, loaded on start)
  await stack.redis.stop();
  await c.exchange({
    path: '/v1/chat/completions',
    requestId: 'during-outage',
    identity: { keyId: k.id, accountId: account },
    responseHeaders: { 'content-type': 'application/json' },
    chunks: [fixture('openai-chat.json')],
  });
  await new Promise((r) => setTimeout(r, 1500)); // several failed reads (300 ms deadline each)
  await stack.redis.start();
  const db = stack.redis.client();
  expect(await db.hget(s.wallet(account), 'balance')).toBe('1000000'); // the data came back
  const balance = async () => Number(await db.hget(s.wallet(account), 'balance'));
  await waitFor(async () => (await balance()) < 1_000_000, 'the booking', 15_000);
  await new Promise((r) => setTimeout(r, 300));
  expect(await balance()).toBe(1_000_000 - COST);
  db.disconnect();
}, 60_000);
