/**
 * A stub LLM upstream for end-to-end tests: records every request that reaches it and answers in
 * the OpenAI, Anthropic and Google response shapes, enough for the official SDKs to parse.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';

export interface UpstreamRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export interface StubUpstream {
  readonly port: number;
  readonly requests: UpstreamRequest[];
  close(): Promise<void>;
}

export const UPSTREAM_TEXT = 'hello from upstream';

function answer(method: string, url: string, body: string): { status: number; json: unknown } {
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

export async function startStubUpstream(): Promise<StubUpstream> {
  const requests: UpstreamRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const a = answer(req.method ?? '', req.url ?? '', body);
      const out = JSON.stringify(a.json);
      res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
      res.end(out);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  return {
    port: typeof addr === 'object' && addr ? addr.port : 0,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
