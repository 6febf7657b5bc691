/**
 * The booking id is keygate's (SPEC 15): every allow — gRPC Check on both transports and the HTTP
 * authz answer — carries a fresh, unguessable `booking_id`; metering books under the id the
 * forwarded ext_authz metadata carries, so one allowed request metered at two sidecars is booked
 * once, while two requests sent with the same client `x-request-id` are booked twice (before: five
 * requests sent with one id were billed once). `x-request-id` stays in the usage log as a label;
 * the entry carries `booking_id`. A stream whose metadata carries no booking id is booked under an
 * id minted for that stream (counted `missing-booking-id`), never under the client's header.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOKING_ID_HEADER, BOOKING_ID_PATTERN } from '../src/core/booking-id.ts';
import { parseUsageEntry } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import type { CheckResponseMsg } from './helpers/envoy-client.ts';
import type { MeteredExchange } from './helpers/ext-proc-client.ts';
import { startMeteringPair, type MeteringPair } from './helpers/metering-pair.ts';
import { chatRequest, outcomeOf, waitFor, type TestSidecar } from './helpers/sidecars.ts';
import { fixture } from './unit/metering-helpers.ts';

const s = schema();
let pair: MeteringPair | undefined;
let db: Redis;
let h2: TestSidecar | undefined;
let gjs: TestSidecar | undefined;

/** openai-chat.json at `openai/*` (as in metering-service.test.ts): 1973 micro-units. */
const COST = 1973;

beforeAll(async () => {
  pair = await startMeteringPair();
  ({ db, h2, gjs } = pair);
}, 60_000);

afterAll(async () => {
  await pair?.close();
});

const client = (sc: TestSidecar) => pair!.client(sc);
const newAccount = (credit: number) => pair!.newAccount(credit);
const expectBalance = (account: string, want: number) => pair!.expectBalance(account, want);

const metaString = (res: CheckResponseMsg, field: string) => res.dynamic_metadata?.fields?.[field]?.stringValue;

/** One metered chat answer as Envoy's ext_proc sends it, with what ext_authz forwarded. */
const exchange = (identity: MeteredExchange['identity'], requestId: string): MeteredExchange => ({
  path: '/v1/chat/completions',
  requestId,
  identity,
  requestBody: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
  responseHeaders: { 'content-type': 'application/json' },
  chunks: [fixture('openai-chat.json')],
});

describe('every allow carries a fresh booking id', () => {
  it.each([
    ['h2', () => h2!],
    ['grpc-js', () => gjs!],
  ])('gRPC Check (%s): booking_id in the dynamic metadata, 128 bits of hex, never repeated, whatever x-request-id the client sent', async (_n, sc) => {
    const a = await newAccount(1_000_000);
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const req = chatRequest(a.key);
      const res = await sc().client.check({ ...req, headers: { ...req.headers, 'x-request-id': 'client-chosen-id' } });
      expect(outcomeOf(res)).toBe('allow');
      const id = metaString(res, 'booking_id');
      expect(id).toMatch(BOOKING_ID_PATTERN);
      ids.add(id!);
    }
    expect(ids.size).toBe(20);
  });

  it('HTTP authz: the allow carries x-keygate-booking-id, fresh on every answer', async () => {
    const a = await newAccount(1_000_000);
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`http://127.0.0.1:${h2!.sidecar.httpPort}/authz/v1/chat/completions`, { method: 'POST', headers: { 'x-api-key': a.key, 'x-request-id': 'same' } });
      expect(res.status).toBe(200);
      const id = res.headers.get(BOOKING_ID_HEADER);
      expect(id).toMatch(BOOKING_ID_PATTERN);
      ids.add(id!);
    }
    expect(ids.size).toBe(5);
  });
});

describe('bookings are idempotent on the booking id, not on x-request-id', () => {
  it('two requests with the same client x-request-id are booked twice (the label kept on both entries)', async () => {
    const a = await newAccount(1_000_000);
    const rid = `same-${randomBytes(4).toString('hex')}`;
    for (const sc of [h2!, gjs!]) {
      const req = chatRequest(a.key);
      const res = await sc.client.check({ ...req, headers: { ...req.headers, 'x-request-id': rid } });
      const bookingId = metaString(res, 'booking_id')!;
      await client(sc).exchange(exchange({ keyId: a.keyId, accountId: a.account, bookingId }, rid));
    }
    await expectBalance(a.account, 1_000_000 - 2 * COST);
    const entries = ((await db.xrange(s.usageLog(a.account), '-', '+')) as [string, string[]][]).map(([id, f]) => parseUsageEntry(a.account, id, f));
    expect(entries.map((e) => e.requestId)).toEqual([rid, rid]);
    expect(entries.every((e) => BOOKING_ID_PATTERN.test(e.bookingId))).toBe(true);
    expect(new Set(entries.map((e) => e.bookingId)).size).toBe(2);
  });

  it('one allowed request metered at two sidecars (any x-request-id each) is booked once', async () => {
    const a = await newAccount(1_000_000);
    const res = await h2!.client.check(chatRequest(a.key));
    const identity = { keyId: a.keyId, accountId: a.account, bookingId: metaString(res, 'booking_id')! };
    await Promise.all([client(h2!).exchange(exchange(identity, 'r-one')), client(gjs!).exchange(exchange(identity, 'r-two'))]);
    await expectBalance(a.account, 1_000_000 - COST);
    expect(await db.xlen(s.usageLog(a.account))).toBe(1);
  });

  it('no booking id forwarded: each stream is booked under its own minted id (never the client header), counted', async () => {
    const a = await newAccount(1_000_000);
    const metrics = async () => (await (await fetch(`http://127.0.0.1:${h2!.sidecar.adminPort}/metrics`)).text()).match(/keygate_metering_anomalies_total\{kind="missing-booking-id"\} (\d+)/)?.[1] ?? '0';
    const before = Number(await metrics());
    for (let i = 0; i < 3; i++) await client(h2!).exchange(exchange({ keyId: a.keyId, accountId: a.account }, 'client-id'));
    await expectBalance(a.account, 1_000_000 - 3 * COST);
    const entries = ((await db.xrange(s.usageLog(a.account), '-', '+')) as [string, string[]][]).map(([id, f]) => parseUsageEntry(a.account, id, f));
    expect(entries.every((e) => e.bookingId.startsWith('m:') && e.requestId === 'client-id')).toBe(true);
    await waitFor(async () => Number(await metrics()) >= before + 3, 'missing-booking-id counted', 5000);
  });

  it('a forwarded booking_id not of keygate\'s form is not trusted: a minted id instead', async () => {
    const a = await newAccount(1_000_000);
    for (let i = 0; i < 2; i++) await client(gjs!).exchange(exchange({ keyId: a.keyId, accountId: a.account, bookingId: 'client-chosen' }, 'x'));
    await expectBalance(a.account, 1_000_000 - 2 * COST);
  });
});
