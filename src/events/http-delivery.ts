/**
 * One delivery attempt: POST the body to the endpoint, signed, to the address that passed the
 * destination rule (the `lookup` hands the connection exactly the checked address: no DNS rebinding
 * window), no redirect followed (a 3xx is a failure), bounded in time, the answer's body read to at
 * most 1 KiB and dropped.
 */
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { checkUrl, resolveDestination, type Resolver } from './ssrf.ts';
import { SIGNATURE_HEADER, sign } from './signature.ts';

export const RESPONSE_BODY_BOUND = 1024;

export type AttemptResult = { readonly ok: true; readonly status: number } | { readonly ok: false; readonly error: string };

export interface AttemptOptions {
  readonly allowPrivate: boolean;
  readonly timeoutMs: number;
  readonly resolve: Resolver;
  readonly userAgent?: string;
}

export async function deliverOnce(url: string, secret: string, eventId: string, body: string, o: AttemptOptions): Promise<AttemptResult> {
  let dest;
  let target;
  try {
    target = checkUrl(url, o.allowPrivate);
    dest = await resolveDestination(target.host, o.allowPrivate, o.resolve);
  } catch (err) {
    return { ok: false, error: `refused: ${(err as Error).message}`.slice(0, 200) };
  }
  const lookup: LookupFunction = (_host, opts, cb) => {
    if ((opts as { all?: boolean }).all) (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: dest.address, family: dest.family }]);
    else cb(null, dest.address, dest.family);
  };
  const u = target.url;
  const mod = u.protocol === 'https:' ? https : http;
  return new Promise<AttemptResult>((resolve) => {
    let done = false;
    const finish = (r: AttemptResult) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = mod.request(
      {
        protocol: u.protocol,
        hostname: target.host,
        port: u.port === '' ? undefined : Number(u.port),
        path: `${u.pathname}${u.search}`,
        method: 'POST',
        agent: false,
        lookup,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': o.userAgent ?? 'keygate-webhooks',
          'keygate-event-id': eventId,
          [SIGNATURE_HEADER]: sign(secret, body, Math.floor(Date.now() / 1000)),
        },
      },
      (res) => {
        let read = 0;
        const status = res.statusCode ?? 0;
        const end = () => {
          res.destroy();
          req.destroy();
          finish(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, error: `HTTP ${status}` });
        };
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read >= RESPONSE_BODY_BOUND) end();
        });
        res.on('end', end);
        res.on('error', end);
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      finish({ ok: false, error: `no answer within ${o.timeoutMs} ms` });
    }, o.timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => finish({ ok: false, error: (err.code ?? err.message).slice(0, 200) }));
    req.end(body);
  });
}
