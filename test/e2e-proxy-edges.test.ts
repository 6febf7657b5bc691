/**
 * What the shipped proxy configs do beyond the SDK suite: header spoofing, large bodies, keygate
 * unreachable (fail closed), and the nginx template guard.
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schema } from '../src/schema/redis-schema.ts';
import { json, send } from './helpers/http-client.ts';
import { NGINX_CONF, nginxSiteConfig, startAll, startCaddy, startNginx, type RunningProxy } from './helpers/proxies.ts';
import { freePort } from './helpers/redis-server.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';
import { startStubUpstream, type StubUpstream } from './helpers/stub-upstream.ts';

let stack: Stack;
let upstream: StubUpstream;
let valid: SeededKey;
const proxies: Record<string, RunningProxy> = {};

beforeAll(async () => {
  stack = await startStack();
  upstream = await startStubUpstream();
  valid = await seedKey(stack.db, schema(), { account: 'acct-edge' });
  const t = { authzPort: stack.sidecar.httpPort, upstreamPort: upstream.port };
  const [caddy, nginx] = await startAll([startCaddy(t), startNginx(t)]);
  proxies.caddy = caddy!;
  proxies.nginx = nginx!;
});

afterAll(async () => {
  await Promise.all(Object.values(proxies).map((p) => p.close()));
  await upstream?.close();
  await stack?.close();
});

beforeEach(() => {
  upstream.requests.length = 0;
});

describe.each(['caddy', 'nginx'])('%s', (name) => {
  const port = () => proxies[name]!.port;

  it.each([
    ['X-Forwarded-Uri', { 'x-forwarded-uri': '/v1/messages', 'x-forwarded-method': 'POST' }],
    ['X-Original-URI', { 'x-original-uri': '/v1/messages', 'x-original-method': 'POST' }],
    ['X-Keygate-Protocol', { 'x-keygate-protocol': 'anthropic' }],
  ])('a client-sent %s does not change what keygate checks', async (_n, headers) => {
    const res = await send(port(), { method: 'POST', path: '/v1/chat/completions', headers, body: '{}' });
    expect(res.status).toBe(401);
    // The OpenAI shape, from the real path: the forged header never reached keygate.
    expect(json(res).error).toMatchObject({ code: 'API_KEY_REQUIRED', type: 'authentication_error' });
    expect(upstream.requests).toHaveLength(0);
  });

  it.each(['evil.example', 'localhost', '127.0.0.1', '[::1]', 'gateway.example:443'])(
    'an unexpected Host (%s) still goes through the key check: no key → 401, a valid key → upstream',
    async (host) => {
      const no = await send(port(), { method: 'POST', path: '/v1/chat/completions', headers: { host }, body: '{}' });
      expect(no.status, no.body).toBe(401);
      expect(json(no).error.code).toBe('API_KEY_REQUIRED');
      expect(upstream.requests).toHaveLength(0);
      const ok = await send(port(), { method: 'POST', path: '/v1/chat/completions', headers: { host, authorization: `Bearer ${valid.key}` }, body: '{}' });
      expect(ok.status, ok.body).toBe(200);
      expect(upstream.requests).toHaveLength(1);
      expect(upstream.requests[0]!.headers['x-keygate-key-id']).toBe(valid.id);
    },
  );

  it('a 2 MiB request body passes through to the upstream intact (keygate never waits for it)', async () => {
    const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(2 * 1024 * 1024) }] });
    const res = await send(port(), { method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${valid.key}`, 'content-type': 'application/json' }, body });
    expect(res.status).toBe(200);
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]!.body).toBe(body);
  });

  it('the deny carries one request id, in the header and in the Anthropic body', async () => {
    const res = await send(port(), { method: 'POST', path: '/v1/messages', headers: { 'x-api-key': 'nope' }, body: '{}' });
    expect(res.status).toBe(401);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['x-should-retry']).toBe('false');
    expect(json(res).request_id).toBe(res.headers['x-request-id']);
    expect(json(res).error.code).toBe('INVALID_API_KEY');
  });
});

describe('keygate unreachable: the proxies fail closed', () => {
  it('nginx answers 503 AUTH_UNAVAILABLE as JSON, nothing reaches the upstream', async () => {
    const dead = await startNginx({ authzPort: await freePort(), upstreamPort: upstream.port });
    try {
      const res = await send(dead.port, { method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${valid.key}` }, body: '{}' });
      expect(res.status).toBe(503);
      expect(res.headers['content-type']).toBe('application/json');
      expect(json(res).error.code).toBe('AUTH_UNAVAILABLE');
      expect(upstream.requests).toHaveLength(0);
    } finally {
      await dead.close();
    }
  });

  it('Caddy answers 502 (retryable for the SDKs), nothing reaches the upstream', async () => {
    const dead = await startCaddy({ authzPort: await freePort(), upstreamPort: upstream.port });
    try {
      const res = await send(dead.port, { method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${valid.key}` }, body: '{}' });
      expect(res.status).toBe(502);
      expect(upstream.requests).toHaveLength(0);
    } finally {
      await dead.close();
    }
  });
});

describe('the nginx template guard', () => {
  it('refuses a template whose addresses moved, so the tested file is the shipped one', () => {
    const shipped = readFileSync(NGINX_CONF, 'utf8');
    expect(nginxSiteConfig(shipped, 1, { authzPort: 2, upstreamPort: 3 })).toContain('server 127.0.0.1:2;');
    expect(() => nginxSiteConfig(shipped.replace('listen 8080 default_server;', 'listen 9090 default_server;'), 1, { authzPort: 2, upstreamPort: 3 })).toThrow(/listen 8080 default_server/);
  });
});

describe('a failed setup leaves no proxy running', () => {
  it('startAll closes Caddy when nginx fails to start', async () => {
    const t = { authzPort: stack.sidecar.httpPort, upstreamPort: upstream.port };
    const broken = `${readFileSync(NGINX_CONF, 'utf8')}\nno_such_directive on;\n`;
    let caddy: RunningProxy | undefined;
    const caddyStart = startCaddy(t).then((p) => (caddy = p));
    await expect(startAll([caddyStart, startNginx(t, broken)])).rejects.toThrow(/proxy exited with 1/);
    expect(caddy).toBeDefined();
    const open = await new Promise<boolean>((resolve) => {
      const s = connect(caddy!.port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    expect(open).toBe(false);
  });
});
