/**
 * A test proxy that plays Envoy's ext_authz filter over gRPC (no Envoy binary runs here): for each
 * client request it calls Check as Envoy does — header names lower-cased, repeated headers joined
 * with ",", `x-request-id` generated when absent, the body per `with_request_body` (cut at
 * `maxRequestBytes` with `x-envoy-auth-partial-body: true` when `allowPartialMessage`), and the
 * route's `context_extensions` — then applies the answer: a deny goes to the client as its status,
 * headers and body; an allow adds/overwrites the returned headers, removes `headers_to_remove`,
 * forwards the request to the upstream, and sets `response_headers_to_add` on the upstream's answer.
 */
import { randomUUID } from 'node:crypto';
import { createServer, request, type IncomingMessage, type OutgoingHttpHeaders, type Server } from 'node:http';
import { EnvoyClient, type CheckResponseMsg } from './envoy-client.ts';

export interface EnvoyRoute {
  readonly prefix: string;
  readonly contextExtensions: Record<string, string>;
}

export interface GrpcProxyOptions {
  /** keygate's gRPC address, host:port. */
  readonly checkTarget: string;
  readonly upstreamPort: number;
  readonly routes?: readonly EnvoyRoute[];
  /** with_request_body; omit to send no body. */
  readonly withRequestBody?: { readonly maxRequestBytes: number; readonly allowPartialMessage: boolean };
}

export interface GrpcProxy {
  readonly port: number;
  readonly baseUrl: string;
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

/** Request headers as Envoy hands them to ext_authz: lower-case names, repeats kept for joining. */
function envoyHeaders(req: IncomingMessage): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name)) continue;
    (out[name] ??= []).push(req.rawHeaders[i + 1]!);
  }
  return out;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export async function startGrpcProxy(o: GrpcProxyOptions): Promise<GrpcProxy> {
  const client = new EnvoyClient(o.checkTarget);
  const routeFor = (path: string) => o.routes?.find((r) => path.startsWith(r.prefix));

  const server: Server = createServer(async (req, res) => {
    try {
      const body = await readBody(req);
      const headers = envoyHeaders(req);
      headers['x-request-id'] ??= [randomUUID()];
      const path = req.url ?? '/';
      let sentBody: Buffer | undefined;
      let partial = false;
      if (o.withRequestBody && body.length > 0) {
        const max = o.withRequestBody.maxRequestBytes;
        if (body.length > max) {
          if (!o.withRequestBody.allowPartialMessage) {
            res.writeHead(413).end();
            return;
          }
          sentBody = body.subarray(0, max);
          partial = true;
        } else {
          sentBody = body;
        }
      }
      const answer: CheckResponseMsg = await client.check({
        method: req.method ?? 'GET',
        path,
        headers: { ...headers, ':authority': [req.headers.host ?? ''], ':method': [req.method ?? 'GET'], ':path': [path] },
        contextExtensions: routeFor(path)?.contextExtensions ?? {},
        ...(sentBody !== undefined ? { body: sentBody } : {}),
        partial,
      });
      if (answer.denied_response || answer.status?.code !== 0) {
        const d = answer.denied_response ?? {};
        const out: OutgoingHttpHeaders = {};
        for (const h of d.headers ?? []) out[h.header.key] = h.header.value;
        const b = d.body ?? '';
        out['content-length'] = Buffer.byteLength(b);
        res.writeHead(d.status?.code ?? 403, out).end(b);
        return;
      }
      // Allow: apply the answer to the request going upstream.
      const up: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(headers)) if (!k.startsWith(':')) up[k] = v.length === 1 ? v[0]! : v;
      for (const h of answer.ok_response?.headers ?? []) {
        const k = h.header.key.toLowerCase();
        const prev = up[k];
        up[k] = h.append?.value && prev !== undefined ? ([] as string[]).concat(prev, h.header.value) : h.header.value;
      }
      for (const k of answer.ok_response?.headers_to_remove ?? []) delete up[k.toLowerCase()];
      up['content-length'] = String(body.length);
      const upstream = request({ host: '127.0.0.1', port: o.upstreamPort, method: req.method, path, headers: up }, (ures) => {
        // `response_headers_to_add` (the x-ratelimit-* headers) go on the response to the client.
        const down: OutgoingHttpHeaders = { ...ures.headers };
        for (const h of answer.ok_response?.response_headers_to_add ?? []) down[h.header.key.toLowerCase()] = h.header.value;
        res.writeHead(ures.statusCode ?? 502, down);
        ures.pipe(res);
      });
      upstream.on('error', () => {
        if (!res.headersSent) res.writeHead(503, { 'content-type': 'text/plain' });
        res.end('upstream connect error');
      });
      upstream.end(body);
    } catch (err) {
      // Envoy's failure_mode_allow: false — an unreachable or failing authz service is a 403.
      if (!res.headersSent) res.writeHead(403, { 'content-type': 'text/plain' });
      res.end(`ext_authz error: ${(err as Error).message}`);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        client.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
