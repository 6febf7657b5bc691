/** Allowed-model patterns (docs/models.md): validation for the console, qualification and matching. */
import { describe, expect, it } from 'vitest';
import type { Family } from '../../src/core/families/index.ts';
import { allowsEveryModel, isValidModelPattern, modelAllowed, modelPatternError, qualifyModel } from '../../src/core/model/patterns.ts';
import { couldBeReadAsModel, isValidModelName } from '../../src/core/model/names.ts';

describe('pattern validation (console side)', () => {
  it.each(['*', 'gpt-4o', 'openai/*', 'openai/gpt-4o', 'anthropic/claude-3-5-haiku-latest', 'google/gemini-2.0-flash', 'OpenAI/GPT-4o', 'together/meta-llama/Llama-3.3-70B-Instruct-Turbo', 'openai/ft:gpt-4o-mini:acme::abc', 'anthropic/claude-3-5-sonnet-v2@20241022'])(
    'valid: %s',
    (p) => {
      expect(modelPatternError(p)).toBeNull();
      expect(isValidModelPattern(p)).toBe(true);
    },
  );

  it.each([
    ['', 'is empty'],
    ['gpt 4o', 'provider/model'],
    ['gpt-4*', '"*"'],
    ['/gpt-4o', 'provider'],
    ['open ai/gpt-4o', 'provider'],
    ['openai/', 'model name'],
    ['openai/gpt-4*', '"*"'],
    ['*/gpt-4o', 'provider'],
    ['openai/**', '"*"'],
    ['openai/gpt 4o', 'model name'],
    ['openai/../anthropic/claude', 'model name'],
    ['openai//gpt-4o', 'model name'],
    [`openai/${'x'.repeat(260)}`, 'longer than'],
    [' *', '"*"'],
  ])('invalid: %j', (p, says) => {
    const err = modelPatternError(p);
    expect(err).not.toBeNull();
    expect(err).toContain(says);
  });
});

describe('qualification', () => {
  it.each([
    ['claude-3-5-haiku-latest', 'anthropic', 'anthropic/claude-3-5-haiku-latest'],
    ['Claude-3-5-Haiku-Latest', 'anthropic', 'anthropic/claude-3-5-haiku-latest'],
    ['gemini-2.0-flash', 'google', 'google/gemini-2.0-flash'],
    ['models/gemini-2.0-flash', 'google', 'google/gemini-2.0-flash'],
    ['anthropic/claude-3-5-sonnet@20240620', 'google', 'anthropic/claude-3-5-sonnet@20240620'],
    ['gpt-4o', 'openai', 'gpt-4o'],
    ['openai/gpt-4o', 'openai', 'openai/gpt-4o'],
    ['openai/gpt-4o', 'anthropic', 'openai/gpt-4o'],
    ['models/x', 'openai', 'models/x'],
  ])('%s at %s → %s', (model, family, q) => {
    expect(qualifyModel(model, family as Family)).toBe(q);
  });
});

describe('matching', () => {
  it.each([
    [['openai/gpt-4o'], 'openai/gpt-4o', 'openai', true],
    [['openai/gpt-4o'], 'OpenAI/GPT-4o', 'openai', true],
    [['OPENAI/GPT-4O'], 'openai/gpt-4o', 'openai', true],
    [['openai/gpt-4o'], 'openai/gpt-4o-mini', 'openai', false],
    [['openai/gpt-4o-mini'], 'openai/gpt-4o', 'openai', false],
    [['openai/*'], 'openai/gpt-4o', 'openai', true],
    [['openai/*'], 'openai', 'openai', false],
    [['openai/*'], 'openaix/gpt-4o', 'openai', false],
    [['openai/*'], 'gpt-4o', 'openai', false],
    [['*'], 'gpt-4o', 'openai', true],
    [['anthropic/*'], 'claude-3-5-haiku-latest', 'anthropic', true],
    [['anthropic/claude-3-5-haiku-latest'], 'claude-3-5-haiku-latest', 'anthropic', true],
    [['anthropic/claude-3-5-haiku-latest'], 'claude-3-opus-latest', 'anthropic', false],
    [['anthropic/*'], 'claude-3-5-haiku-latest', 'openai', false],
    [['anthropic/*'], 'openai/gpt-4o', 'anthropic', false],
    [['google/gemini-2.0-flash'], 'gemini-2.0-flash', 'google', true],
    [['google/gemini-2.0-flash'], 'models/gemini-2.0-flash', 'google', true],
    [['google/*'], 'gemini-2.5-pro', 'google', true],
    [['google/*'], 'anthropic/claude-3-5-sonnet@20240620', 'google', false],
    [['anthropic/*'], 'anthropic/claude-3-5-sonnet@20240620', 'google', true],
    [['gpt-4o'], 'gpt-4o', 'openai', true],
    [['gpt-4o'], 'openai/gpt-4o', 'openai', false],
    [['claude-x'], 'claude-x', 'anthropic', false],
    [['openai/gpt-4*'], 'openai/gpt-4o', 'openai', false],
    [['google/*'], 'google/../openai/gpt-4o', 'google', false],
    [['openai/*'], 'openai/gpt-4o ', 'openai', false],
    [[], 'openai/gpt-4o', 'openai', false],
  ])('%j allows %s at %s: %s', (allowed, model, family, ok) => {
    expect(modelAllowed(allowed, model, family as Family)).toBe(ok);
  });

  it('allowsEveryModel tells the console a list is equivalent to no restriction', () => {
    expect(allowsEveryModel(['openai/gpt-4o', '*'])).toBe(true);
    expect(allowsEveryModel(['openai/*'])).toBe(false);
  });
});

describe('names', () => {
  it.each(['gpt-4o', 'openai/gpt-4o', 'ft:gpt-4o-mini:acme::abc', 'meta-llama/Llama-3.3-70B-Instruct-Turbo', '@cf/meta/llama-3-8b-instruct', 'us.anthropic.claude-3-7-sonnet-20250219-v1:0'])(
    'valid model name %s',
    (m) => expect(isValidModelName(m)).toBe(true),
  );
  it.each(['', ' gpt-4o', 'gpt-4o\n', 'gpt 4o', 'gpt-4o%20', 'a/../b', 'a//b', '/a', 'a/', '.', '..', 'gpt-4o?x', 'gpt-4o#x', 'a\\b', 'gpt-4o*', 'gpt-4ö', 'x'.repeat(257), 'm\ud800', 'm\ufffd'])(
    'invalid model name %j',
    (m) => expect(isValidModelName(m)).toBe(false),
  );
  it.each(['Model', 'MODEL', 'model\u0000x', ' model', 'model\t', 'ｍｏｄｅｌ'])('%j could be read as model', (k) => expect(couldBeReadAsModel(k)).toBe(true));
  it.each(['model', 'models', 'mode', 'model_name', 'my model', 'm0del'])('%j could not', (k) => expect(couldBeReadAsModel(k)).toBe(false));
});
