/** Per-account metrics: bounded by the cap (overflow into "_other"), "_none" before a key is known, never a key. */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { CheckInput, CheckOutcome } from '../../src/authorizer.ts';
import { allow, deny } from '../../src/core/decision.ts';
import { AccountMetrics } from '../../src/telemetry/account-metrics.ts';
import type { Booking } from '../../src/metering/session.ts';
import { meteredResponseOf, type MeteredResponse } from '../../src/telemetry/metered.ts';

const input = {} as CheckInput;
const allowed = (account: string): CheckOutcome => ({ decision: allow({ id: 'key_1', account, models: null, expiresAt: null }, null), family: 'openai', requestId: 'r', accountId: account });
const denied = (code: 'INVALID_API_KEY' | 'INSUFFICIENT_BALANCE', account?: string): CheckOutcome => ({ decision: deny(code), family: 'openai', requestId: 'r', accountId: account });
const booking = (accountId: string, costMicros: number, inputTokens: number, outputTokens: number) =>
  ({ accountId, costMicros, inputTokens, outputTokens }) as MeteredResponse;

async function series(reg: Registry, name: string): Promise<Map<string, number>> {
  const m = (await reg.getMetricsAsJSON()).find((x) => x.name === name)!;
  return new Map(m.values.map((v) => [JSON.stringify(v.labels), v.value]));
}

describe('AccountMetrics', () => {
  it('counts decisions per account up to the cap, later accounts under _other, keyless denies under _none', async () => {
    const reg = new Registry();
    const am = new AccountMetrics(reg, 2);
    for (const a of ['a1', 'a2', 'a3', 'a4', 'a1']) am.decisionObserver(allowed(a), input, 0n);
    am.decisionObserver(denied('INSUFFICIENT_BALANCE', 'a2'), input, 0n);
    am.decisionObserver(denied('INSUFFICIENT_BALANCE', 'a9'), input, 0n);
    am.decisionObserver(denied('INVALID_API_KEY'), input, 0n);
    expect(am.accounts).toBe(2);
    const s = await series(reg, 'keygate_account_decisions_total');
    const at = (account: string, result: string, code: string) => s.get(JSON.stringify({ account, result, code }));
    expect(at('a1', 'allow', 'OK')).toBe(2);
    expect(at('a2', 'allow', 'OK')).toBe(1);
    expect(at('a2', 'deny', 'INSUFFICIENT_BALANCE')).toBe(1);
    expect(at('_other', 'allow', 'OK')).toBe(2);
    expect(at('_other', 'deny', 'INSUFFICIENT_BALANCE')).toBe(1);
    expect(at('_none', 'deny', 'INVALID_API_KEY')).toBe(1);
    expect(at('a3', 'allow', 'OK')).toBeUndefined();
    // Bounded: (cap + _other) × codes at most, plus _none's.
    const accounts = new Set([...s.keys()].map((k) => JSON.parse(k).account));
    expect([...accounts].sort()).toEqual(['_none', '_other', 'a1', 'a2']);
  });

  it('sums bookings per account (spend and tokens), with the same cap', async () => {
    const reg = new Registry();
    const am = new AccountMetrics(reg, 1);
    am.meteredObserver(booking('a1', 1500, 100, 20));
    am.meteredObserver(booking('a1', 500, 1, 2));
    am.meteredObserver(booking('a2', 7, 3, 4));
    const spend = await series(reg, 'keygate_account_spend_micro_units_total');
    expect(spend.get(JSON.stringify({ account: 'a1' }))).toBe(2000);
    expect(spend.get(JSON.stringify({ account: '_other' }))).toBe(7);
    const tokens = await series(reg, 'keygate_account_tokens_total');
    expect(tokens.get(JSON.stringify({ account: 'a1', direction: 'input' }))).toBe(101);
    expect(tokens.get(JSON.stringify({ account: 'a1', direction: 'output' }))).toBe(22);
    expect(tokens.get(JSON.stringify({ account: '_other', direction: 'output' }))).toBe(4);
  });

  it('exports the _other series from the start (the recording rules have a baseline)', async () => {
    const reg = new Registry();
    new AccountMetrics(reg, 10);
    const text = await reg.metrics();
    expect(text).toContain('keygate_account_decisions_total{account="_other",result="allow",code="OK"} 0');
    expect(text).toContain('keygate_account_spend_micro_units_total{account="_other"} 0');
    expect(text).toContain('keygate_account_tokens_total{account="_other",direction="input"} 0');
  });

  it('a booking reported through meteredResponseOf: the normalised counts, ids and the cost', async () => {
    const reg = new Registry();
    const am = new AccountMetrics(reg, 10);
    // A metering `Booking` as the meter reports it (telemetry reads its fields without importing the metering).
    const booking: Booking = { booking_id: 'req-1', request_id: 'req-1', key_id: 'key_1', account: 'a1', model: 'claude-x', family: 'anthropic', input_tokens: 130, cached_input_tokens: 100, cache_write_tokens: 10, output_tokens: 9, reasoning_tokens: 0, estimated: false };
    const m = meteredResponseOf(
      booking,
      { operation: 'messages', requestModel: 'claude-x-latest', costMicros: 321, startedAtMs: 1, endedAtMs: 2 },
    );
    expect(m).toMatchObject({ requestId: 'req-1', accountId: 'a1', keyId: 'key_1', family: 'anthropic', responseModel: 'claude-x', requestModel: 'claude-x-latest', inputTokens: 130, outputTokens: 9, costMicros: 321 });
    am.meteredObserver(m);
    const tokens = await series(reg, 'keygate_account_tokens_total');
    expect(tokens.get(JSON.stringify({ account: 'a1', direction: 'input' }))).toBe(130);
    expect((await series(reg, 'keygate_account_spend_micro_units_total')).get(JSON.stringify({ account: 'a1' }))).toBe(321);
  });
});
