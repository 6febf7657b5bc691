/** Every row of the family rules: route protocol, then the prefix table, then the bare path. */
import { describe, expect, it } from 'vitest';
import { FAMILIES, familyFromPath, familyModule, findFamily, isFamily, resolveFamily, type Family } from '../../src/core/families/index.ts';

describe('family from a bare path', () => {
  const rows: Array<[string, Family]> = [
    ['/v1/messages', 'anthropic'],
    ['/v1/messages?beta=true', 'anthropic'],
    ['/v1/messages/count_tokens', 'anthropic'],
    ['/v1/messages/batches', 'anthropic'],
    ['/v1/complete', 'anthropic'],
    ['/v1/complete?x=1', 'anthropic'],
    ['/v1/messagesx', 'openai'],
    ['/v1/completex', 'openai'],
    ['/v2/messages', 'openai'],
    ['/v1beta', 'google'],
    ['/v1beta/models/gemini-2.0-flash:generateContent', 'google'],
    ['/v1beta/files', 'google'],
    ['/v1betax/models', 'openai'],
    ['/v1/projects/p/locations/l/publishers/google/models/gemini-2.0:streamGenerateContent', 'google'],
    ['/v1/models/gemini-pro:generateContent', 'google'],
    ['/v1/models/gpt-4o', 'openai'],
    ['/v1/models', 'openai'],
    ['/v1/chat/completions', 'openai'],
    ['/v1/chat/completions?model=x:y', 'openai'],
    ['/v1/embeddings', 'openai'],
    ['/', 'openai'],
    ['', 'openai'],
    ['/v1/messages#frag', 'anthropic'],
  ];
  for (const [path, family] of rows) {
    it(`${JSON.stringify(path)} → ${family}`, () => {
      expect(familyFromPath(path)).toBe(family);
      expect(resolveFamily(undefined, path, [])).toBe(family);
    });
  }
});

describe('precedence', () => {
  const table = [
    { prefix: '/anthropic/', family: 'anthropic' as const },
    { prefix: '/g/', family: 'google' as const },
  ];
  it('the route protocol wins over the prefix table and the path (trimmed, any case)', () => {
    expect(resolveFamily('google', '/anthropic/v1/messages', table)).toBe('google');
    expect(resolveFamily(' Anthropic ', '/v1/chat/completions', table)).toBe('anthropic');
    expect(resolveFamily('OPENAI', '/v1/messages', [])).toBe('openai');
  });
  it('an unknown or empty route protocol is ignored', () => {
    expect(resolveFamily('bedrock', '/v1/messages', [])).toBe('anthropic');
    expect(resolveFamily('', '/g/x', table)).toBe('google');
  });
  it('the first matching prefix wins over the path', () => {
    expect(resolveFamily(undefined, '/anthropic/v1/chat/completions', table)).toBe('anthropic');
    expect(resolveFamily(undefined, '/g/v1/messages', table)).toBe('google');
    expect(resolveFamily(undefined, '/v1/messages', [{ prefix: '/', family: 'google' }, ...table])).toBe('google');
  });
  it('a non-matching prefix falls through to the path', () => {
    expect(resolveFamily(undefined, '/v1/messages', table)).toBe('anthropic');
    expect(resolveFamily(undefined, '/anthropicx', table)).toBe('openai');
  });
});

describe('the registry', () => {
  it('knows each family by its name, and nothing else', () => {
    for (const f of FAMILIES) {
      expect(isFamily(f)).toBe(true);
      expect(familyModule(f).name).toBe(f);
      expect(findFamily(f)).toBe(familyModule(f));
    }
    for (const v of ['mistral', 'OpenAI', '', '__proto__', 'toString', 'constructor', 42, null, undefined]) {
      expect(isFamily(v)).toBe(false);
      if (typeof v === 'string') expect(findFamily(v)).toBeNull();
    }
  });
});
