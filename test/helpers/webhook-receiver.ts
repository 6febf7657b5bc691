/**
 * A webhook receiver on loopback for the events tests: records every request (headers and raw body)
 * and answers with what `respond` says (a status, or 'hang' to never answer).
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createRequire } from 'node:module';

/** docs/events.md as written: its verification snippets are what the tests check signatures with. */
export const EVENTS_DOC = readFileSync(new URL('../../docs/events.md', import.meta.url), 'utf8');
/** The docs' Node.js verification snippet (the first js block of docs/events.md). */
const NODE_SNIPPET = /```js\n([\s\S]*?)```/.exec(EVENTS_DOC)![1]!;
/** `verifyKeygateSignature(secret, body, header, now?)` as the docs' Node.js snippet defines it. */
export const verifyDocs = new Function('require', `${NODE_SNIPPET}\nreturn verifyKeygateSignature;`)(createRequire(import.meta.url)) as (
  secret: string,
  body: string,
  header: string,
  now?: number,
) => boolean;

export interface Received {
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  readonly event: { id: string; type: string; created_at: string; account: string | null; data: Record<string, any> };
  readonly at: number;
}

export interface Receiver {
  readonly url: string;
  readonly received: Received[];
  /** Decides each answer (default 200). */
  respond: (r: Received, n: number) => number | 'hang';
  /** Requests being answered now (for the no-concurrent-duplicates check). */
  readonly inFlight: Map<string, number>;
  maxSameIdInFlight: number;
  close(): Promise<void>;
}

export async function startReceiver(path = '/hook'): Promise<Receiver> {
  const hanging = new Set<IncomingMessage>();
  const rec: Receiver = {
    url: '',
    received: [],
    respond: () => 200,
    inFlight: new Map(),
    maxSameIdInFlight: 0,
    close: async () => {
      for (const h of hanging) h.socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let event;
      try {
        event = JSON.parse(body);
      } catch {
        event = null;
      }
      const r: Received = { headers: req.headers, body, event, at: Date.now() };
      rec.received.push(r);
      const id = String(event?.id);
      const n = (rec.inFlight.get(id) ?? 0) + 1;
      rec.inFlight.set(id, n);
      rec.maxSameIdInFlight = Math.max(rec.maxSameIdInFlight, n);
      const answer = rec.respond(r, rec.received.length);
      const done = () => rec.inFlight.set(id, (rec.inFlight.get(id) ?? 1) - 1);
      if (answer === 'hang') {
        hanging.add(req);
        req.socket.on('close', done);
        return;
      }
      setTimeout(() => {
        done();
        res.writeHead(answer, { 'content-type': 'text/plain' }).end('x'.repeat(10_000));
      }, 20);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address();
  (rec as { url: string }).url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}${path}`;
  return rec;
}
