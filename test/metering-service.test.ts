/**
 * Metering end to end over real sockets and a real Redis: Envoy-faithful ext_proc streams (the
 * recorded fixtures, in chunks) into two sidecars (h2 and grpc-js transports), priced from the
 * price table in Redis, booked by the usage-record script: the wallet debited by exactly the
 * priced amount, idempotent across sidecars, 200 concurrent streams exact, a wallet driven to zero
 * refused at the other sidecar, shutdown draining pending bookings, hostile streams harmless.
 */
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Booker } from '../src/metering/booker.ts';
import { MeterSession } from '../src/metering/session.ts';
import type { ProcessingRequest } from '../src/metering/messages.ts';
import { encodePrice } from '../src/schema/prices.ts';
import { parseTokenCounters, parseUsageEntry } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { SET_TOKEN_RATE } from '../src/schema/rate-scripts.ts';
import { rateKeys } from '../src/schema/rates.ts';
import { ExtProcClient, type MeteredExchange } from './helpers/ext-proc-client.ts';
import { startMeteringPair, type MeteringPair } from './helpers/metering-pair.ts';
import type { RedisServer } from './helpers/redis-server.ts';
import { chatRequest, outcomeOf, startTestSidecar, waitFor, type TestSidecar } from './helpers/sidecars.ts';
import { fixture } from './unit/metering-helpers.ts';

const s = schema();
let pair: MeteringPair | undefined;
let redis: RedisServer | undefined;
let db: Redis;
let h2: TestSidecar | undefined;
let gjs: TestSidecar | undefined;

/** openai-chat.json at `openai/*`: (93 × 2.5 + 1024 × 1.25 + 46 × 10) = 1972.5 → 1973 micro-units. */
const OPENAI_CHAT_COST = 1973;
/** anthropic-messages-stream.sse at `anthropic/*`: 472 × 3 + 2048 × 0.3 + 15 × 15 = 2255.4 → 2256. */
const ANTHROPIC_STREAM_COST = 2256;

beforeAll(async () => {
  pair = await startMeteringPair();
  ({ redis, db, h2, gjs } = pair);
}, 60_000);

afterAll(async () => {
  await pair?.close();
});

const client = (sc: TestSidecar) => pair!.client(sc);
const newAccount = (creditMicros: number) => pair!.newAccount(creditMicros);
const balance = (account: string) => pair!.balance(account);
const expectBalance = (account: string, want: number) => pair!.expectBalance(account, want);

const split = (b: Buffer, size: number) => {
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += size) out.push(b.subarray(i, i + size));
  return out;
};

const openaiChat = (id: { keyId: string; accountId: string }, requestId: string, over: Partial<MeteredExchange> = {}): MeteredExchange => ({
  path: '/v1/chat/completions',
  requestId,
  identity: id,
  requestBody: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
  responseHeaders: { 'content-type': 'application/json' },
  chunks: split(fixture('openai-chat.json'), 97),
  ...over,
});

describe.each([
  ['h2', () => h2!],
  ['grpc-js', () => gjs!],
])('ext_proc Process on the %s transport', (_name, sc) => {
  it('answers every message, ends OK, and books exactly the priced amount with tokens', async () => {
    const a = await newAccount(1_000_000);
    const r = await client(sc()).exchange(openaiChat({ keyId: a.keyId, accountId: a.account }, `r-${randomBytes(4).toString('hex')}`));
    expect(r.code).toBe(0);
    expect(r.answers.length).toBe(r.sent);
    // nothing in any answer changes the response
    for (const m of r.answers) expect(JSON.stringify(m)).not.toMatch(/mutation|immediate_response/);
    await expectBalance(a.account, 1_000_000 - OPENAI_CHAT_COST);
    const [id, flat] = ((await db.xrange(s.usageLog(a.account), "-", "+")) as [string, string[]][])[0]!;
    const e = parseUsageEntry(a.account, id!, flat!);
    expect(e).toMatchObject({ keyId: a.keyId, amountMicros: OPENAI_CHAT_COST, model: 'gpt-4o-2024-08-06', inputTokens: 1117, outputTokens: 46, cachedInputTokens: 1024, reasoningTokens: 12, source: 'meter', estimated: false, unpriced: false });
    const t = parseTokenCounters(await db.hgetall(s.tokens(a.account, a.keyId)), Date.now());
    expect(t).toEqual({ today: { input: 1117, output: 46 }, month: { input: 1117, output: 46 } });
    expect(parseTokenCounters(await db.hgetall(s.tokens(a.account)), Date.now())).toEqual(t);
    // the first booking of a sidecar is written by its first flush (the lazily opened connection queues it)
    // (every failure kind is exported from the start at 0, for the alerts: a flush failure is a non-zero count)
    expect(await sc().sidecar.metrics.registry.getSingleMetricAsString('keygate_metering_failures_total')).toMatch(/kind="flush"\} 0$/m);
  });

  it('in observability_mode answers nothing and still books (Anthropic stream, split every 7 bytes)', async () => {
    const a = await newAccount(1_000_000);
    const r = await client(sc()).exchange({
      path: '/v1/messages',
      identity: { keyId: a.keyId, accountId: a.account },
      responseHeaders: { 'content-type': 'text/event-stream' },
      chunks: split(fixture('anthropic-messages-stream.sse'), 7),
      observability: true,
    });
    expect(r.code).toBe(0);
    expect(r.answers).toEqual([]);
    await expectBalance(a.account, 1_000_000 - ANTHROPIC_STREAM_COST);
  });

  it('a stream whose client hangs up mid-stream (Envoy cancels the processing stream) is booked once, from what was seen, estimated', async () => {
    const a = await newAccount(1_000_000);
    const all = fixture('openai-responses-stream.sse');
    const seen = all.subarray(0, all.indexOf('response.completed')); // no usage came
    const r = await client(sc()).exchange({
      path: '/v1/responses',
      requestId: `cancel-${randomBytes(4).toString('hex')}`,
      identity: { keyId: a.keyId, accountId: a.account },
      requestBody: JSON.stringify({ model: 'gpt-4o', instructions: 'Be brief.', input: 'Tell me a three sentence bedtime story about a unicorn.', stream: true }),
      responseHeaders: { 'content-type': 'text/event-stream' },
      chunks: split(seen, 61),
      complete: false,
    });
    expect(r.code).toBe(1); // CANCELLED: the client side ended it, as Envoy does
    // input: 'Be brief.' + the input (9 + 55 = 64 code points) / 4 = 16; output: the deltas read,
    // 'In a peaceful grove beneath a silver moon…' (42) / 4 → 11; at openai/*: 16 × 2.5 + 11 × 10 = 150
    await expectBalance(a.account, 1_000_000 - 150);
    const log = (await db.xrange(s.usageLog(a.account), '-', '+')) as [string, string[]][];
    expect(log.length).toBe(1);
    expect(parseUsageEntry(a.account, log[0]![0], log[0]![1])).toMatchObject({ amountMicros: 150, model: 'gpt-4o-2024-08-06', inputTokens: 16, outputTokens: 11, source: 'meter', estimated: true, unpriced: false });
  });

  it('a gzip response is read; an error status books nothing and ends the stream at once', async () => {
    const a = await newAccount(1_000_000);
    const id = { keyId: a.keyId, accountId: a.account };
    const gz = gzipSync(fixture('openai-chat.json'));
    await client(sc()).exchange(openaiChat(id, `g-${randomBytes(4).toString('hex')}`, { responseHeaders: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, chunks: split(gz, 50) }));
    await expectBalance(a.account, 1_000_000 - OPENAI_CHAT_COST);
    const err = await client(sc()).exchange(openaiChat(id, `e-${randomBytes(4).toString('hex')}`, { status: 500 }));
    expect(err.code).toBe(0);
    // request headers, body, response headers answered, then the server ended it (one more may cross the end)
    expect(err.sent).toBeLessThanOrEqual(4);
    expect(err.answers.length).toBe(3);
    await expectBalance(a.account, 1_000_000 - OPENAI_CHAT_COST);
  });
});

describe('booking across sidecars', () => {
  it('the same booking id (one allowed request) metered at both sidecars is booked once', async () => {
    const a = await newAccount(1_000_000);
    const id = { keyId: a.keyId, accountId: a.account, bookingId: `kb:${randomBytes(16).toString('hex')}` };
    const rid = `dup-${randomBytes(4).toString('hex')}`;
    await Promise.all([client(h2!).exchange(openaiChat(id, rid)), client(gjs!).exchange(openaiChat(id, rid))]);
    await expectBalance(a.account, 1_000_000 - OPENAI_CHAT_COST);
    expect(await db.xlen(s.usageLog(a.account))).toBe(1);
  });

  it('200 concurrent streams: the wallet debited by exactly 200 × the price', async () => {
    const a = await newAccount(10_000_000);
    const id = { keyId: a.keyId, accountId: a.account };
    const c = client(h2!);
    const rs = await Promise.all(Array.from({ length: 200 }, (_, i) => c.exchange(openaiChat(id, `c200-${i}-${randomBytes(3).toString('hex')}`))));
    expect(rs.every((r) => r.code === 0)).toBe(true);
    await expectBalance(a.account, 10_000_000 - 200 * OPENAI_CHAT_COST);
    expect(await db.xlen(s.usageLog(a.account))).toBe(200);
  }, 60_000);

  it('a wallet driven to zero by metered answers is refused (402) on the next request at the other sidecar', async () => {
    const a = await newAccount(3000);
    const id = { keyId: a.keyId, accountId: a.account };
    expect(outcomeOf(await gjs!.client.check(chatRequest(a.key)))).toBe('allow');
    await client(h2!).exchange(openaiChat(id, `z1-${randomBytes(4).toString('hex')}`));
    await client(h2!).exchange(openaiChat(id, `z2-${randomBytes(4).toString('hex')}`));
    await expectBalance(a.account, 3000 - 2 * OPENAI_CHAT_COST);
    await waitFor(async () => outcomeOf(await gjs!.client.check(chatRequest(a.key))) === 'INSUFFICIENT_BALANCE', '402 at the other sidecar', 5000);
  });

  it("a metered booking counts against the key's token rate: used up, the gate blocks the key until the window ends", async () => {
    const a = await newAccount(1_000_000);
    const rk = rateKeys(s);
    // a token rate of 1000 per hour on the key (mirrored as the console does)
    await db.eval(SET_TOKEN_RATE, 2, rk.tokens(a.account, a.keyId), s.gate(a.account), `tokrate:${a.keyId}`, '1000', 'hour');
    await client(h2!).exchange(openaiChat({ keyId: a.keyId, accountId: a.account }, `t-${randomBytes(4).toString('hex')}`));
    await expectBalance(a.account, 1_000_000 - OPENAI_CHAT_COST);
    expect(await db.hget(rk.tokens(a.account, a.keyId), 'used')).toBe(String(1117 + 46));
    const until = Number(await db.hget(s.gate(a.account), `tokrate:${a.keyId}`));
    expect(until).toBeGreaterThan(Date.now());
  });

  it('an unpriced model is booked at 0 with its tokens, marked unpriced', async () => {
    const a = await newAccount(1_000_000);
    const body = Buffer.from(JSON.stringify({ model: 'mystery-1', candidates: [{ content: { parts: [{ text: 'x' }] } }], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5 }, modelVersion: 'mystery-1' }));
    await client(h2!).exchange({ path: '/v1beta/models/mystery-1:generateContent', identity: { keyId: a.keyId, accountId: a.account }, responseHeaders: { 'content-type': 'application/json' }, chunks: [body] });
    await waitFor(async () => (await db.xlen(s.usageLog(a.account))) === 1, 'usage entry');
    const [eid, flat] = ((await db.xrange(s.usageLog(a.account), "-", "+")) as [string, string[]][])[0]!;
    expect(parseUsageEntry(a.account, eid!, flat!)).toMatchObject({ amountMicros: 0, unpriced: true, inputTokens: 10, outputTokens: 5, source: 'meter' });
    expect(await balance(a.account)).toBe(1_000_000);
    const m = await h2!.sidecar.metrics.registry.getSingleMetricAsString('keygate_metering_unpriced_total');
    expect(m).toMatch(/keygate_metering_unpriced_total [1-9]/);
  });

  it('a price change is applied to responses ending after it (within the staleness bound)', async () => {
    const a = await newAccount(1_000_000);
    const id = { keyId: a.keyId, accountId: a.account };
    await db.hset(s.prices(), 'gpt-4o-2024-08-06', encodePrice({ input: 0, output: 1_000_000 }));
    try {
      await new Promise((r) => setTimeout(r, 100));
      await client(h2!).exchange(openaiChat(id, `p-${randomBytes(4).toString('hex')}`));
      await expectBalance(a.account, 1_000_000 - 46);
    } finally {
      await db.hdel(s.prices(), 'gpt-4o-2024-08-06');
    }
  });
});

describe('a failure inside metering never fails a request', () => {
  const metric = async (sc: TestSidecar, name: string, label: string) => {
    const text = await sc.sidecar.metrics.registry.getSingleMetricAsString(name);
    return Number(new RegExp(`^${name}\\{${label}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 'NaN');
  };
  const internal = (sc: TestSidecar) => Promise.all([metric(sc, 'keygate_metering_failures_total', 'kind="internal"'), metric(sc, 'keygate_metering_unbooked_responses_total', 'reason="internal"')]);

  it.each([
    ['h2', () => h2!],
    ['grpc-js', () => gjs!],
  ])('on %s: a reader that throws ends the stream with OK and no mutation, a booker that throws loses only that booking; both counted; Checks and the next stream go on', async (_name, sc) => {
    const a = await newAccount(1_000_000);
    const id = { keyId: a.keyId, accountId: a.account };
    const MARK = 'boom-internal'; // in a message: the reader throws
    const BOOK_MARK = 'bookfail-'; // a booking's request id: the booker throws
    const handle = MeterSession.prototype.handle;
    const add = Booker.prototype.add;
    const spies = [
      vi.spyOn(MeterSession.prototype, 'handle').mockImplementation(function (this: MeterSession, req: ProcessingRequest) {
        if (req.body?.includes(MARK) || req.headers?.some((h) => h.includes(MARK))) throw new Error('injected reader failure');
        return handle.call(this, req);
      }),
      vi.spyOn(Booker.prototype, 'add').mockImplementation(function (this: Booker, p: Parameters<Booker['add']>[0]) {
        if (p.booking.request_id.startsWith(BOOK_MARK)) throw new Error('injected booker failure');
        return add.call(this, p);
      }),
    ];
    try {
      const before = await internal(sc());
      // the reader throws at the request body: a streamed chat request that would be asked for
      // its usage (a body mutation) — the stream ends there with OK, nothing changed
      const streamed = JSON.stringify({ model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: MARK }] });
      const r = await client(sc()).exchange(openaiChat(id, `rd-${randomBytes(4).toString('hex')}`, { requestBody: streamed }));
      expect(r.code).toBe(0);
      expect(r.sent).toBe(2); // request headers, request body; then Envoy sends no more
      expect(r.answers.length).toBe(1); // the request headers' empty answer
      for (const m of r.answers) expect(JSON.stringify(m)).not.toMatch(/mutation|immediate_response/);
      // the booker throws when the booking is handed over: the stream was answered in full and ended OK
      const b = await client(sc()).exchange(openaiChat(id, `${BOOK_MARK}${randomBytes(4).toString('hex')}`));
      expect(b.code).toBe(0);
      expect(b.answers.length).toBe(b.sent);
      for (const m of b.answers) expect(JSON.stringify(m)).not.toMatch(/mutation|immediate_response/);
      await waitFor(async () => (await internal(sc()))[0] === before[0] + 2, 'both failures counted', 5000);
      expect(await internal(sc())).toEqual([before[0] + 2, before[1] + 2]);
      // the request path is unaffected: the key is still allowed, the next stream is metered exactly
      expect(outcomeOf(await sc().client.check(chatRequest(a.key)))).toBe('allow');
      await client(sc()).exchange(openaiChat(id, `ok-${randomBytes(4).toString('hex')}`));
      await expectBalance(a.account, 1_000_000 - OPENAI_CHAT_COST);
      expect(await db.xlen(s.usageLog(a.account))).toBe(1);
    } finally {
      for (const sp of spies) sp.mockRestore();
    }
  });
});

describe('hostile streams and shutdown', () => {
  it('garbage, broken gzip and absurd counts never crash the sidecar; it meters the next stream', async () => {
    const a = await newAccount(1_000_000);
    const id = { keyId: a.keyId, accountId: a.account };
    const c = client(gjs!);
    await c.exchange(openaiChat(id, `h1-${randomBytes(4).toString('hex')}`, { chunks: [randomBytes(5000), Buffer.from('{"usage":{"prompt_tokens":-5,"completion_tokens":1e308}}')] }));
    await c.exchange(openaiChat(id, `h2-${randomBytes(4).toString('hex')}`, { responseHeaders: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, chunks: [randomBytes(300)] }));
    await c.exchange(openaiChat(id, `h3-${randomBytes(4).toString('hex')}`, { responseHeaders: { 'content-type': 'text/event-stream' }, chunks: ['data: {"choices":[{"delta":{"content":"', 'x'.repeat(100_000)], complete: false }));
    // each booked from what was read, estimated (never a negative charge): the three entries
    // flushed, then the exact balance
    await waitFor(async () => (await db.xlen(s.usageLog(a.account))) === 3, 'three bookings', 10_000);
    const entries = ((await db.xrange(s.usageLog(a.account), '-', '+')) as [string, string[]][]).map(([eid, flat]) => parseUsageEntry(a.account, eid, flat));
    // input: 'user' + 'hi' / 4 → 2 (2.5 each → 5); the cut stream's 100,000 x read as its text → 25,000 output (10 each)
    // (in any order: a broken gzip stream is booked once its decoder has ended)
    const byRequest = Object.fromEntries(entries.map((e) => [e.requestId.slice(0, 2), [e.inputTokens, e.outputTokens, e.amountMicros, e.estimated]]));
    expect(byRequest).toEqual({ h1: [2, 0, 5, true], h2: [2, 0, 5, true], h3: [2, 25_000, 250_005, true] });
    await expectBalance(a.account, 1_000_000 - 250_015);
    const b = await newAccount(1_000_000);
    await c.exchange(openaiChat({ keyId: b.keyId, accountId: b.account }, `h4-${randomBytes(4).toString('hex')}`));
    await expectBalance(b.account, 1_000_000 - OPENAI_CHAT_COST);
  });

  it('shutdown drains the bookings still waiting for their flush', async () => {
    const sc = await startTestSidecar(redis!.url, { meterFlushMs: 1000 });
    try {
      const a = await newAccount(1_000_000);
      const c = new ExtProcClient(`127.0.0.1:${sc.sidecar.grpcPort}`);
      await c.exchange(openaiChat({ keyId: a.keyId, accountId: a.account }, `s-${randomBytes(4).toString('hex')}`));
      c.close();
      expect(await balance(a.account)).toBe(1_000_000); // not flushed yet
      await sc.close();
      expect(await balance(a.account)).toBe(1_000_000 - OPENAI_CHAT_COST);
    } finally {
      await sc.close();
    }
  });
});
