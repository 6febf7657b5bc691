/**
 * The endpoint catalog and the endpoint rule (docs/endpoints.md) on the unit tier: classification of
 * every builtin row (bare and behind its entry prefix), unknown paths, the body-reference scanner, and
 * the rule's place and answers in the pipeline over in-memory records.
 */
import { describe, expect, it } from 'vitest';
import { DENY_STATUS } from '../../src/core/codes.ts';
import { BUILTIN_CATALOGS, EndpointCatalog } from '../../src/core/endpoints/catalog.ts';
import { ENDPOINT_MESSAGES } from '../../src/core/endpoints/decision.ts';
import { scanReferences } from '../../src/core/endpoints/references.ts';
import { generateKey } from '../../src/core/key-format.ts';
import { schema } from '../../src/schema/redis-schema.ts';
import { authorizer, input, MemoryKeyStore } from './memory-store.ts';

const catalog = new EndpointCatalog();
const s = schema();

/** A concrete path for a template. */
function sample(template: string): string {
  return template
    .replace(/\{id\}/g, 'obj_123')
    .replace(/\{model\}/g, 'some-model')
    .replace(/\{version\}/g, 'v1beta')
    .replace(/\{\*\*\}/g, 'a/b');
}

describe('the builtin catalog', () => {
  for (const c of BUILTIN_CATALOGS) {
    it(`${c.family}: every row classifies its own sample path, bare and behind /${c.family}`, () => {
      expect(c.rows.length).toBeGreaterThan(10);
      const wrong: string[] = [];
      for (const r of c.rows) {
        const p = sample(r.path);
        for (const path of [p, `/${c.family}${p}`, `${p}?x=1`]) {
          const got = catalog.classify(c.family, r.method, path);
          if (got?.entry.row !== r) wrong.push(`${r.method} ${path} → ${got ? `${got.entry.row.method} ${got.entry.row.path}` : 'unknown'}`);
        }
      }
      expect(wrong).toEqual([]);
    });
  }

  const cases: Array<[string, string, string, string | null]> = [
    ['openai', 'POST', '/openai/v1/chat/completions', 'metered'],
    ['openai', 'POST', '/v1/responses', 'metered'],
    ['openai', 'GET', '/openai/v1/responses/resp_abc', 'owned'],
    ['openai', 'GET', '/openai/v1/responses/resp_abc?stream=true&starting_after=3', 'owned'],
    ['openai', 'POST', '/openai/v1/responses/resp_abc/cancel', 'owned'],
    ['openai', 'DELETE', '/openai/v1/responses/resp_abc', 'owned'],
    ['openai', 'GET', '/openai/v1/responses/resp_abc/input_items', 'owned'],
    ['openai', 'POST', '/openai/v1/responses/input_tokens', 'free'],
    ['openai', 'GET', '/openai/v1/models', 'free'],
    ['openai', 'HEAD', '/openai/v1/models', 'free'],
    ['openai', 'GET', '/openai/v1/files', 'stateful'],
    ['openai', 'GET', '/openai/v1/files/file-abc/content', 'stateful'],
    ['openai', 'GET', '/openai/v1/chat/completions', 'stateful'],
    ['openai', 'GET', '/openai/v1/chat/completions/chatcmpl-1', 'stateful'],
    ['openai', 'POST', '/openai/v1/batches', 'unbillable'],
    ['openai', 'GET', '/openai/v1/batches/batch_1', 'stateful'],
    ['openai', 'POST', '/openai/v1/fine_tuning/jobs', 'unbillable'],
    ['openai', 'POST', '/openai/v1/fine_tuning/jobs/ftjob-1/cancel', 'stateful'],
    ['openai', 'POST', '/openai/v1/audio/speech', 'unbillable'],
    ['openai', 'POST', '/openai/v1/images/generations', 'metered'],
    ['openai', 'POST', '/openai/openai/deployments/gpt4/chat/completions', 'metered'],
    ['openai', 'POST', '/openai/deployments/gpt4/chat/completions', 'metered'],
    ['openai', 'GET', '/openai/v1/models/ft%3Agpt-4o%3Aorg', 'free'],
    ['openai', 'POST', '/openai/v1/messages', null], // another family's path at this entry
    ['openai', 'GET', '/openai/v1/nothing', null],
    ['openai', 'POST', '/openai/v1/chat/completions/', null],
    ['openai', 'POST', '/openai/v1//chat/completions', null],
    ['openai', 'POST', '/openai/v1/./chat/completions', null],
    ['openai', 'GET', '/openai/v1/files/..', null],
    ['openai', 'GET', '/openai/v1/responses/resp%2F..%2Fx', null],
    ['openai', 'PUT', '/openai/v1/chat/completions', null],
    ['openai', 'POST', '/anthropic/v1/chat/completions', null],
    ['anthropic', 'POST', '/anthropic/v1/messages', 'metered'],
    ['anthropic', 'POST', '/anthropic/v1/messages/count_tokens', 'free'],
    ['anthropic', 'POST', '/anthropic/v1/messages/batches', 'unbillable'],
    ['anthropic', 'GET', '/anthropic/v1/messages/batches/msgbatch_1/results', 'stateful'],
    ['anthropic', 'GET', '/anthropic/v1/files', 'stateful'],
    ['anthropic', 'GET', '/anthropic/v1/models/claude-sonnet-4-5', 'free'],
    ['anthropic', 'POST', '/anthropic/v1/complete', 'unbillable'],
    ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:generateContent', 'metered'],
    ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse', 'metered'],
    ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:countTokens', 'free'],
    ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:batchGenerateContent', 'unbillable'],
    ['google', 'POST', '/google/v1beta/models/gemini-embedding-001:embedContent', 'unbillable'],
    ['google', 'POST', '/google/v1beta/models/gemini-2.5-flash:somethingNew', null],
    ['google', 'GET', '/google/v1beta/files', 'stateful'],
    ['google', 'GET', '/google/v1beta/cachedContents/abc', 'stateful'],
    ['google', 'POST', '/google/upload/v1beta/files', 'stateful'],
    ['google', 'GET', '/google/v1beta/models', 'free'],
    ['google', 'POST', '/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent', 'metered'],
    ['google', 'POST', '/v1/projects/p/locations/us-central1/batchPredictionJobs', 'stateful'],
    ['google', 'POST', '/google/v1beta/openai/chat/completions', 'metered'],
  ];
  for (const [family, method, path, cls] of cases) {
    it(`${family} ${method} ${path} → ${cls ?? 'unknown'}`, () => {
      const got = catalog.classify(family as 'openai', method, path);
      expect(got === null ? null : got.entry.row.class).toBe(cls);
    });
  }

  it('the memo answers as the catalog does, past its bound, and for methods it does not keep', () => {
    const c = new EndpointCatalog();
    for (let i = 0; i < 3000; i++) {
      const p = `/openai/v1/responses/resp_${i}`;
      expect(c.classify('openai', 'GET', p)).toEqual(catalog.classify('openai', 'GET', p));
      expect(c.classify('openai', 'GET', p)?.id).toBe(`resp_${i}`);
    }
    expect(c.classify('openai', 'POST', '/openai/v1/chat/completions')?.entry.row.class).toBe('metered');
    expect(c.classify('openai', 'POST', '/openai/v1/chat/completions')?.entry.row.class).toBe('metered');
    expect(c.classify('openai', 'FETCH', '/openai/v1/chat/completions')).toBeNull();
    expect(c.classify('openai', 'GET', `/openai/v1/responses/${'r'.repeat(300)}`)?.id).toBe('r'.repeat(300));
  });

  it('an owned row carries the object id', () => {
    expect(catalog.classify('openai', 'POST', '/openai/v1/responses/resp_1/cancel')?.id).toBe('resp_1');
  });

  it('an operator row adds a path, and replaces a builtin row of the same method and template', () => {
    const c = new EndpointCatalog([
      { family: 'openai', method: 'POST', path: '/v1/custom/run', class: 'metered', model: 'body', usage: 'chat' },
      { family: 'openai', method: 'GET', path: '/v1/files', class: 'free', model: 'none', usage: null },
    ]);
    expect(c.classify('openai', 'POST', '/openai/v1/custom/run')?.entry.row.class).toBe('metered');
    expect(c.classify('openai', 'GET', '/openai/v1/files')?.entry.row.class).toBe('free');
    expect(c.classify('openai', 'GET', '/openai/v1/files/x')?.entry.row.class).toBe('stateful');
    expect(c.rows().filter((r) => r.family === 'openai' && r.row.method === 'GET' && r.row.path === '/v1/files')).toHaveLength(1);
    expect(catalog.classify('openai', 'POST', '/openai/v1/custom/run')).toBeNull();
  });

  it('an operator prefix (KEYGATE_PATH_PREFIXES) is stripped like the entry name', () => {
    const c = new EndpointCatalog([], [{ prefix: '/llm/oai/', family: 'openai' }]);
    expect(c.classify('openai', 'GET', '/llm/oai/v1/files')?.entry.row.class).toBe('stateful');
    expect(catalog.classify('openai', 'GET', '/llm/oai/v1/files')).toBeNull();
  });

  it('a bad template is refused with its reason', () => {
    expect(() => new EndpointCatalog([{ family: 'openai', method: 'GET', path: 'v1/x', class: 'free', model: 'none', usage: null }])).toThrow(/must start with/);
    expect(() => new EndpointCatalog([{ family: 'openai', method: 'GET', path: '/v1/{**}/x', class: 'free', model: 'none', usage: null }])).toThrow(/last segment/);
    expect(() => new EndpointCatalog([{ family: 'openai', method: 'GET', path: '/v1/a%2Fb', class: 'free', model: 'none', usage: null }])).toThrow(/not a literal/);
  });
});

describe('references in bodies', () => {
  const read = (v: unknown) => scanReferences(typeof v === 'string' ? v : JSON.stringify(v));
  it('finds previous_response_id, conversation and file ids at any depth', () => {
    expect(read({ model: 'm', previous_response_id: 'resp_1' })).toEqual({ kind: 'read', responses: ['resp_1'], stateful: null });
    expect(read({ conversation: 'conv_1' })).toMatchObject({ stateful: 'conversation' });
    expect(read({ conversation: { id: 'conv_1' } })).toMatchObject({ stateful: 'conversation' });
    expect(read({ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] })).toMatchObject({ stateful: 'file' });
    expect(read({ messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }] })).toMatchObject({ stateful: 'file' });
    expect(read({ tools: [{ type: 'code_interpreter', container: { type: 'auto', file_ids: ['file-1'] } }] })).toMatchObject({ stateful: 'file' });
    expect(read({ tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] })).toMatchObject({ stateful: 'vector store' });
    expect(read({ prompt: { id: 'pmpt_1' } })).toMatchObject({ stateful: 'stored prompt' });
    expect(read({ messages: [{ content: [{ type: 'document', source: { type: 'file', file_id: 'file_1' } }] }] })).toMatchObject({ stateful: 'file' });
    expect(read({ contents: [{ parts: [{ fileData: { fileUri: 'https://generativelanguage.googleapis.com/v1beta/files/abc' } }] }] })).toMatchObject({ stateful: 'file' });
    expect(read({ contents: [{ parts: [{ file_data: { file_uri: 'gs://bucket/x.pdf' } }] }] })).toMatchObject({ stateful: 'file' });
    expect(read({ cachedContent: 'cachedContents/abc' })).toMatchObject({ stateful: 'cached content' });
  });

  it('a body that names nothing reads as nothing (the control)', () => {
    expect(read({ model: 'm', input: 'file_id previous_response_id', text: { format: { type: 'text' } }, n: [1, -2.5e3, true, null] })).toEqual({ kind: 'read', responses: [], stateful: null });
    expect(read({ contents: [{ parts: [{ fileData: { fileUri: 'https://www.youtube.com/watch?v=x' } }] }] })).toMatchObject({ stateful: null });
    expect(read({ previous_response_id: null })).toMatchObject({ responses: [] });
  });

  it('a duplicate or escaped key cannot hide a reference', () => {
    expect(read('{"previous_response_id":"resp_a","previous_response_id":"resp_b"}')).toMatchObject({ responses: ['resp_a', 'resp_b'] });
    expect(read('{"previous_response_id":"resp_a","previous_response_id":null}')).toMatchObject({ responses: ['resp_a'] });
    expect(read('{"previous\\u005fresponse_id":"resp_a"}')).toMatchObject({ responses: ['resp_a'] });
    expect(read('{"input":[{"content":[{"type":"input_file","file\\u005fid":"file-1"}]}]}')).toMatchObject({ stateful: 'file' });
    expect(read('{"previous_response_id":"resp_\\u0061"}')).toMatchObject({ responses: ['resp_a'] });
  });

  it('a body it cannot read whole is unreadable', () => {
    for (const b of ['', 'not json', '{"a":1', '{"a":1}}', '{"a":1} x', '{"a":01}', '{"a":"\u0001"}', "{'a':1}", '{"a":tru}', '[1,]', '{"a" 1}', '{"a":1,}']) {
      expect(read(b), b).toMatchObject({ kind: 'unreadable' });
    }
    // strings that are not read (no reference can be in them) are still checked, long ones too
    for (const v of ['"a\\x"', '"\\u12G4"', `"${'y'.repeat(40)}\u0001"`, `"${'z'.repeat(5000)}\u001f${'z'.repeat(50)}"`, `"${'z'.repeat(5000)}`]) {
      expect(read(`{"messages":[{"content":${v}}]}`), v.slice(0, 20)).toMatchObject({ kind: 'unreadable' });
    }
    expect(read({ messages: [{ content: 'z'.repeat(70_000) + '\\"é' }], previous_response_id: 'resp_1' })).toEqual({ kind: 'read', responses: ['resp_1'], stateful: null });
    expect(read('['.repeat(600) + ']'.repeat(600))).toMatchObject({ kind: 'unreadable', reason: expect.stringMatching(/nested/) });
    expect(scanReferences(Buffer.from([0x7b, 0xff, 0x7d]))).toMatchObject({ kind: 'unreadable' });
    expect(read({ input: Array.from({ length: 9 }, (_, i) => ({ previous_response_id: `resp_${i}` })) })).toMatchObject({ kind: 'unreadable' });
  });

  it('agrees with JSON.parse on which bodies are JSON (valid cases)', () => {
    for (const v of [{}, [], '"x"', 1, null, { a: [{ b: { c: [1, 2, { d: 'e\n"\\' }] } }] }, { 'ü': 'é😀' }]) {
      expect(read(v).kind, JSON.stringify(v)).toBe('read');
    }
  });
});

describe('the endpoint rule in the pipeline', () => {
  const KEY = generateKey('kg_');
  const ID = 'key_0123456789abcdef';
  function store(o: { models?: string[] | null } = {}): MemoryKeyStore {
    const st = new MemoryKeyStore();
    st.putKey(KEY, { id: ID, account: 'acct-1', name: 'k', status: 'active', models: o.models ?? null, expiresAt: null });
    return st;
  }
  const check = (st: MemoryKeyStore, method: string, path: string, body?: string, headers: Record<string, string> = {}) =>
    authorizer(st).check(input({ authorization: `Bearer ${KEY}`, ...headers }, { method, path, body }));

  it('another account\'s response and one never recorded get the same answer; the owner passes', async () => {
    const st = store();
    st.owned.set(s.owned('openai', 'resp_mine'), { account: 'acct-1' });
    st.owned.set(s.owned('openai', 'resp_theirs'), { account: 'acct-2' });
    const theirs = (await check(st, 'GET', '/openai/v1/responses/resp_theirs')).decision;
    const never = (await check(st, 'GET', '/openai/v1/responses/resp_never')).decision;
    expect(theirs).toMatchObject({ allow: false, code: 'ENDPOINT_NOT_ALLOWED', status: 403, message: ENDPOINT_MESSAGES.owned });
    expect(never).toEqual(theirs);
    expect((await check(st, 'GET', '/openai/v1/responses/resp_mine?stream=true')).decision.allow).toBe(true);
    expect((await check(st, 'POST', '/openai/v1/responses/resp_mine/cancel')).decision.allow).toBe(true);
    expect((await check(st, 'POST', '/openai/v1/responses/resp_theirs/cancel')).decision).toEqual(theirs);
    expect((await check(st, 'DELETE', '/openai/v1/responses/resp_theirs')).decision).toEqual(theirs);
    expect((await check(st, 'GET', '/openai/v1/responses/resp_theirs/input_items')).decision).toEqual(theirs);
    // Each costs one owned lookup (the second check of an id answers from the cache).
    const before = st.ownedLookups;
    await check(st, 'GET', '/openai/v1/responses/resp_never');
    await check(st, 'GET', '/openai/v1/responses/resp_theirs');
    expect(st.ownedLookups).toBe(before);
  });

  it('a recorded object is seen at once (the cached "absent" is dropped by the write)', async () => {
    const st = store();
    expect((await check(st, 'GET', '/openai/v1/responses/resp_new')).decision.allow).toBe(false);
    st.owned.set(s.owned('openai', 'resp_new'), { account: 'acct-1' });
    expect((await check(st, 'GET', '/openai/v1/responses/resp_new')).decision.allow).toBe(true);
  });

  it('previous_response_id of another account is refused like one never recorded', async () => {
    const st = store();
    st.owned.set(s.owned('openai', 'resp_mine'), { account: 'acct-1' });
    st.owned.set(s.owned('openai', 'resp_theirs'), { account: 'acct-2' });
    const body = (id: string) => JSON.stringify({ model: 'gpt-4o', input: 'hi', previous_response_id: id });
    const theirs = (await check(st, 'POST', '/openai/v1/responses', body('resp_theirs'))).decision;
    expect(theirs).toMatchObject({ code: 'ENDPOINT_NOT_ALLOWED', message: ENDPOINT_MESSAGES.owned });
    expect((await check(st, 'POST', '/openai/v1/responses', body('resp_never'))).decision).toEqual(theirs);
    expect((await check(st, 'POST', '/openai/v1/responses', body('resp_mine'))).decision.allow).toBe(true);
    const dup = `{"model":"gpt-4o","previous_response_id":"resp_theirs","previous_response_id":"resp_mine"}`;
    expect((await check(st, 'POST', '/openai/v1/responses', dup)).decision).toEqual(theirs);
  });

  it('a file reference is refused (files are stateful: the account\'s own credential opens them)', async () => {
    const body = JSON.stringify({ model: 'gpt-4o', input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-abc' }] }] });
    expect((await check(store(), 'POST', '/openai/v1/responses', body)).decision).toMatchObject({ code: 'ENDPOINT_NOT_ALLOWED', message: ENDPOINT_MESSAGES.owned });
  });

  it('a body cut short, or declared and not sent, is USAGE_NOT_GUARANTEED', async () => {
    const st = store();
    const cut = await authorizer(st).check(input({ authorization: `Bearer ${KEY}` }, { method: 'POST', path: '/openai/v1/responses', body: '{"model":"gpt-4o"}', bodyTruncated: true }));
    expect(cut.decision).toMatchObject({ code: 'USAGE_NOT_GUARANTEED', status: DENY_STATUS.USAGE_NOT_GUARANTEED });
    expect((await check(st, 'POST', '/openai/v1/responses', undefined, { 'content-length': '120' })).decision).toMatchObject({ code: 'USAGE_NOT_GUARANTEED' });
    expect((await check(st, 'POST', '/openai/v1/responses', undefined, { 'content-length': '0' })).decision.allow).toBe(true);
  });

  it('stateful and unknown endpoints are refused for an unrestricted key, with what would open them', async () => {
    const st = store();
    expect((await check(st, 'GET', '/openai/v1/files')).decision).toMatchObject({ code: 'ENDPOINT_NOT_ALLOWED', message: ENDPOINT_MESSAGES.stateful, refusal: 'stateful' });
    expect((await check(st, 'GET', '/openai/v1/made-up')).decision).toMatchObject({ code: 'ENDPOINT_NOT_ALLOWED', message: ENDPOINT_MESSAGES.unknown, refusal: 'unknown' });
  });

  it('unbillable opens with billing external', async () => {
    const st = store();
    const batch = JSON.stringify({ endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect((await check(st, 'POST', '/openai/v1/batches', batch)).decision).toMatchObject({ code: 'ENDPOINT_NOT_ALLOWED', message: ENDPOINT_MESSAGES.unbillable });
    st.billing.set('acct-1', 'external');
    expect((await check(st, 'POST', '/openai/v1/batches', batch)).decision.allow).toBe(true);
    // …but its input file is still a stateful reference.
    expect((await check(st, 'POST', '/openai/v1/batches', JSON.stringify({ input_file_id: 'file-1' }))).decision).toMatchObject({ message: ENDPOINT_MESSAGES.owned });
    st.billing.set('acct-1', 'nonsense');
    expect((await check(st, 'POST', '/openai/v1/batches', batch)).decision).toMatchObject({ code: 'AUTH_UNAVAILABLE' });
  });

  it('comes before the model rule: a restricted key calling /v1/files gets ENDPOINT_NOT_ALLOWED', async () => {
    const st = store({ models: ['openai/gpt-4o'] });
    expect((await check(st, 'GET', '/openai/v1/files')).decision).toMatchObject({ code: 'ENDPOINT_NOT_ALLOWED' });
    expect((await check(st, 'POST', '/openai/v1/chat/completions', '{"model":"gpt-4o-mini"}')).decision).toMatchObject({ code: 'MODEL_NOT_ALLOWED' });
    expect((await check(st, 'POST', '/openai/v1/chat/completions', '{"model":"openai/gpt-4o"}')).decision.allow).toBe(true);
  });
});
