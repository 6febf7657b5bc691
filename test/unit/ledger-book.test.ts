/**
 * The booking write's pure parts (src/ledger/book.ts): the script's ARGV for a usage record and a
 * metered booking, and the typed reading of every answer of RECORD_USAGE. The script itself runs
 * against real Redis in the wallet, usage and metering suites.
 */
import { describe, expect, it } from 'vitest';
import { readBooking, usageRecordArgs, type Usage } from '../../src/ledger/book.ts';
import { MAX_BALANCE_MICROS } from '../../src/schema/money.ts';

const O = { idempotencySeconds: 600, logMaxEntries: 1000 };
const record: Usage = { account: 'acme', keyId: 'k1', bookingId: 'req-1', amountMicros: 700, model: null, inputTokens: null, outputTokens: 5 };

describe('the booking write', () => {
  it('a usage record\'s ARGV: counts not given are empty, no source, label or price', () => {
    expect(usageRecordArgs(record, O)).toEqual(['k1', '700', 'req-1', '600', '1000', String(MAX_BALANCE_MICROS), '', '', '5', 'acme', '', '', '', '', '', '', '', '']);
  });

  it('a metered booking\'s ARGV: every count, source meter, the flags, the basis as JSON and the label', () => {
    const price = { rule: 'recorded', model: 'openai/gpt-4o', source: 'record', catalog_version: null, tier: null, service_tier: null, multiplier: '1', parts: { recorded: '9' } } as const;
    const metered: Usage = { ...record, bookingId: 'kb:1', model: 'openai/gpt-4o', inputTokens: 10, cachedInputTokens: 0, cacheWriteTokens: 2, reasoningTokens: 3, source: 'meter', estimated: true, unpriced: false, price, label: 'x-1' };
    expect(usageRecordArgs(metered, O)).toEqual(['k1', '700', 'kb:1', '600', '1000', String(MAX_BALANCE_MICROS), 'openai/gpt-4o', '10', '5', 'acme', '0', '2', '3', 'meter', '1', '', JSON.stringify(price), 'x-1']);
  });

  it('reads every answer of the script', () => {
    expect(readBooking(['OK', '-20', '', '1-0', '0'], record)).toEqual({ outcome: 'booked', balanceMicros: -20 });
    expect(readBooking(['OK', '', '', '1-0', '1'], record)).toEqual({ outcome: 'booked', balanceMicros: null });
    expect(readBooking(['FLOOR', '-5'], record)).toEqual({ outcome: 'floor', balanceMicros: -5 });
    expect(readBooking(['TOTAL', '12'], record)).toEqual({ outcome: 'total', totalMicros: 12 });
    expect(readBooking(['TOKENS', 'key month 123'], record)).toEqual({ outcome: 'tokens', over: 'key month 123' });
    expect(readBooking(['WHAT'], record)).toEqual({ outcome: 'unexpected' });
    expect(readBooking('OK', record)).toEqual({ outcome: 'unexpected' });
    expect(readBooking(null, record)).toEqual({ outcome: 'unexpected' });
  });

  it('a repeat: the first booking read back (the model may hold ":"), the same one a plain retry', () => {
    const mine = 'k1:700::5:';
    expect(readBooking(['DUP', mine, mine], record)).toEqual({ outcome: 'duplicate', same: true, first: { keyId: 'k1', amountMicros: 700, model: null, inputTokens: null, outputTokens: 5 } });
    expect(readBooking(['DUP', 'k2:700:1:5:a/b:c', mine], record)).toEqual({ outcome: 'duplicate', same: false, first: { keyId: 'k2', amountMicros: 700, model: 'a/b:c', inputTokens: 1, outputTokens: 5 } });
    // Booked before counts and model were kept ("keyId:amount"): compared on key and amount only.
    expect(readBooking(['DUP', 'k1:700', mine], record)).toMatchObject({ outcome: 'duplicate', same: true });
    expect(readBooking(['DUP', 'k1:701', mine], record)).toMatchObject({ outcome: 'duplicate', same: false, first: { amountMicros: 701, model: null, inputTokens: null } });
  });
});
