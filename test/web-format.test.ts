/** The page's money, amount, model-list and error-field conversions (web/src/format.ts). */
import { describe, expect, it } from 'vitest';
import { amountInput, expiryFromDate, dateInput, fieldOf, isExpired, money, parseAmount, parseModels } from '../web/src/format.ts';

describe('money and amounts', () => {
  it('shows micro-units with 2 to 6 decimals', () => {
    expect(money(0)).toBe('0.00');
    expect(money(12_500_000)).toBe('12.50');
    expect(money(1)).toBe('0.000001');
    expect(money(1_234_567_890_000)).toBe('1,234,567.89');
    expect(money(-2_000_000)).toBe('-2.00');
  });

  it('reads a typed amount as micro-units, refusing what the API would refuse', () => {
    expect(parseAmount('5')).toBe(5_000_000);
    expect(parseAmount(' 12.5 ')).toBe(12_500_000);
    expect(parseAmount('0.000001')).toBe(1);
    for (const bad of ['', '0', '0.0', '-1', '+1', '1e3', '.5', '1.', '1.0000001', '1,5', 'abc']) expect(parseAmount(bad), bad).toBeNull();
  });

  it('puts an amount back into the input as typed', () => {
    expect(amountInput(5_000_000)).toBe('5');
    expect(amountInput(12_500_000)).toBe('12.5');
    expect(amountInput(1_000_000_000_000)).toBe('1000000');
    for (const m of [1, 7_250_000, 123_456_789]) expect(parseAmount(amountInput(m))).toBe(m);
  });
});

describe('models, expiry and errors', () => {
  it('splits the models field on commas and spaces; empty = every model', () => {
    expect(parseModels('openai/*, anthropic/claude-sonnet-4  google/gemini-2.5-pro')).toEqual(['openai/*', 'anthropic/claude-sonnet-4', 'google/gemini-2.5-pro']);
    expect(parseModels('  ,  ')).toEqual([]);
  });

  it('an expiry date is 00:00 UTC of that day, and reads back as the same date', () => {
    expect(expiryFromDate('2030-01-31')).toBe('2030-01-31T00:00:00.000Z');
    expect(dateInput('2030-01-31T00:00:00.000Z')).toBe('2030-01-31');
    expect(dateInput(null)).toBe('');
    expect(isExpired('2001-01-01T00:00:00Z')).toBe(true);
    expect(isExpired('2999-01-01T00:00:00Z')).toBe(false);
    expect(isExpired(null)).toBe(false);
  });

  it('places an API error next to the field its message names', () => {
    expect(fieldOf('expires_at: expiry 2001-01-01T00:00:00.000Z is not in the future')).toBe('expires');
    expect(fieldOf('model pattern "x y" must be "provider/model"')).toBe('models');
    expect(fieldOf('models: at most 100 entries')).toBe('models');
    expect(fieldOf('limit.amount_micros must be a positive integer')).toBe('limit');
    expect(fieldOf('name must have 1 to 128 characters')).toBe('name');
    expect(fieldOf('the account already has 100 active keys')).toBeNull();
  });
});
