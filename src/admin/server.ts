/**
 * The admin port: `/healthz` (the process is up), `/readyz` (the store is reachable and
 * the sidecar is not draining) and `/metrics` (Prometheus). Plain node:http; GET and HEAD only.
 * Probes and scrapes, never keys: nothing here reads a request header or body.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { listenOn } from '../lifecycle.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export interface Readiness {
  /** The key store answers (and, for a cached store, its invalidation link is up). */
  readonly store: boolean;
  /** Shutdown has begun: traffic should move elsewhere. */
  readonly draining: boolean;
  /** Why not ready, in words (`/readyz` body). */
  readonly reason?: string;
}

export interface AdminOptions {
  readonly host: string;
  readonly port: number;
  readonly readiness: () => Readiness;
  readonly metrics: Metrics;
}

const JSON_TYPE = 'application/json; charset=utf-8';

export class AdminServer {
  readonly #server: Server;
  readonly #opts: AdminOptions;
  readonly #log: Logger;
  readonly #sockets = new Set<Socket>();

  constructor(opts: AdminOptions, log: Logger) {
    this.#opts = opts;
    this.#log = log;
    this.#server = createServer({ requestTimeout: 10_000, headersTimeout: 5_000, keepAliveTimeout: 5_000 }, (req, res) =>
      this.#handle(req, res),
    );
    this.#server.maxHeadersCount = 64;
    this.#server.on('connection', (s: Socket) => {
      this.#sockets.add(s);
      s.once('close', () => this.#sockets.delete(s));
    });
    this.#server.on('clientError', (_err, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
      else socket.destroy();
    });
  }

  async listen(): Promise<number> {
    return listenOn(this.#server, this.#opts.port, this.#opts.host);
  }

  /** Stops listening, lets open requests finish, and cuts whatever remains after `timeoutMs`. */
  close(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      if (!this.#server.listening) return resolve();
      const t = setTimeout(() => {
        for (const s of this.#sockets) s.destroy();
      }, timeoutMs);
      t.unref();
      this.#server.close(() => {
        clearTimeout(t);
        resolve();
      });
      this.#server.closeIdleConnections();
    });
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, JSON_TYPE, '{"error":"method not allowed"}\n', { allow: 'GET, HEAD' });
      return;
    }
    switch (path) {
      case '/healthz':
        send(res, 200, JSON_TYPE, '{"status":"ok"}\n');
        return;
      case '/readyz': {
        const r = this.#opts.readiness();
        const ready = r.store && !r.draining;
        send(res, ready ? 200 : 503, JSON_TYPE, `${JSON.stringify({ ready, store: r.store, draining: r.draining, ...(ready || !r.reason ? {} : { reason: r.reason }) })}\n`);
        return;
      }
      case '/metrics':
        this.#opts.metrics.render().then(
          (m) => send(res, 200, m.contentType, m.body),
          (err: unknown) => {
            this.#log.error({ err: { message: (err as Error)?.message } }, 'metrics collection failed');
            send(res, 500, JSON_TYPE, '{"error":"metrics collection failed"}\n');
          },
        );
        return;
      default:
        send(res, 404, JSON_TYPE, '{"error":"not found","paths":["/healthz","/readyz","/metrics"]}\n');
    }
  }
}

function send(res: ServerResponse, status: number, type: string, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'content-length': Buffer.byteLength(body), ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
