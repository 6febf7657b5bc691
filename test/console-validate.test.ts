/** Console input rules: model patterns, names, ISO-8601 expiry, ids. */
import { describe, expect, it } from 'vitest';
import { ConsoleError } from '../src/console/errors.ts';
import {
  parseIsoInstant,
  parseModelList,
  validateAccountId,
  validateExpiry,
  validateKeyId,
  validateModelPattern,
  validateModels,
  validateName,
} from '../src/console/validate.ts';
import { modelAllowed } from '../src/core/model/index.ts';

const invalid = (fn: () => unknown, msg: RegExp) => {
  expect(fn).toThrow(ConsoleError);
  expect(fn).toThrow(msg);
};

describe('model patterns', () => {
  it.each([
    ['*', '*'],
    ['openai/*', 'openai/*'],
    ['OpenAI/GPT-4o', 'openai/gpt-4o'],
    [' anthropic/claude-3-5-sonnet-20241022 ', 'anthropic/claude-3-5-sonnet-20241022'],
    ['google/gemini-2.0-flash', 'google/gemini-2.0-flash'],
    ['openai/ft:gpt-4o-mini:acme:custom:abc123', 'openai/ft:gpt-4o-mini:acme:custom:abc123'],
    ['openrouter/meta-llama/llama-3-70b', 'openrouter/meta-llama/llama-3-70b'],
    ['bedrock/anthropic.claude-v2@2023', 'bedrock/anthropic.claude-v2@2023'],
    ['GPT-4o', 'gpt-4o'], // a bare name: matches exactly that unqualified name
  ])('%s is valid, stored as %s', (input, stored) => {
    expect(validateModelPattern(input)).toBe(stored);
  });

  it.each([
    ['', /empty/],
    ['   ', /empty/],
    ['gpt*', /"\*" only/],
    ['openai/', /model name/],
    ['/gpt-4o', /provider/],
    ['openai/gpt*', /"\*" only/],
    ['openai/*/x', /"\*" only/],
    ['*/gpt-4o', /provider/],
    ['openai//gpt', /model name/],
    ['openai/../gpt', /model name/],
    ['openai/gpt 4', /model name/],
    ['open ai/gpt', /provider/],
    ['openai/gpt-4o/', /model name/],
    ['openai/gpt%20', /model name/],
    ['openai/gpt-4ö', /model name/],
    [`openai/${'a'.repeat(250)}`, /longer than 256/],
  ])('%j is refused', (input, msg) => invalid(() => validateModelPattern(input), msg));

  it('every valid stored pattern matches what the sidecar matches (case-insensitive)', () => {
    expect(modelAllowed([validateModelPattern('OpenAI/*')], 'openai/GPT-4o', 'openai')).toBe(true);
    expect(modelAllowed([validateModelPattern('Anthropic/Claude-3-Opus')], 'claude-3-opus', 'anthropic')).toBe(true);
  });

  it('lists: dedupe, at least one, at most 100, null = all, a list with * = all', () => {
    expect(validateModels(['openai/*', 'OPENAI/*', 'google/gemini-pro'])).toEqual(['openai/*', 'google/gemini-pro']);
    expect(validateModels(null)).toBeNull();
    expect(validateModels(['openai/gpt-4o', '*'])).toBeNull();
    invalid(() => validateModels([]), /at least one/);
    invalid(() => validateModels(Array.from({ length: 101 }, (_, i) => `p/m${i}`)), /at most 100/);
    expect(validateModels(Array.from({ length: 100 }, (_, i) => `p/m${i}`))).toHaveLength(100);
    invalid(() => parseModelList('openai/*,,google/*'), /empty entry/);
    expect(parseModelList('openai/*,google/*')).toEqual(['openai/*', 'google/*']);
  });
});

describe('names', () => {
  it('trims and accepts up to 128 characters, including non-ASCII', () => {
    expect(validateName('  CI key  ')).toBe('CI key');
    expect(validateName('é'.repeat(128))).toHaveLength(128);
    expect(validateName('🔑'.repeat(128))).toBe('🔑'.repeat(128));
  });
  it.each([
    ['', /empty/],
    ['   ', /empty/],
    ['x'.repeat(129), /longer than 128/],
    ['a\nb', /control/],
    ['a\u202eb', /bidirectional/],
    ['tab\there', /control/],
  ])('%j is refused', (n, msg) => invalid(() => validateName(n), msg));
});

describe('expiry', () => {
  const now = Date.UTC(2026, 0, 1);
  it.each([
    ['2027-03-04', Date.UTC(2027, 2, 4)],
    ['2027-03-04T05:06:07Z', Date.UTC(2027, 2, 4, 5, 6, 7)],
    ['2027-03-04T05:06:07.250Z', Date.UTC(2027, 2, 4, 5, 6, 7, 250)],
    ['2027-03-04T05:06+02:00', Date.UTC(2027, 2, 4, 3, 6)],
    ['2027-03-04 05:06:07-05:30', Date.UTC(2027, 2, 4, 10, 36, 7)],
  ])('%s → %d', (s, ms) => {
    expect(parseIsoInstant(s)).toBe(ms);
    expect(validateExpiry(s, now)).toBe(ms);
  });
  it.each([
    ['tomorrow', /not an ISO-8601/],
    ['2027-03-04T05:06:07', /with a zone/],
    ['2027-02-29', /real calendar date/],
    ['2027-13-01', /real calendar date/],
    ['2027-03-04T24:00:00Z', /real calendar date/],
    ['03/04/2027', /not an ISO-8601/],
    ['2027-03-04T05:06:07+0200', /not an ISO-8601/],
  ])('%j is refused', (s, msg) => invalid(() => validateExpiry(s, now), msg));
  it('must be in the future; the instant itself counts as past', () => {
    invalid(() => validateExpiry('2025-12-31', now), /not in the future/);
    invalid(() => validateExpiry(now, now), /not in the future/);
    expect(validateExpiry(now + 1, now)).toBe(now + 1);
    invalid(() => validateExpiry(Number.NaN, now), /not a valid instant/);
    invalid(() => validateExpiry(new Date('x'), now), /not a valid instant/);
  });
});

describe('ids', () => {
  it('key and account ids', () => {
    expect(validateKeyId('key_AAAAAAAAAAAAAAAAAAAA')).toBe('key_AAAAAAAAAAAAAAAAAAAA');
    invalid(() => validateKeyId('key_short'), /key id "key_short" is invalid/);
    expect(validateAccountId('acct-1@org.example:7')).toBe('acct-1@org.example:7');
    invalid(() => validateAccountId('-leading'), /account id/);
    invalid(() => validateAccountId('a'.repeat(129)), /account id/);
  });
});
