/**
 * The positive rule for restricted keys (docs/models.md, "Known endpoints"): one test per way a
 * router behind the gateway can run another model than the one keygate read — a `model` query
 * parameter, an Azure-style or legacy path, a version-less Gemini path, a comma-separated list, a
 * decoy `model` on an endpoint that takes none — and the name rule. Each attack must be refused
 * with a message naming the rule, and the plain forms must still pass.
 */
import { describe, expect, it } from 'vitest';
import type { Family } from '../../src/core/families/index.ts';
import { compileModelEndpoints, readModel, type ModelRead } from '../../src/core/model/index.ts';

const json = (model: unknown, extra: Record<string, unknown> = {}) => JSON.stringify({ ...extra, model, messages: [] });

function read(family: Family, method: string, path: string, body?: string, contentType = 'application/json', extra?: string): ModelRead {
  return readModel({
    family,
    method,
    path,
    contentType: body === undefined ? undefined : contentType,
    body,
    bodyTruncated: false,
    ...(extra === undefined ? {} : { endpoints: compileModelEndpoints(extra) }),
  });
}

const refusedWith = (r: ModelRead, words: RegExp) => {
  expect(r.kind, JSON.stringify(r)).toBe('uncertain');
  if (r.kind === 'uncertain') expect(r.reason).toMatch(words);
};
const model = (r: ModelRead, m: string) => expect(r).toEqual({ kind: 'model', model: m });

describe('attack: a `model` query parameter that a router lets override the body', () => {
  it('refuses a query model that differs from the body model', () => {
    refusedWith(read('openai', 'POST', '/v1/chat/completions?model=openai/gpt-4.5', json('openai/gpt-4o-mini')), /query/);
  });
  it('refuses look-alike query names (Model, model[], percent-encoded)', () => {
    for (const q of ['Model=x', 'model%5B%5D=x', 'model[]=x', '%6Dodel=x', 'MODEL=x']) {
      refusedWith(read('openai', 'POST', `/v1/chat/completions?${q}`, json('gpt-4o-mini')), /query/);
    }
  });
  it('refuses a query model on a Gemini path that differs from the path', () => {
    refusedWith(read('google', 'POST', '/v1beta/models/gemini-2.0-flash:generateContent?model=gemini-2.5-pro', '{}'), /query/);
  });
  it('accepts a query model identical to the body model, and unrelated query parameters', () => {
    model(read('openai', 'POST', '/v1/chat/completions?model=gpt-4o-mini', json('gpt-4o-mini')), 'gpt-4o-mini');
    model(read('google', 'POST', '/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse&key=k', '{}'), 'gemini-2.0-flash');
  });
});

describe('attack: Azure-style /openai/deployments/{model}/… where the path wins', () => {
  it('reads the model from the path', () => {
    model(read('openai', 'POST', '/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-06-01', '{"messages":[]}'), 'gpt-4o-mini');
  });
  it('refuses a body model that differs from the path model', () => {
    refusedWith(read('openai', 'POST', '/openai/deployments/gpt-4.5/chat/completions', json('gpt-4o-mini')), /path/);
  });
  it('accepts a body model identical to the path model', () => {
    model(read('openai', 'POST', '/openai/deployments/gpt-4o-mini/embeddings', json('gpt-4o-mini')), 'gpt-4o-mini');
  });
});

describe('attack: legacy /engines/{model}/… where the path wins', () => {
  it('refuses a body model that differs from the path model', () => {
    refusedWith(read('openai', 'POST', '/v1/engines/gpt-4.5/completions', json('gpt-4o-mini')), /path/);
  });
  it('reads the path model', () => {
    model(read('openai', 'POST', '/engines/davinci-002/completions', '{"prompt":"x"}'), 'davinci-002');
  });
});

describe('attack: a version-less Gemini path /models/{model}:generateContent at any entry', () => {
  it('refuses it at an OpenAI entry whatever the body says', () => {
    refusedWith(read('openai', 'POST', '/models/gemini-2.5-pro:generateContent', json('gpt-4o-mini')), /endpoint/);
  });
  it('refuses it at an Anthropic entry', () => {
    refusedWith(read('anthropic', 'POST', '/models/gemini-2.5-pro:generateContent', json('claude-3-5-haiku-latest')), /endpoint/);
  });
  it('refuses it at a Google entry under an operator prefix that is not a version', () => {
    refusedWith(read('google', 'POST', '/gemini/models/gemini-2.5-pro:generateContent', '{}'), /endpoint/);
  });
  it('still reads the versioned form, under an operator prefix too', () => {
    model(read('google', 'POST', '/gemini/v1beta/models/gemini-2.0-flash:generateContent', '{}'), 'gemini-2.0-flash');
  });
});

describe('attack: a comma-separated model that a router splits and runs every name of', () => {
  it('refuses a comma in the body model', () => {
    refusedWith(read('openai', 'POST', '/v1/chat/completions', json('gpt-4o-mini,openai/gpt-4.5')), /model name/);
  });
  it('refuses a comma in a path model', () => {
    refusedWith(read('google', 'POST', '/v1beta/models/gemini-2.0-flash,gemini-2.5-pro:generateContent', '{}'), /model name|path/);
  });
  it('refuses the other characters outside [A-Za-z0-9._:@/-]', () => {
    for (const m of ['gpt 4o', 'gpt-4o+x', 'gpt=4o', 'gpt~4o', 'gpt%2C4o', 'gpt*', 'gpt\u0001', 'x'.repeat(257)]) {
      refusedWith(read('openai', 'POST', '/v1/chat/completions', json(m)), /model name/);
    }
    model(read('openai', 'POST', '/v1/chat/completions', json('x'.repeat(256))), 'x'.repeat(256));
  });
});

describe('attack: a decoy top-level `model` on an endpoint that takes no model', () => {
  for (const [method, path] of [
    ['POST', '/v1/batches'],
    ['POST', '/v1/files'],
    ['GET', '/v1/files/file-abc/content'],
    ['POST', '/v1/fine_tuning/jobs'],
    ['POST', '/v1/messages/batches'],
    ['GET', '/v1/models'],
    ['POST', '/v1/vector_stores'],
  ] as const) {
    it(`${method} ${path}: refused as an endpoint that takes no model`, () => {
      refusedWith(read('openai', method, path, json('gpt-4o-mini')), /takes no model/);
    });
  }
  it('refuses an endpoint keygate does not know, saying so', () => {
    refusedWith(read('openai', 'POST', '/v1/some/new/thing', json('gpt-4o-mini')), /endpoint keygate does not know/);
  });
});

describe('known endpoints still pass', () => {
  it('OpenAI, Anthropic, Google forms', () => {
    model(read('openai', 'POST', '/v1/chat/completions', json('openai/gpt-4o-mini')), 'openai/gpt-4o-mini');
    model(read('openai', 'POST', '/chat/completions', json('gpt-4o-mini')), 'gpt-4o-mini');
    model(read('anthropic', 'POST', '/v1/messages?beta=true', json('claude-3-5-haiku-latest')), 'claude-3-5-haiku-latest');
    model(read('openai', 'GET', '/v1/models/openai%2Fgpt-4o'), 'openai/gpt-4o');
    model(read('google', 'POST', '/v1beta/openai/chat/completions', json('gemini-2.0-flash')), 'gemini-2.0-flash');
  });
});

describe('operator endpoints (KEYGATE_MODEL_ENDPOINTS)', () => {
  it('an added path route reads the model where the route says, and keeps the other rules', () => {
    const extra = 'openai:POST:/custom/{model}/run,anthropic:POST:/v1/messages/stream';
    model(read('openai', 'POST', '/custom/gpt-4o-mini/run', '{}', 'application/json', extra), 'gpt-4o-mini');
    refusedWith(read('openai', 'POST', '/custom/gpt-4o-mini/run', json('gpt-4.5'), 'application/json', extra), /path/);
    model(read('anthropic', 'POST', '/v1/messages/stream', json('claude-3-5-haiku-latest'), 'application/json', extra), 'claude-3-5-haiku-latest');
    refusedWith(read('openai', 'POST', '/custom/gpt-4o-mini/run', '{}'), /endpoint keygate does not know/);
  });
  it('rejects malformed tables with a reason', () => {
    for (const bad of ['openai:POST', 'nope:POST:/x', 'openai:FETCH:/x', 'openai:POST:x', 'openai:POST:/a/{model}/{model}', 'openai:POST:/a//b', 'openai:POST:/a/models/b']) {
      expect(() => compileModelEndpoints(bad), bad).toThrow(/./);
    }
  });
});
