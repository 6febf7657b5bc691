/**
 * The dev gateway of `keygate dev`: a small reverse proxy that plays the part Envoy plays in
 * production, so that a curl or an SDK has something to talk to. Same entries as `envoy.yaml`:
 * `/openai/…`, `/anthropic/…`, `/google/…`. For each request it asks the sidecar's HTTP authz
 * endpoint (forward mode: `X-Forwarded-Method`/`X-Forwarded-Uri`, body included, the entry's
 * family in `x-keygate-protocol`), answers a deny as the sidecar wrote it, and on allow removes
 * the key headers, adds the identity headers and forwards to the upstream with the entry prefix
 * stripped (the allow's booking id, `x-keygate-booking-id`, goes to metering as the ext_authz
 * metadata `booking_id`, as Envoy's `dynamic_metadata_from_headers` would, never upstream); the allow's `x-ratelimit-*` headers go on the client's response instead (as Envoy does
 * with ext_authz's `response_headers_to_add`), replacing the upstream's. Each allowed request is metered as Envoy's ext_proc filter would (`src/transport/envoy/ext-proc-envoy.ts`)
 * when the sidecar's gRPC port is given. For trying keygate on one machine only: no TLS, no limits
 * tuning, loopback.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import { FAMILIES, type Family } from '../core/families/index.ts';
import { EnvoyExtProc, extProcSessions } from '../transport/envoy/ext-proc-envoy.ts';
import { DEFAULT_CREDENTIAL_HEADERS, upstreamCredential, type CredentialHeaders } from '../core/upstream-credential.ts';
import { BOOKING_ID_HEADER } from '../core/booking-id.ts';

/** One entry per protocol family, `/{family}` (the shipped envoy.yaml's prefixes). */
export const ENTRIES: ReadonlyArray<readonly [prefix: string, family: Family]> = FAMILIES.map((f) => [`/${f}`, f] as const);

const MAX_BODY = 16 * 1024 * 1024;
/** Headers fetch() refuses or that describe one hop only. */
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'host', 'content-length', 'expect']);
const REMOVE_HEADER = 'x-envoy-auth-headers-to-remove';
/** The allow's headers that do not go upstream (the booking id goes to metering only, as Envoy's dynamic metadata). */
const NOT_IDENTITY = new Set([...HOP, REMOVE_HEADER, 'cache-control', 'date', 'content-type', BOOKING_ID_HEADER]);

export interface DevGatewayOptions {
  /** Port of the sidecar's HTTP authz server on 127.0.0.1. */
  readonly authzPort: number;
  /** Base URL of the upstream, e.g. http://127.0.0.1:8000 (no trailing slash). */
  readonly upstream: string;
  /** The sidecar's gRPC port: each allowed request is metered there as Envoy's ext_proc filter would (absent: not metered). */
  readonly grpcPort?: number;
  /** The identity headers the sidecar's allow sets (defaults: x-keygate-key-id, x-keygate-account-id). */
  readonly keyIdHeader?: string;
  readonly accountHeader?: string;
  /**
   * The gateway's own upstream credential, added to a request the authz answer left without one, in
   * the entry's credential header (`authorization: Bearer …`, `x-api-key`, `x-goog-api-key`): as
   * envoy.yaml's `request_headers_to_add` with `ADD_IF_ABSENT`, so an account's own credential set
   * by the answer wins (docs/credentials.md).
   */
  readonly upstreamCredential?: string;
  /** The header per family the gateway's credential goes in (default: the sidecar's defaults). */
  readonly credentialHeaders?: CredentialHeaders;
}

/**
 * The paths (entry prefix stripped) whose request body envoy.yaml sends to metering, by family:
 * the metered endpoints (to ask an OpenAI stream for its usage, to estimate the input of a
 * stream cut before its usage, and to read the requested model of images and audio). Envoy's route matches ignore the query.
 */
const BODY_TO_METERING: Record<Family, RegExp> = {
  openai: /^\/v1\/(chat\/completions|completions|responses|embeddings|images\/(generations|edits)|audio\/(transcriptions|translations))/,
  anthropic: /^\/v1\/messages/,
  google: /^\/(.+\/)?models\/[^/:]+:(generateContent|streamGenerateContent)$/,
};

/** Whether envoy.yaml sends metering the request body of `path` (the entry prefix stripped) in `family`'s entry. */
export function sendsBodyToMetering(family: Family, path: string): boolean {
  const q = path.indexOf('?');
  return BODY_TO_METERING[family].test(q === -1 ? path : path.slice(0, q));
}

function sendJson(res: ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ error: { message, type: 'dev_gateway_error' } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req: IncomingMessage): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(null);
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function forwardable(headers: IncomingMessage['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || HOP.has(k)) continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

/** The allow's headers for the client's response, not the upstream (keygate's rate headers). */
const isClientHeader = (name: string) => name.startsWith('x-ratelimit-');

async function copyResponse(res: ServerResponse, r: Response, meter: EnvoyExtProc | null = null, add: Record<string, string> = {}): Promise<void> {
  const headers: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    // fetch() has already decoded the body: its encoding and length no longer apply.
    if (!HOP.has(k) && k !== 'content-encoding') headers[k] = v;
  });
  Object.assign(headers, add);
  res.writeHead(r.status, headers);
  meter?.responseHeaders({ ':status': String(r.status), ...headers }, r.body === null);
  if (r.body === null) {
    meter?.end();
    res.end();
    return;
  }
  if (meter !== null) {
    // as Envoy's STREAMED mode: each chunk to metering as it passes to the client
    try {
      for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
        meter.responseBody(chunk, false);
        if (!res.write(chunk)) await new Promise((resolve) => res.once('drain', resolve));
      }
      meter.responseBody(new Uint8Array(0), true);
      res.end();
    } catch {
      res.destroy();
    } finally {
      meter.end();
    }
    return;
  }
  await new Promise<void>((resolve) => {
    Readable.fromWeb(r.body as import('node:stream/web').ReadableStream).on('error', () => res.destroy()).pipe(res).on('close', resolve);
  });
}

type Sessions = ReturnType<typeof extProcSessions> | null;

async function handle(req: IncomingMessage, res: ServerResponse, opts: DevGatewayOptions, log: Logger, sessions: Sessions): Promise<void> {
  const url = req.url ?? '/';
  const entry = ENTRIES.find(([p]) => url === p || url.startsWith(`${p}/`) || url.startsWith(`${p}?`));
  if (!entry) return sendJson(res, 404, 'dev gateway: no such entry; use /openai/…, /anthropic/… or /google/…');
  const body = await readBody(req);
  if (body === null) return sendJson(res, 413, 'dev gateway: request body over 16 MiB');
  const path = url.slice(entry[0].length) || '/';
  const method = req.method ?? 'GET';
  const headers = forwardable(req.headers);
  const hasBody = method !== 'GET' && method !== 'HEAD';

  let authz: Response;
  try {
    authz = await fetch(`http://127.0.0.1:${opts.authzPort}/authz`, {
      method: 'POST',
      headers: { ...headers, 'x-forwarded-method': method, 'x-forwarded-uri': path, 'x-keygate-protocol': entry[1] },
      body: new Uint8Array(body),
    });
  } catch (err) {
    log.error({ err: { message: (err as Error).message } }, 'dev gateway: the sidecar did not answer');
    // As Envoy's status_on_error: fail closed with a status the SDKs retry.
    return sendJson(res, 503, 'dev gateway: keygate did not answer');
  }
  if (authz.status !== 200) return copyResponse(res, authz);
  await authz.arrayBuffer();

  for (const name of (authz.headers.get(REMOVE_HEADER) ?? '').split(',')) delete headers[name.trim().toLowerCase()];
  const toClient: Record<string, string> = {};
  authz.headers.forEach((v, k) => {
    if (isClientHeader(k)) toClient[k] = v;
    else if (!NOT_IDENTITY.has(k)) headers[k] = v;
  });
  // as envoy.yaml's route: the gateway's own credential where the answer set none (ADD_IF_ABSENT)
  if (opts.upstreamCredential !== undefined) {
    const c = upstreamCredential((opts.credentialHeaders ?? DEFAULT_CREDENTIAL_HEADERS)[entry[1]], opts.upstreamCredential);
    headers[c.header] ??= c.value;
  }
  // as Envoy: every request carries an x-request-id (generated when the client sent none); only a
  // label in the usage log: the booking is idempotent on the allow's booking id
  headers['x-request-id'] ??= randomUUID();
  const bookingId = authz.headers.get(BOOKING_ID_HEADER) ?? undefined;
  let upBody: Uint8Array = body;
  let meter: EnvoyExtProc | null = null;
  const keyId = headers[opts.keyIdHeader ?? 'x-keygate-key-id'];
  const accountId = headers[opts.accountHeader ?? 'x-keygate-account-id'];
  if (sessions !== null && keyId !== undefined && accountId !== undefined) {
    try {
      meter = EnvoyExtProc.open(sessions.session(), { keyId, accountId, ...(bookingId !== undefined ? { bookingId } : {}) });
      const sendBody = hasBody && sendsBodyToMetering(entry[1], path);
      meter.requestHeaders({ ':method': method, ':path': path, ':authority': 'dev-gateway', ...headers }, !sendBody);
      if (sendBody) {
        // Envoy waits message_timeout (0.2 s in envoy.yaml); the dev gateway, on a busy laptop, 10 s
        const answer = await meter.requestBody(body, 10_000);
        if (answer !== null && !Buffer.isBuffer(answer)) {
          // as Envoy with an immediate_response: the client gets it, nothing goes upstream
          meter.end();
          res.writeHead(answer.status, { ...answer.headers, 'content-length': answer.body.length });
          res.end(answer.body);
          return;
        }
        upBody = answer ?? body;
      }
    } catch (err) {
      log.warn({ err: { message: (err as Error).message } }, 'dev gateway: metering failed; the request goes on unmetered');
      meter = null;
    }
  }
  let up: Response;
  try {
    up = await fetch(`${opts.upstream}${path}`, { method, headers, ...(hasBody ? { body: new Uint8Array(upBody) } : {}) });
  } catch (err) {
    meter?.end();
    log.error({ err: { message: (err as Error).message } }, 'dev gateway: the upstream did not answer');
    return sendJson(res, 502, 'dev gateway: the upstream did not answer');
  }
  await copyResponse(res, up, meter, toClient);
}

export function createDevGateway(opts: DevGatewayOptions, log: Logger): Server {
  const sessions = opts.grpcPort !== undefined ? extProcSessions(opts.grpcPort) : null;
  const server = createServer((req, res) => {
    handle(req, res, opts, log, sessions).catch((err: unknown) => {
      log.error({ err: { message: (err as Error)?.message } }, 'dev gateway: request failed');
      if (!res.headersSent) sendJson(res, 500, 'dev gateway: internal error');
      else res.destroy();
    });
  });
  server.on('close', () => sessions?.close());
  return server;
}
