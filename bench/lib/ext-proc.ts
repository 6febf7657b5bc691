/**
 * ext_proc streams as Envoy sends them, for the metering benches: the ProcessingRequest messages of
 * one metered exchange (request headers with the ext_authz metadata, response headers, the response
 * body in chunks, the last with end_of_stream), each gRPC-framed, and concatenated into one body,
 * so that h2load can send a whole stream as one HTTP/2 POST (the server answers each message as it
 * arrives and ends the stream with OK after end_of_stream). Plus a node:http2 client that holds
 * streams open (memory) and runs streams to their end (overshoot).
 */
import * as http2 from 'node:http2';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { frameBytes } from '../../src/transport/grpc/codec.ts';
import { exchangeMessages as envoyMessages, PROCESS_PATH, type Identity } from '../../src/transport/envoy/ext-proc-envoy.ts';

export { PROCESS_PATH };
const FIX = join(import.meta.dirname, '..', '..', 'test', 'fixtures', 'metering');

export interface ExchangeSpec {
  identity: Identity;
  contentType: string;
  chunks: readonly Buffer[];
  encoding?: string;
  /** x-request-id (absent: the sidecar generates one per stream). */
  requestId?: string;
  /** ProcessingRequest.observability_mode: the server answers nothing. */
  observability?: boolean;
  /** false: the last chunk carries no end_of_stream (a stream held open). */
  complete?: boolean;
}

/** The unframed ProcessingRequest messages of one exchange (a chat completion; its request body not sent), in order. */
export function exchangeMessages(x: ExchangeSpec): Buffer[] {
  // without x-request-id the sidecar makes an id per response, so every h2load stream books anew
  const requestHeaders: Record<string, string> = { ':method': 'POST', ':path': '/v1/chat/completions', ':scheme': 'http', ':authority': 'gateway', 'content-type': 'application/json' };
  if (x.requestId) requestHeaders['x-request-id'] = x.requestId;
  const responseHeaders: Record<string, string> = { ':status': '200', 'content-type': x.contentType, date: 'Tue, 24 Nov 2026 23:00:00 GMT' };
  if (x.encoding) responseHeaders['content-encoding'] = x.encoding;
  return envoyMessages({ identity: x.identity, requestHeaders, requestBody: 'unsent', responseHeaders, chunks: x.chunks, complete: x.complete, observability: x.observability });
}

/** The messages gRPC-framed and concatenated: one request body for h2load. */
export function exchangeBody(x: ExchangeSpec): Buffer {
  return Buffer.concat(exchangeMessages(x).map((m) => frameBytes(m)));
}

/** A 2 KiB chat completion (the recorded one with a longer answer). */
export function json2k(): Buffer {
  const chat = JSON.parse(readFileSync(join(FIX, 'openai-chat.json'), 'utf8'));
  const base = Buffer.byteLength(JSON.stringify(chat, null, 2));
  chat.choices[0].message.content += ' Lorem ipsum dolor sit amet, consectetur.'.repeat(Math.ceil((2048 - base) / 42)).slice(0, 2048 - base);
  return Buffer.from(JSON.stringify(chat, null, 2));
}

/** The recorded streamed chat completion of 300 SSE events (usage in the last) and `[DONE]`, one buffer per event (301). */
export function sse300(): Buffer[] {
  const sse = readFileSync(join(FIX, 'openai-chat-stream-300.sse'));
  const events: Buffer[] = [];
  for (let i = 0; i < sse.length; ) {
    const j = sse.indexOf('\n\n', i);
    if (j === -1) break;
    events.push(sse.subarray(i, j + 2));
    i = j + 2;
  }
  return events;
}

export interface StreamResult {
  /** gRPC-framed messages the server sent. */
  answers: number;
  grpcStatus: string | undefined;
}

/** Sends `messages` (framed) on one Process stream of `session`, ending it or not; resolves at the trailers. */
export function processStream(session: http2.ClientHttp2Session, messages: readonly Buffer[], end = true): { done: Promise<StreamResult>; stream: http2.ClientHttp2Stream; answered: (n: number) => Promise<void> } {
  const stream = session.request({ ':method': 'POST', ':path': PROCESS_PATH, 'content-type': 'application/grpc', te: 'trailers' });
  let answers = 0;
  let buf: Buffer = Buffer.alloc(0);
  const waiters: { n: number; r: () => void }[] = [];
  stream.on('data', (c: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, c]) : c;
    while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
      buf = buf.subarray(5 + buf.readUInt32BE(1));
      answers++;
    }
    for (let i = waiters.length - 1; i >= 0; i--) if (answers >= waiters[i]!.n) waiters.splice(i, 1)[0]!.r();
  });
  const done = new Promise<StreamResult>((resolve, reject) => {
    let status: string | undefined;
    stream.on('trailers', (t) => (status = String(t['grpc-status'])));
    stream.on('response', (h) => h['grpc-status'] !== undefined && (status = String(h['grpc-status'])));
    stream.on('close', () => resolve({ answers, grpcStatus: status }));
    stream.on('error', reject);
  });
  for (const m of messages) stream.write(frameBytes(m));
  if (end) stream.end();
  const answered = (n: number) => (answers >= n ? Promise.resolve() : new Promise<void>((r) => waiters.push({ n, r })));
  return { done, stream, answered };
}
