/**
 * A stand-in LLM upstream: answers chat completions (OpenAI), messages (Anthropic) and
 * generateContent (Google) in each provider's response shape, enough for the official SDKs to
 * parse. `keygate dev` puts it behind its dev gateway; the tests use it as their upstream.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { listenOn } from '../lifecycle.ts';

export const UPSTREAM_TEXT = 'hello from upstream';

export function stubAnswer(method: string, url: string, body: string): { status: number; json: unknown } {
  const path = url.split('?')[0]!;
  let model = 'unknown';
  try {
    const m = (JSON.parse(body) as { model?: unknown }).model;
    if (typeof m === 'string') model = m;
  } catch {
    /* not JSON: keep the default */
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
        usage: { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 },
      },
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
        usage: { input_tokens: 1, output_tokens: 3 },
      },
    };
  }
  const g = /^\/v1(?:beta)?\/models\/([^/:]+):generateContent$/.exec(path);
  if (method === 'POST' && g) {
    return {
      status: 200,
      json: {
        candidates: [{ content: { role: 'model', parts: [{ text: UPSTREAM_TEXT }] }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 3, totalTokenCount: 4 },
        modelVersion: decodeURIComponent(g[1]!),
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
export function createStubUpstream(onRequest: (r: UpstreamRequest) => void = () => {}): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      onRequest({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const a = stubAnswer(req.method ?? '', req.url ?? '', body);
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
