/**
 * Property tests (fast-check) over the management API's request schemas, through the real server
 * and Redis: whatever the body, the answer is a success or `{"error": {"code", "message"}}` with a
 * 4xx status — never a crash or a 5xx — and a refused request changes nothing.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { startConsole, type ConsoleServer } from '../src/console-api/main.ts';
import { CreateKeyBody, CreditBody, UpdateKeyBody, UsageBody } from '../src/console-api/schemas.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { snapshot } from './helpers/redis-dump.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

let redis: RedisServer;
let srv: ConsoleServer;
let token: string;
let keyId: string;
const ACCT = `prop-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  redis = await startRedis();
  srv = await startConsole(
    loadConsoleApiConfig({ port: 0, redisUrl: redis.url }, { KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_CONSOLE_RATE_LIMIT: '1000000' }),
    createLogger('silent'),
    { revealKey: `k1:${randomBytes(32).toString('base64')}` },
  );
  token = (await srv.console.createToken({ name: 'props', account: null }, CLI_ACTOR)).token;
  keyId = (await srv.console.createKey({ account: ACCT, name: 'target' })).id;
}, 60_000);

afterAll(async () => {
  await srv?.close();
  if (redis) await destroyRedis(redis);
});

const modelish = fc.oneof(fc.constantFrom('openai/*', 'anthropic/claude-3-5-sonnet', '*', 'gpt-4o', 'a b', 'x/', '/y', '', 'OPENAI/GPT-4O'), fc.string({ maxLength: 20 }));
const dateish = fc.oneof(
  fc.constantFrom('2999-01-01', '2026-02-30', '2001-01-01', '2999-01-01T00:00:00Z', '2999-01-01T00:00', '9999-12-31T23:59:59+14:00', 'tomorrow', ''),
  fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
  fc.integer(),
);
/** Bodies near the schema (the interesting boundary) and anything at all. */
const body = fc.oneof(
  fc.record(
    {
      name: fc.oneof(fc.string({ maxLength: 140 }), fc.integer(), fc.constant(null), fc.constantFrom('  ', 'ok name', '\u202eevil', 'x'.repeat(129))),
      models: fc.oneof(fc.constant(null), fc.array(modelish, { maxLength: 4 }), fc.string()),
      expires_at: fc.oneof(fc.constant(null), dateish),
      limit: fc.oneof(fc.constant(null), fc.anything()),
      extra: fc.anything(),
    },
    { requiredKeys: [] },
  ),
  // Key-shaped: a valid body has no other field, which the record above leaves out only at times
  // (a run of 500 gave no valid create body once in a while, and the check below then failed)
  fc.record(
    {
      name: fc.oneof(fc.constantFrom('ok name', 'k'), fc.string({ maxLength: 140 })),
      models: fc.oneof(fc.constant(null), fc.constant(['openai/*']), fc.array(modelish, { maxLength: 2 })),
      expires_at: fc.oneof(fc.constant(null), fc.constant('2999-01-01T00:00:00Z'), dateish),
    },
    { requiredKeys: [] },
  ),
  fc.anything(),
);

const amountish = fc.oneof(fc.constantFrom(0, -1, 1, 1.5, 1e15, 1e15 + 1, Number.MAX_SAFE_INTEGER, '100', null), fc.integer(), fc.double());
const refish = fc.oneof(fc.constantFrom('inv-1', '', 'a b', 'x'.repeat(129), 'ok:ref/1'), fc.string({ maxLength: 20 }), fc.integer());
const nearAmount = fc.oneof(fc.integer({ min: 1, max: 1e12 }), amountish);
const nearRef = fc.oneof(fc.constantFrom('inv-1', 'ok:ref/1'), refish);
/** Credit and usage bodies near their schemas, and anything at all. */
const moneyBody = fc.oneof(
  fc.record(
    {
      amount_micros: amountish,
      reference: refish,
      key_id: fc.oneof(fc.constantFrom('key_000000000000000000000000', 'nope'), fc.string({ maxLength: 30 })),
      request_id: refish,
      model: fc.oneof(fc.constant(null), modelish),
      input_tokens: fc.oneof(fc.constant(null), fc.integer({ min: -5, max: 10 }), fc.double()),
      extra: fc.anything(),
    },
    { requiredKeys: [] },
  ),
  // Credit- and usage-shaped: a valid body has no other field, which the record above almost never
  // leaves out (500 runs of it alone gave no valid credit and no valid usage body).
  fc.record({ amount_micros: nearAmount, reference: nearRef }, { requiredKeys: [] }),
  fc.record(
    { key_id: fc.constant('key_000000000000000000000000'), amount_micros: nearAmount, request_id: nearRef, model: fc.oneof(fc.constant(null), modelish), output_tokens: fc.oneof(fc.constant(null), fc.nat(), fc.integer()) },
    { requiredKeys: ['key_id', 'amount_micros', 'request_id'] },
  ),
  fc.anything(),
);

async function send(method: string, path: string, payload: unknown): Promise<{ status: number; json: any }> {
  const raw = JSON.stringify(payload);
  const res = await fetch(`http://127.0.0.1:${srv.port}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(raw === undefined ? {} : { 'content-type': 'application/json' }) },
    body: raw,
  });
  return { status: res.status, json: await res.json() };
}

describe('request bodies (fast-check)', () => {
  it('the zod schemas never throw, and accept only the documented fields', () => {
    const accepted = { create: 0, update: 0 };
    fc.assert(
      fc.property(body, (b) => {
        for (const [name, schema] of [['create', CreateKeyBody], ['update', UpdateKeyBody]] as const) {
          const r = schema.safeParse(b);
          if (!r.success) continue;
          accepted[name]++;
          for (const k of Object.keys(r.data)) expect(['name', 'models', 'expires_at', 'limit']).toContain(k);
        }
      }),
      { numRuns: 500 },
    );
    // The field check ran: some generated bodies were valid (else the property says nothing).
    expect(accepted.create).toBeGreaterThan(0);
    expect(accepted.update).toBeGreaterThan(0);
  });

  it('credit and usage bodies: the zod schemas never throw, and accept only the documented fields', () => {
    const accepted = { credit: 0, usage: 0 };
    fc.assert(
      fc.property(moneyBody, (b) => {
        const credit = CreditBody.safeParse(b);
        if (credit.success) {
          accepted.credit++;
          expect(Object.keys(credit.data).sort()).toEqual(['amount_micros', 'reference']);
        }
        const usage = UsageBody.safeParse(b);
        if (usage.success) {
          accepted.usage++;
          for (const k of Object.keys(usage.data)) expect(['key_id', 'amount_micros', 'request_id', 'model', 'input_tokens', 'output_tokens']).toContain(k);
        }
      }),
      { numRuns: 500 },
    );
    // The field checks ran: some generated bodies were valid (else the property says nothing).
    expect(accepted.credit).toBeGreaterThan(0);
    expect(accepted.usage).toBeGreaterThan(0);
  });

  it('POST credits and POST usage: a success or a 4xx error body; a refusal changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(moneyBody, fc.boolean(), async (b, credit) => {
        const before = await snapshot(redis.client());
        const r = credit ? await send('POST', `/v1/accounts/${ACCT}/credits`, b) : await send('POST', '/v1/usage', b);
        if (r.status === 200) return;
        expect(r.status, JSON.stringify(r.json)).toBeGreaterThanOrEqual(400);
        expect(r.status).toBeLessThan(500);
        expect(Object.keys(r.json)).toEqual(['error']);
        expect(typeof r.json.error.message).toBe('string');
        expect(await snapshot(redis.client())).toEqual(before);
      }),
      { numRuns: 150 },
    );
  }, 120_000);

  it('POST keys and PATCH key: a success or a 4xx error body; a refusal changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.boolean(), async (b, create) => {
        const before = await snapshot(redis.client());
        const r = create ? await send('POST', `/v1/accounts/${ACCT}/keys`, b) : await send('PATCH', `/v1/keys/${keyId}`, b);
        if (r.status === 201 || r.status === 200) {
          expect(typeof r.json.id).toBe('string');
          if (create) await srv.console.revokeKey(r.json.id); // stay under the active-key limit
          return;
        }
        expect(r.status, JSON.stringify(r.json)).toBeGreaterThanOrEqual(400);
        expect(r.status).toBeLessThan(500);
        expect(Object.keys(r.json)).toEqual(['error']);
        expect(typeof r.json.error.code).toBe('string');
        expect(typeof r.json.error.message).toBe('string');
        expect(await snapshot(redis.client())).toEqual(before);
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
