/**
 * The page's conversions (web/src/format.ts) and the form rules it shares with the console
 * (src/core/key-rules.ts): the page refuses exactly what the console library would refuse.
 */
import { describe, expect, it } from 'vitest';
import { amountProblem, expiryProblem, modelsProblem, nameProblem, parseAmountText, splitModels } from '../src/core/key-rules.ts';
import { validateModels, validateName } from '../src/console/validate.ts';
import { rateProblem } from '../src/core/rate-text.ts';
import { parseRateText as serverRate } from '../src/schema/rates.ts';
import { parseAmount as serverAmount } from '../src/schema/money.ts';
import { amountInput, csvLine, decimal, fieldOf, rateRefusalWords, rateWords, useWords, fromLocalInput, isExpired, localInput, money, rolledName } from '../web/src/format.ts';

const accepts = (f: () => unknown) => {
  try {
    f();
    return true;
  } catch {
    return false;
  }
};

describe('money and amounts', () => {
  it('shows micro-units with 2 to 6 decimals, and exactly for CSV', () => {
    expect(money(0)).toBe('0.00');
    expect(money(12_500_000)).toBe('12.50');
    expect(money(1)).toBe('0.000001');
    expect(money(1_234_567_890_000)).toBe('1,234,567.89');
    expect(money(-2_000_000)).toBe('-2.00');
    expect(decimal(-7)).toBe('-0.000007');
    expect(decimal(25_000_000)).toBe('25.000000');
  });

  it('reads a typed amount as micro-units, refusing what the API refuses (one rule)', () => {
    expect(parseAmountText('5')).toBe(5_000_000);
    expect(parseAmountText(' 12.5 ')).toBe(12_500_000);
    expect(parseAmountText('0.000001')).toBe(1);
    for (const bad of ['', '0', '0.0', '-1', '+1', '1e3', '.5', '1.', '1.0000001', '1,5', 'abc', '1000000001']) {
      expect(parseAmountText(bad), bad).toBeNull();
      expect(amountProblem(bad), bad).toMatch(/positive amount/);
    }
    for (const t of ['5', '12.5', '0.000001', '1000000000', '1000000001', '0', 'x']) expect(parseAmountText(t), t).toBe(serverAmount(t));
  });

  it('puts an amount back into the input as typed', () => {
    expect(amountInput(5_000_000)).toBe('5');
    expect(amountInput(12_500_000)).toBe('12.5');
    for (const m of [1, 7_250_000, 123_456_789]) expect(parseAmountText(amountInput(m))).toBe(m);
  });
});

describe('names, models and expiry: the page and the console agree', () => {
  it('a name: required, at most 128 characters, no control characters', () => {
    expect(nameProblem('  ')).toBe('Give the key a name, so you can recognise it later.');
    expect(nameProblem('x'.repeat(129))).toBe('Use at most 128 characters (this name has 129).');
    expect(nameProblem('a\u202eb')).toMatch(/control characters/);
    for (const n of ['', ' ', 'ok', 'x'.repeat(128), 'x'.repeat(129), 'a\u0007b', 'é'.repeat(128), 'ci pipeline (rolled)']) {
      expect(nameProblem(n) === null, JSON.stringify(n)).toBe(accepts(() => validateName(n)));
    }
  });

  it('models split on commas only: "not a model!!" is one entry, and refused', () => {
    expect(splitModels('')).toEqual([]);
    expect(splitModels('openai/*, anthropic/claude-sonnet-4')).toEqual(['openai/*', 'anthropic/claude-sonnet-4']);
    expect(splitModels('not a model!!')).toEqual(['not a model!!']);
    expect(modelsProblem(['not a model!!'])).toMatch(/^“not a model!!” is not a model name\./);
    expect(modelsProblem(['a', ''])).toMatch(/empty entry/);
    expect(modelsProblem(['x y', 'bad%', 'openai/gpt-4o'])).toMatch(/^“x y”, “bad%” are not model names/);
    for (const list of [['openai/gpt-4o-mini'], ['openai/*'], ['*'], ['gpt-4o-mini'], ['not a model!!'], ['openai/gpt*'], ['a/../b'], ['OpenAI/GPT-4o']]) {
      expect(modelsProblem(list) === null, list.join(',')).toBe(accepts(() => validateModels(list)));
    }
  });

  it('an expiry must be in the future; the picker reads and writes local time', () => {
    const now = Date.UTC(2030, 0, 1);
    expect(expiryProblem(now, now)).toMatch(/in the future/);
    expect(expiryProblem(now + 60_000, now)).toBeNull();
    expect(expiryProblem(NaN, now)).toMatch(/Choose a date/);
    const t = new Date(2031, 4, 6, 7, 8).getTime();
    expect(localInput(t)).toBe('2031-05-06T07:08');
    expect(fromLocalInput('2031-05-06T07:08')).toBe(t);
    expect(fromLocalInput('2031-05-06')).toBeNaN();
    expect(isExpired('2001-01-01T00:00:00Z')).toBe(true);
    expect(isExpired(null)).toBe(false);
  });

  it('a rolled key is named "… (rolled)", then "… (rolled 2)", "… (rolled 3)", within 128 characters', () => {
    expect(rolledName('ci')).toBe('ci (rolled)');
    expect(rolledName('ci (rolled)')).toBe('ci (rolled 2)');
    expect(rolledName('ci (rolled 2)')).toBe('ci (rolled 3)');
    expect(rolledName('ci (rolled 9)')).toBe('ci (rolled 10)');
    expect(rolledName('ci(rolled)')).toBe('ci(rolled) (rolled)');
    const long = rolledName('x'.repeat(128));
    expect([[...long].length, long.endsWith('x (rolled)')]).toEqual([128, true]);
    const longer = rolledName(long);
    expect([[...longer].length, longer.endsWith('x (rolled 2)')]).toEqual([128, true]);
    // Cut by characters (code points), never inside one; no space left before the suffix.
    expect([...rolledName('😀'.repeat(128))]).toHaveLength(128);
    expect(rolledName(`${'a'.repeat(118)} b`)).toBe(`${'a'.repeat(118)} (rolled)`);
  });

  it('places an API error next to the field its message names', () => {
    expect(fieldOf('expires_at: expiry 2001-01-01T00:00:00.000Z is not in the future')).toBe('expires');
    expect(fieldOf('model pattern "x y" must be "provider/model"')).toBe('models');
    expect(fieldOf('limit.amount_micros must be a positive integer')).toBe('limit');
    expect(fieldOf('name must have 1 to 128 characters')).toBe('name');
    expect(fieldOf('the account already has 100 active keys')).toBeNull();
    expect(fieldOf('rate.requests must be an integer from 1 to 1000000000')).toBe('rate');
    expect(fieldOf("Token rate 9/s exceeds the account's token rate 5/s; an owner sets a key's token rate within its account's")).toBe('token_rate');
  });

  it('says a key rate above the account\'s in the owner\'s words; other messages as they are', () => {
    expect(rateRefusalWords("Rate 1000/m exceeds the account's rate 10/s; an owner sets a key's rate within its account's")).toBe(
      'Your account allows at most 10/s: choose a request rate within it (1000/m is more).',
    );
    expect(rateRefusalWords("token rate 9/s exceeds the account's token rate 5/s; an owner sets a key's token rate within its account's")).toBe(
      'Your account allows at most 5/s: choose a token rate within it (9/s is more).',
    );
    expect(rateRefusalWords('name must have 1 to 128 characters')).toBe('name must have 1 to 128 characters');
  });
});

describe('CSV', () => {
  it('quotes per RFC 4180 and defuses spreadsheet formulas', () => {
    expect(csvLine(['a', 1, null, 'b,c', 'say "hi"'])).toBe('a,1,,"b,c","say ""hi"""');
    expect(csvLine(['=HYPERLINK("x")', '+1', '@a', '-x'])).toBe(`"'=HYPERLINK(""x"")",'+1,'@a,'-x`);
    expect(csvLine([-5, '-5.000000'])).toBe('-5,-5.000000');
  });
});

describe('rate text (the form and the server share one rule)', () => {
  const cases = ['5/s', '1000/m', '1/h', '7/d', '1000000000/s', '1000000001/s', '1000000000000/h', '1000000000001/h', '0/s', '05/s', '5/x', '5/sec', '5 /s', '5', '/s', '-1/s', '1.5/s', '5/S'];
  it('refuses exactly what the server refuses (empty = no rate)', () => {
    for (const kind of ['requests', 'tokens'] as const) {
      for (const t of cases) expect(rateProblem(t, kind) === null, `${kind} ${t}`).toBe(!('error' in serverRate(t, kind)));
      expect(rateProblem('', kind)).toBeNull();
    }
  });
  it('says what is wrong in words', () => {
    expect(rateProblem('5/x', 'requests')).toBe('Write requests per unit as N/UNIT, like 5/s or 1000/m (unit s, m, h or d). Empty has no limit.');
    expect(rateProblem('1000000001/s', 'requests')).toBe('Use at most 1,000,000,000 requests per window.');
    expect(rateProblem('0/s', 'requests')).toBe('Use at least 1 request per window. Empty has no limit.');
    expect(rateProblem('-5/m', 'requests')).toBe('Use at least 1 request per window. Empty has no limit.');
    expect(rateProblem('0/h', 'tokens')).toBe('Use at least 1 token per window. Empty has no limit.');
  });
});

describe('a rate in words (the Rates column)', () => {
  it('says one request, many tokens', () => {
    expect(rateWords(1, 'request', 'second')).toBe('1 request per second');
    expect(rateWords(3, 'request', 'second')).toBe('3 requests per second');
    expect(rateWords(1, 'token', 'minute')).toBe('1 token per minute');
    expect(rateWords(5000, 'token', 'day')).toBe(`${(5000).toLocaleString()} tokens per day`);
  });

  it("the window's use after it, only when the API gave one", () => {
    expect(useWords({ used: 0 })).toBe(' (0 used this window)');
    expect(useWords({ used: 12345 })).toBe(` (${(12345).toLocaleString()} used this window)`);
    expect(useWords({ used: 26, held: 0 })).toBe(' (26 used this window)');
    expect(useWords({ used: 26, held: 25 })).toBe(' (26 used this window, up to 25 of them reserved ahead by sidecars)');
    expect(useWords(null)).toBe('');
    expect(useWords(undefined)).toBe('');
  });
});
