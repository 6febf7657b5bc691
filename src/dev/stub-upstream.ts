/**
 * A stand-in LLM upstream: answers OpenAI chat completions, Responses (background ones too: queued,
 * then completed on a later retrieve), completions, embeddings, image generation and edits, audio
 * transcription and translation (token usage),
 * Anthropic messages and Google generateContent in each provider's response shape, enough for the
 * official SDKs to parse. `keygate dev` puts it behind its dev gateway; the tests use it as their upstream.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { listenOn } from '../lifecycle.ts';

export const UPSTREAM_TEXT = 'hello from upstream';
/**
 * The model a stub answer names for the model asked: the dated snapshot, as the real APIs answer
 * (`gpt-4o` is answered `gpt-4o-2024-08-06`, `claude-sonnet-4-5` `claude-sonnet-4-5-20250929`,
 * `gemini-2.0-flash` `gemini-2.0-flash-001`); a name not listed is answered as asked.
 */
export const STUB_DATED_MODELS: Readonly<Record<string, string>> = {
  'gpt-4o': 'gpt-4o-2024-08-06',
  'gpt-4o-mini': 'gpt-4o-mini-2024-07-18',
  'gpt-4.1-mini': 'gpt-4.1-mini-2025-04-14',
  'o3': 'o3-2025-04-16',
  'claude-3-5-sonnet-latest': 'claude-3-5-sonnet-20241022',
  'claude-3-5-haiku-latest': 'claude-3-5-haiku-20241022',
  'claude-sonnet-4-5': 'claude-sonnet-4-5-20250929',
  'claude-haiku-4-5': 'claude-haiku-4-5-20251001',
  'gemini-2.0-flash': 'gemini-2.0-flash-001',
  'gemini-2.0-flash-lite': 'gemini-2.0-flash-lite-001',
};

/** The model a stub answer names: the dated snapshot of `asked`, or `asked`. */
export function answeredModel(asked: string): string {
  return STUB_DATED_MODELS[asked] ?? asked;
}

/** The token counts every stub answer reports (each family in its own shape, streamed or not). */
export const STUB_USAGE = { input: 12, output: 5 } as const;

/** A streamed answer: the content type and the body's pieces (sent as separate writes). */
export interface StubStream {
  readonly contentType: string;
  readonly chunks: readonly string[];
}

const sse = (events: readonly unknown[], named = false): string[] =>
  events.map((e) => (named ? `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n` : `data: ${JSON.stringify(e)}\n\n`));

const OPENAI_USAGE = { prompt_tokens: STUB_USAGE.input, completion_tokens: STUB_USAGE.output, total_tokens: STUB_USAGE.input + STUB_USAGE.output };
/** What a reasoning model (`o1`, `o3-mini`, `o4-…`) reports: most of its output is reasoning the client never sees. */
export const STUB_REASONING_USAGE = { input: 12, output: 4000, reasoning: 3995 } as const;
const isReasoningModel = (model: string) => /^o\d/.test(model);
/** OpenAI chat and completions usage of `model`'s answer. */
function openaiUsage(model: string): object {
  if (!isReasoningModel(model)) return OPENAI_USAGE;
  const u = STUB_REASONING_USAGE;
  return { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output, completion_tokens_details: { reasoning_tokens: u.reasoning } };
}

/** What a background response reports once completed (larger than a foreground answer: it is long work). */
export const STUB_BACKGROUND_USAGE = { input: 1200, output: 1000 } as const;

/** A Responses API `response` object: in progress (no output, no usage yet) or completed. */
let responses = 0;
/** A fresh response id, as OpenAI gives each response its own (keygate books a response once per id). */
const newResponseId = () => `resp_stub${Date.now().toString(36)}${(responses++).toString(36)}`;

function responseObject(model: string, createdAt: number, completed: boolean, bg: { id: string; status: string } | null = null, id = 'resp_stub'): object {
  const usage = bg === null ? STUB_USAGE : STUB_BACKGROUND_USAGE;
  return {
    id: bg?.id ?? id,
    object: 'response',
    created_at: createdAt,
    status: bg?.status ?? (completed ? 'completed' : 'in_progress'),
    background: bg !== null,
    error: null,
    incomplete_details: null,
    model,
    output: completed ? [{ type: 'message', id: 'msg_stub', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: UPSTREAM_TEXT, annotations: [] }] }] : [],
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    usage: completed
      ? { input_tokens: usage.input, input_tokens_details: { cached_tokens: 0 }, output_tokens: usage.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: usage.input + usage.output }
      : null,
  };
}

/**
 * Background responses (`POST /v1/responses` with `background: true`), as OpenAI runs them: the
 * create answers `queued` at once, the first retrieve `in_progress`, every later one `completed`
 * with its usage (JSON, or with `stream=true` the events of a resumed stream). Kept per stub (at
 * most 1,000; the oldest forgotten first).
 */
export class BackgroundResponses {
  readonly #byId = new Map<string, { model: string; createdAt: number; retrieved: number }>();
  #next = 0;

  create(model: string): object {
    const id = `resp_bg${Date.now().toString(36)}${(this.#next++).toString(36)}`;
    const createdAt = Math.floor(Date.now() / 1000);
    if (this.#byId.size >= 1000) this.#byId.delete(this.#byId.keys().next().value!);
    this.#byId.set(id, { model, createdAt, retrieved: 0 });
    return responseObject(model, createdAt, false, { id, status: 'queued' });
  }

  /** The response as a retrieve now sees it (and counts the retrieve), or null for an unknown id. */
  retrieve(id: string): { completed: boolean; json: object } | null {
    const r = this.#byId.get(id);
    if (r === undefined) return null;
    const completed = r.retrieved++ >= 1;
    return { completed, json: responseObject(r.model, r.createdAt, completed, { id, status: completed ? 'completed' : 'in_progress' }) };
  }
}

/** A small embedding: as numbers, or as the base64 of its float32 bytes (`encoding_format: "base64"`, the OpenAI SDK's default). */
function embedding(base64: boolean): number[] | string {
  const v = [0.25, -0.5, 0.125, 1];
  return base64 ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v;
}

/**
 * The streamed answer of a request asking for one (OpenAI chat, completions and Responses and
 * Anthropic with `stream: true`, Google `:streamGenerateContent` as SSE with `alt=sse` or as a JSON
 * array), or null. OpenAI's chat and completions streams send their usage chunk only when the
 * request asked (`stream_options.include_usage: true`), as OpenAI does; a Responses stream carries
 * its usage in `response.completed`.
 */
export function stubStream(method: string, url: string, body: string): StubStream | null {
  if (method !== 'POST') return null;
  const [path, query = ''] = url.split('?') as [string, string?];
  let req: { model?: unknown; stream?: unknown; stream_options?: { include_usage?: unknown } } = {};
  try {
    req = JSON.parse(body) as typeof req;
  } catch {
    /* not JSON */
  }
  const model = answeredModel(typeof req.model === 'string' ? req.model : 'unknown');
  const created = Math.floor(Date.now() / 1000);
  const half = Math.ceil(UPSTREAM_TEXT.length / 2);
  const parts = [UPSTREAM_TEXT.slice(0, half), UPSTREAM_TEXT.slice(half)];
  if (path === '/v1/chat/completions' && req.stream === true) {
    const chunk = (delta: object, finish: string | null) => ({ id: 'chatcmpl-stub', object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    const events: unknown[] = [chunk({ role: 'assistant', content: '' }, null), ...parts.map((t) => chunk({ content: t }, null)), chunk({}, 'stop')];
    if (req.stream_options?.include_usage === true) {
      events.push({ id: 'chatcmpl-stub', object: 'chat.completion.chunk', created, model, choices: [], usage: openaiUsage(model) });
    }
    return { contentType: 'text/event-stream', chunks: [...sse(events), 'data: [DONE]\n\n'] };
  }
  if (path === '/v1/completions' && req.stream === true) {
    const chunk = (text: string, finish: string | null) => ({ id: 'cmpl-stub', object: 'text_completion', created, model, choices: [{ text, index: 0, logprobs: null, finish_reason: finish }] });
    const events: unknown[] = [...parts.map((t) => chunk(t, null)), chunk('', 'stop')];
    if (req.stream_options?.include_usage === true) events.push({ id: 'cmpl-stub', object: 'text_completion', created, model, choices: [], usage: openaiUsage(model) });
    return { contentType: 'text/event-stream', chunks: [...sse(events), 'data: [DONE]\n\n'] };
  }
  if (path === '/v1/responses' && req.stream === true) {
    let seq = 0;
    const rid = newResponseId();
    const item = { type: 'message', id: 'msg_stub', status: 'in_progress', role: 'assistant', content: [] };
    const events = [
      { type: 'response.created', response: responseObject(model, created, false, null, rid) },
      { type: 'response.in_progress', response: responseObject(model, created, false, null, rid) },
      { type: 'response.output_item.added', output_index: 0, item },
      { type: 'response.content_part.added', item_id: 'msg_stub', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } },
      ...parts.map((delta) => ({ type: 'response.output_text.delta', item_id: 'msg_stub', output_index: 0, content_index: 0, delta })),
      { type: 'response.output_text.done', item_id: 'msg_stub', output_index: 0, content_index: 0, text: UPSTREAM_TEXT },
      { type: 'response.completed', response: responseObject(model, created, true, null, rid) },
    ].map((e) => ({ ...e, sequence_number: seq++ }));
    return { contentType: 'text/event-stream', chunks: sse(events, true) };
  }
  if (path === '/v1/messages' && req.stream === true) {
    const events = [
      { type: 'message_start', message: { id: 'msg_stub', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: STUB_USAGE.input, output_tokens: 1 } } },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      ...parts.map((t) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } })),
      { type: 'content_block_stop', index: 0 },
      { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: STUB_USAGE.output } },
      { type: 'message_stop' },
    ];
    return { contentType: 'text/event-stream', chunks: sse(events, true) };
  }
  const g = /^\/v1(?:beta)?\/models\/([^/:]+):streamGenerateContent$/.exec(path);
  if (g) {
    const modelVersion = answeredModel(decodeURIComponent(g[1]!));
    const pieces = parts.map((t, i) => ({
      candidates: [{ content: { role: 'model', parts: [{ text: t }] }, ...(i === parts.length - 1 ? { finishReason: 'STOP' } : {}), index: 0 }],
      usageMetadata: i === parts.length - 1 ? { promptTokenCount: STUB_USAGE.input, candidatesTokenCount: STUB_USAGE.output, totalTokenCount: STUB_USAGE.input + STUB_USAGE.output } : { promptTokenCount: STUB_USAGE.input, totalTokenCount: STUB_USAGE.input },
      modelVersion,
    }));
    if (new URLSearchParams(query).get('alt') === 'sse') return { contentType: 'text/event-stream', chunks: sse(pieces).map((c) => c.replace(/\n\n$/, '\r\n\r\n')) };
    return { contentType: 'application/json', chunks: pieces.map((p, i) => `${i === 0 ? '[' : ',\r\n'}${JSON.stringify(p)}`).concat([']']) };
  }
  return null;
}

/** What the stub's image answers report (gpt-image-1's shape: input split into text and image tokens). */
export const STUB_IMAGE_USAGE = { input: 50, text: 40, image: 10, output: 4160 } as const;
/** What the stub's transcriptions and translations report (a model billed by token). */
export const STUB_AUDIO_USAGE = { input: 120, output: 8 } as const;
/** A 1×1 PNG. */
const PNG_1X1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';

export function stubAnswer(method: string, url: string, body: string): { status: number; json: unknown } {
  const path = url.split('?')[0]!;
  let model = 'unknown';
  let base64 = false;
  try {
    const req = JSON.parse(body) as { model?: unknown; encoding_format?: unknown };
    if (typeof req.model === 'string') model = answeredModel(req.model);
    base64 = req.encoding_format === 'base64';
  } catch {
    /* not JSON: keep the defaults */
  }
  const created = Math.floor(Date.now() / 1000);
  if (method === 'POST' && path === '/v1/chat/completions') {
    return {
      status: 200,
      json: {
        id: 'chatcmpl-stub',
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: UPSTREAM_TEXT, refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: openaiUsage(model),
      },
    };
  }
  if (method === 'POST' && path === '/v1/completions') {
    return { status: 200, json: { id: 'cmpl-stub', object: 'text_completion', created, model, choices: [{ text: UPSTREAM_TEXT, index: 0, logprobs: null, finish_reason: 'stop' }], usage: OPENAI_USAGE } };
  }
  if (method === 'POST' && path === '/v1/responses') return { status: 200, json: responseObject(model, created, true, null, newResponseId()) };
  if (method === 'POST' && (path === '/v1/images/generations' || path === '/v1/images/edits')) {
    const u = STUB_IMAGE_USAGE;
    return {
      status: 200,
      json: { created, data: [{ b64_json: PNG_1X1 }], usage: { input_tokens: u.input, input_tokens_details: { text_tokens: u.text, image_tokens: u.image }, output_tokens: u.output, total_tokens: u.input + u.output } },
    };
  }
  if (method === 'POST' && (path === '/v1/audio/transcriptions' || path === '/v1/audio/translations')) {
    const u = STUB_AUDIO_USAGE;
    return { status: 200, json: { text: UPSTREAM_TEXT, usage: { type: 'tokens', input_tokens: u.input, input_token_details: { text_tokens: 0, audio_tokens: u.input }, output_tokens: u.output, total_tokens: u.input + u.output } } };
  }
  if (method === 'POST' && path === '/v1/embeddings') {
    return {
      status: 200,
      json: { object: 'list', data: [{ object: 'embedding', index: 0, embedding: embedding(base64) }], model, usage: { prompt_tokens: STUB_USAGE.input, total_tokens: STUB_USAGE.input } },
    };
  }
  if (method === 'POST' && path === '/v1/messages') {
    return {
      status: 200,
      json: {
        id: 'msg_stub',
        type: 'message',
        role: 'assistant',
        model,
        content: [{ type: 'text', text: UPSTREAM_TEXT }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: STUB_USAGE.input, output_tokens: STUB_USAGE.output },
      },
    };
  }
  const g = /^\/v1(?:beta)?\/models\/([^/:]+):generateContent$/.exec(path);
  if (method === 'POST' && g) {
    return {
      status: 200,
      json: {
        candidates: [{ content: { role: 'model', parts: [{ text: UPSTREAM_TEXT }] }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: STUB_USAGE.input, candidatesTokenCount: STUB_USAGE.output, totalTokenCount: STUB_USAGE.input + STUB_USAGE.output },
        modelVersion: answeredModel(decodeURIComponent(g[1]!)),
      },
    };
  }
  return { status: 404, json: { error: { message: `stub upstream: no route for ${method} ${path}`, type: 'not_found' } } };
}

export interface UpstreamRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** The stub server; each request that reaches it is passed to `onRequest` (tests record them). */
/** A background create or a retrieve of one: the answer, or null (not one). */
function background(bg: BackgroundResponses, method: string, url: string, body: string): StubStream | { status: number; json: unknown } | null {
  const [path, query = ''] = url.split('?') as [string, string?];
  if (method === 'POST' && path === '/v1/responses') {
    let req: { background?: unknown; model?: unknown } = {};
    try {
      req = JSON.parse(body) as typeof req;
    } catch {
      return null;
    }
    return req.background === true ? { status: 200, json: bg.create(typeof req.model === 'string' ? req.model : 'unknown') } : null;
  }
  const m = /^\/v1\/responses\/([^/]+)$/.exec(path);
  if (method !== 'GET' || !m) return null;
  const r = bg.retrieve(m[1]!);
  if (r === null) return { status: 404, json: { error: { message: `No response found with id '${m[1]}'.`, type: 'invalid_request_error', param: null, code: null } } };
  if (new URLSearchParams(query).get('stream') !== 'true') return { status: 200, json: r.json };
  const type = r.completed ? 'response.completed' : 'response.in_progress';
  return { contentType: 'text/event-stream', chunks: sse([{ type, response: r.json, sequence_number: 0 }], true) };
}

export function createStubUpstream(onRequest: (r: UpstreamRequest) => void = () => {}): Server {
  const bg = new BackgroundResponses();
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      onRequest({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const b = background(bg, req.method ?? '', req.url ?? '', body);
      const st = b !== null && 'chunks' in b ? b : stubStream(req.method ?? '', req.url ?? '', body);
      if (st !== null) {
        res.writeHead(200, { 'content-type': st.contentType });
        void (async () => {
          for (const c of st.chunks) {
            res.write(c);
            await new Promise((r) => setImmediate(r));
          }
          res.end();
        })();
        return;
      }
      const a = b !== null && !('chunks' in b) ? b : stubAnswer(req.method ?? '', req.url ?? '', body);
      const out = JSON.stringify(a.json);
      res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
      res.end(out);
    });
  });
}

/** Starts the stub on `host:port` (0 = a free port); resolves with the server and its port. */
export async function listenStubUpstream(port: number, host: string, onRequest?: (r: UpstreamRequest) => void): Promise<{ server: Server; port: number }> {
  const server = createStubUpstream(onRequest);
  return { server, port: await listenOn(server, port, host) };
}
