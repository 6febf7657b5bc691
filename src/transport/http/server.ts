/**
 * The HTTP external-authorization server on node:http: `/authz…` answers the same
 * decision as the gRPC Check, for Envoy `http_service`, Caddy `forward_auth`, Traefik ForwardAuth
 * and nginx `auth_request`. Anything else is 404.
 *
 * Bounds: request headers at most `maxHeaderBytes` (Node answers 431 past it), a body at most
 * `maxBodyBytes` (past it the check sees a truncated body, which a model-restricted key cannot
 * pass, and the connection is closed), and header/request timeouts against slow clients.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Authorizer, CheckInput } from '../../authorizer.ts';
import { listenOn } from '../../lifecycle.ts';
import { BadAuthzRequest, originalRequest, rawHeaderLookup, type OriginalRequest } from './authz-request.ts';
import { authzResponse } from './authz-response.ts';
import type { ResponseOptions } from '../response-options.ts';
import type { Transport } from '../transport.ts';

export interface HttpServerOptions extends ResponseOptions {
  readonly host: string;
  readonly port: number;
  readonly maxBodyBytes: number;
  readonly maxHeaderBytes?: number;
}

export const DEFAULT_MAX_HEADER_BYTES = 64 * 1024;
/** Longer than the idle timeout of proxies' upstream pools (Caddy 2 min), so the proxy closes first. */
const KEEP_ALIVE_MS = 130_000;

function errorBody(message: string): string {
  return `{"error":{"message":${JSON.stringify(message)},"type":"invalid_request_error","code":"BAD_AUTHZ_REQUEST"}}`;
}

export class HttpTransport implements Transport {
  readonly name = 'http';
  readonly server: Server;
  readonly #authorizer: Authorizer;
  readonly #opts: HttpServerOptions;
  readonly #log: Logger;
  #inFlight = 0;

  constructor(authorizer: Authorizer, opts: HttpServerOptions, log: Logger) {
    this.#authorizer = authorizer;
    this.#opts = opts;
    this.#log = log;
    this.server = createServer(
      {
        maxHeaderSize: opts.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES,
        headersTimeout: 10_000,
        requestTimeout: 30_000,
        // How often Node enforces the two timeouts above (its default, 30 s, let a request that
        // stopped sending its headers live three times the headers timeout).
        connectionsCheckingInterval: 1_000,
        keepAliveTimeout: KEEP_ALIVE_MS,
        noDelay: true,
      },
      (req, res) => {
        try {
          this.#handle(req, res);
        } catch (err) {
          // One request's unexpected error ends that request (500, connection closed), nothing else.
          this.#log.error({ err: { message: (err as Error)?.message, code: (err as NodeJS.ErrnoException)?.code } }, 'authz request failed');
          this.#send(res, 500, [['content-type', 'application/json']], '{"error":{"message":"internal error","code":"INTERNAL"}}', true);
        }
      },
    );
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
      if (!socket.writable || err.code === 'ECONNRESET') {
        socket.destroy();
        return;
      }
      const status =
        err.code === 'HPE_HEADER_OVERFLOW'
          ? '431 Request Header Fields Too Large'
          : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? '408 Request Timeout'
            : '400 Bad Request';
      socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
    });
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** Plain HTTP has no health service; readiness is the admin port's `/readyz`. */
  setServing(): void {}

  async listen(): Promise<number> {
    return listenOn(this.server, this.#opts.port, this.#opts.host);
  }

  /** Stop accepting, let in-flight checks finish, then drop every connection (at `timeoutMs` at the latest). */
  async close(timeoutMs: number): Promise<void> {
    if (!this.server.listening) return;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const deadline = Date.now() + timeoutMs;
    while (this.#inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    this.server.closeAllConnections();
    await closed;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const header = rawHeaderLookup(req.rawHeaders);
    let original: OriginalRequest | null;
    try {
      original = originalRequest(req.url ?? '', req.method ?? 'GET', header);
    } catch (err) {
      if (!(err instanceof BadAuthzRequest)) throw err;
      this.#log.warn({ reason: err.message }, 'malformed authz request from the proxy');
      this.#send(res, 400, [['content-type', 'application/json']], errorBody(`keygate: ${err.message}.`), true);
      return;
    }
    if (original === null) {
      this.#send(res, 404, [['content-type', 'application/json']], '{"error":{"message":"not found; the authorization endpoint is /authz","code":"NOT_FOUND"}}', false);
      return;
    }
    this.#inFlight++;
    const te = req.headers['transfer-encoding'];
    const cl = req.headers['content-length'];
    if (te === undefined && (cl === undefined || cl === '0')) {
      this.#check(res, original, header, undefined, false);
      return;
    }
    const max = this.#opts.maxBodyBytes;
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (truncated: boolean) => {
      if (done) return;
      done = true;
      const body = size === 0 ? undefined : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      this.#check(res, original, header, body, truncated);
    };
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      if (size + chunk.length > max) {
        const room = max - size;
        if (room > 0) {
          chunks.push(chunk.subarray(0, room));
          size += room;
        }
        req.pause();
        finish(true);
        return;
      }
      chunks.push(chunk);
      size += chunk.length;
    });
    req.on('end', () => finish(false));
    req.on('error', () => {
      if (!done) {
        done = true;
        this.#inFlight--;
      }
    });
  }

  #check(
    res: ServerResponse,
    original: OriginalRequest,
    header: (name: string) => ReturnType<CheckInput['header']>,
    body: Buffer | undefined,
    truncated: boolean,
  ): void {
    const protocol = header('x-keygate-protocol');
    const rid = header('x-request-id');
    const input: CheckInput = {
      header,
      method: original.method,
      path: original.path,
      protocol: typeof protocol === 'string' && protocol !== '' ? protocol : undefined,
      body,
      bodyTruncated: truncated || header('x-envoy-auth-partial-body') === 'true',
      requestId: typeof rid === 'string' && rid !== '' ? rid : undefined,
    };
    this.#authorizer.check(input).then(
      (outcome) => {
        this.#inFlight--;
        try {
          const r = authzResponse(outcome, original.mode, this.#opts);
          // A body not read to its end cannot leave the connection reusable.
          this.#send(res, r.status, r.headers, r.body, truncated);
        } catch (err) {
          this.#log.error({ err: { message: (err as Error)?.message } }, 'authz answer failed');
          this.#send(res, 500, [['content-type', 'application/json']], '{"error":{"message":"internal error","code":"INTERNAL"}}', true);
        }
      },
      (err: unknown) => {
        this.#inFlight--;
        this.#log.error({ err: { message: (err as Error)?.message } }, 'check failed');
        this.#send(res, 500, [['content-type', 'application/json']], '{"error":{"message":"internal error","code":"INTERNAL"}}', true);
      },
    );
  }

  #send(res: ServerResponse, status: number, headers: Array<[string, string]>, body: string, close: boolean): void {
    if (res.headersSent || res.writableEnded || res.destroyed) {
      if (!res.writableEnded && !res.destroyed) res.destroy();
      return;
    }
    const out: Array<[string, string]> = headers.slice();
    out.push(['content-length', String(Buffer.byteLength(body))]);
    if (close) out.push(['connection', 'close']);
    res.writeHead(status, out.flat());
    res.end(body);
  }
}
