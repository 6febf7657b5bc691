/** Every path form that names a model (src/core/model/path.ts), and every way to make one ambiguous. */
import { describe, expect, it } from 'vitest';
import type { Family } from '../../src/core/families/index.ts';
import { readPathModel } from '../../src/core/model/path.ts';

const read = (family: Family, method: string, path: string) => readPathModel(family, method, path);

describe('Google paths', () => {
  it.each([
    ['Gemini v1beta', '/v1beta/models/gemini-2.0-flash:generateContent', 'gemini-2.0-flash'],
    ['Gemini v1', '/v1/models/gemini-1.5-pro:generateContent', 'gemini-1.5-pro'],
    ['Gemini v1alpha', '/v1alpha/models/gemini-2.0-flash-thinking-exp:generateContent', 'gemini-2.0-flash-thinking-exp'],
    ['streaming with alt=sse', '/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse', 'gemini-2.0-flash'],
    ['countTokens', '/v1beta/models/gemini-2.0-flash:countTokens', 'gemini-2.0-flash'],
    ['embedContent', '/v1beta/models/text-embedding-004:embedContent', 'text-embedding-004'],
    ['batchEmbedContents', '/v1beta/models/text-embedding-004:batchEmbedContents', 'text-embedding-004'],
    ['predictLongRunning', '/v1beta/models/veo-2.0-generate-001:predictLongRunning', 'veo-2.0-generate-001'],
    ['query with a key parameter', '/v1beta/models/gemini-2.0-flash:generateContent?key=abc&alt=json', 'gemini-2.0-flash'],
    ['operator prefix', '/gemini/v1beta/models/gemini-2.0-flash:generateContent', 'gemini-2.0-flash'],
    ['Vertex with project and location', '/v1/projects/my-proj-123/locations/us-central1/publishers/google/models/gemini-2.0-flash-001:generateContent', 'gemini-2.0-flash-001'],
    ['Vertex streaming', '/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse', 'gemini-2.5-pro'],
    ['Vertex v1beta1', '/v1beta1/projects/p/locations/europe-west4/publishers/google/models/gemini-2.0-flash:countTokens', 'gemini-2.0-flash'],
    ['Vertex express (no project/location)', '/v1/publishers/google/models/gemini-2.0-flash:generateContent', 'gemini-2.0-flash'],
    ['Vertex partner model keeps its publisher', '/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-5-sonnet-v2@20241022:rawPredict', 'anthropic/claude-3-5-sonnet-v2@20241022'],
    ['Vertex partner streaming', '/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-5-haiku@20241022:streamRawPredict', 'anthropic/claude-3-5-haiku@20241022'],
  ])('%s', (_n, path, model) => {
    expect(read('google', 'POST', path)).toEqual({ kind: 'model', model, form: 'method' });
  });

  it.each([
    ['model resource', 'GET', '/v1beta/models/gemini-2.0-flash', 'gemini-2.0-flash'],
    ['Vertex model resource', 'GET', '/v1/publishers/google/models/gemini-2.0-flash', 'gemini-2.0-flash'],
    ['long-running operation of a model', 'GET', '/v1beta/models/veo-2.0-generate-001/operations/abc123', 'veo-2.0-generate-001'],
  ])('%s (%s)', (_n, method, path, model) => {
    expect(read('google', method, path)).toEqual({ kind: 'model', model, form: 'resource' });
  });

  it.each([
    ['listing', 'GET', '/v1beta/models'],
    ['files', 'POST', '/upload/v1beta/files'],
    ['cached contents', 'POST', '/v1beta/cachedContents'],
    ['tuned models', 'POST', '/v1beta/tunedModels/my-tune:generateContent'],
    ['OpenAI-compatible endpoint', 'POST', '/v1beta/openai/chat/completions'],
    ['model resource written to', 'POST', '/v1beta/models/gemini-2.0-flash'],
  ])('no path model: %s', (_n, method, path) => {
    expect(read('google', method, path)).toEqual({ kind: 'none' });
  });

  it.each([
    ['dot-dot segment', '/v1beta/models/gemini-2.0-flash:generateContent/../../models/gemini-ultra:generateContent'],
    ['dot-dot before models', '/v1beta/x/../models/gemini-2.0-flash:generateContent'],
    ['dot segment', '/v1beta/./models/gemini-2.0-flash:generateContent'],
    ['repeated slash', '/v1beta//models/gemini-2.0-flash:generateContent'],
    ['trailing slash', '/v1beta/models/gemini-2.0-flash:generateContent/'],
    ['encoded slash', '/v1beta/models/gemini-2.0-flash%2F..%2Fgemini-ultra:generateContent'],
    ['encoded colon', '/v1beta/models/gemini-ultra%3AgenerateContent:generateContent'],
    ['encoded dot segment', '/v1beta/%2e%2e/models/gemini-2.0-flash:generateContent'],
    ['any percent-encoding', '/v1beta/models/gemini%2D2.0-flash:generateContent'],
    ['encoded models segment', '/v1beta/mod%65ls/gemini-ultra:generateContent'],
    ['upper-case models segment', '/v1beta/Models/gemini-ultra:generateContent'],
    ['two models segments', '/v1beta/models/gemini-2.0-flash/models/gemini-ultra:generateContent'],
    ['backslash', '/v1beta/models\\gemini-ultra:generateContent'],
    ['matrix parameter', '/v1beta/models;x=1/gemini-2.0-flash:generateContent'],
    ['two colons', '/v1beta/models/gemini-ultra:generateContent:generateContent'],
    ['model with a slash part', '/v1beta/models/gemini-2.0-flash/extra:generateContent'],
    ['empty model', '/v1beta/models/:generateContent'],
    ['space', '/v1beta/models/gemini 2:generateContent'],
    ['non-ASCII', '/v1beta/models/gemini-ü:generateContent'],
    ['unknown segment before models', '/v1beta/foo/models/gemini-2.0-flash:generateContent'],
    ['relative path', 'v1beta/models/gemini-2.0-flash:generateContent'],
  ])('ambiguous: %s', (_n, path) => {
    expect(read('google', 'POST', path).kind).toBe('refused');
  });
});

describe('OpenAI and Anthropic model resources', () => {
  it.each([
    ['openai', 'GET', '/v1/models/gpt-4o', 'gpt-4o'],
    ['openai', 'GET', '/v1/models/openai/gpt-4o', 'openai/gpt-4o'],
    ['openai', 'GET', '/v1/models/openai%2Fgpt-4o', 'openai/gpt-4o'],
    ['openai', 'GET', '/v1/models/openai%2fgpt-4o?x=1', 'openai/gpt-4o'],
    ['openai', 'DELETE', '/v1/models/ft:gpt-4o-mini:acme::abc123', 'ft:gpt-4o-mini:acme::abc123'],
    ['openai', 'GET', '/openai/v1/models/gpt-4o', 'gpt-4o'],
    ['anthropic', 'GET', '/v1/models/claude-3-5-haiku-latest', 'claude-3-5-haiku-latest'],
  ])('%s %s %s', (family, method, path, model) => {
    expect(read(family as Family, method, path)).toEqual({ kind: 'model', model, form: 'resource' });
  });

  it.each([
    ['listing', 'GET', '/v1/models'],
    ['chat completions', 'POST', '/v1/chat/completions'],
    ['messages', 'POST', '/v1/messages'],
    ['POST to a model resource reads the body', 'POST', '/v1/models/gpt-4o'],
    ['models not under v1', 'GET', '/v1/organization/models/x'],
  ])('no path model: %s', (_n, method, path) => {
    expect(read('openai', method, path)).toEqual({ kind: 'none' });
  });

  it.each([
    ['encoded dot-dot', '/v1/models/openai%2F..%2F..%2Fchat'],
    ['encoded dot-dot segment', '/v1/models/%2e%2e'],
    ['double encoding', '/v1/models/openai%252Fgpt-4o'],
    ['malformed escape', '/v1/models/gpt%2'],
    ['encoded space', '/v1/models/gpt-4o%20'],
    ['encoded question mark', '/v1/models/gpt-4o%3Fx'],
    ['repeated slash in the model', '/v1/models/openai//gpt-4o'],
    ['percent in the prefix', '/v%31/models/gpt-4o'],
    ['dot-dot', '/v1/models/../models/gpt-4o'],
  ])('ambiguous: %s', (_n, path) => {
    expect(read('openai', 'GET', path).kind).toBe('refused');
  });

  it('a Gemini-shaped call at a non-Google entry is refused, not read from the body', () => {
    expect(read('openai', 'POST', '/v1beta/models/gemini-ultra:generateContent')).toEqual({ kind: 'refused', refusal: 'google-path-on-other-entry' });
    expect(read('anthropic', 'POST', '/v1/publishers/google/models/gemini-ultra:generateContent')).toEqual({
      kind: 'refused',
      refusal: 'google-path-on-other-entry',
    });
  });
});
