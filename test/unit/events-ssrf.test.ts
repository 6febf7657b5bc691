/**
 * The webhook destination rule with hostile URLs, and a delivery attempt to a name that resolves to
 * loopback (a resolver seam stands in for DNS; the connection goes to the address that was checked).
 */
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { deliverOnce } from '../../src/events/http-delivery.ts';
import { sign, verify } from '../../src/events/signature.ts';
import { checkUrl, isPrivateAddress, resolveDestination, type Resolver } from '../../src/events/ssrf.ts';
import { loadWebhookConfig, DEFAULT_RETRY_SCHEDULE } from '../../src/events/config.ts';

const refused = [
  'http://127.0.0.1/',
  'http://127.1/',
  'http://2130706433/',
  'http://017700000001/',
  'http://0x7f000001/',
  'http://0x7f.0.0.1/',
  'http://0/',
  'http://0.0.0.0/',
  'http://[::1]/',
  'http://[::]/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:7f00:1]/',
  'http://[0:0:0:0:0:ffff:10.0.0.1]/',
  'http://[::127.0.0.1]/',
  'http://[64:ff9b::a9fe:a9fe]/',
  'http://[2002:7f00:1::]/',
  'http://[fd00::1]/',
  'http://[fc12::1]/',
  'http://[fe80::1]/',
  'http://10.1.2.3/',
  'http://172.16.0.1/',
  'http://172.31.255.255/',
  'http://192.168.1.1/',
  'http://100.64.0.1/',
  'http://169.254.169.254/latest/meta-data/',
  'http://[fd00:ec2::254]/',
  'http://metadata.google.internal/',
  'http://localhost:8080/',
  'http://foo.localhost/',
  'http://LOCALHOST./',
  'http://224.0.0.1/',
  'http://255.255.255.255/',
];

describe('destination rule', () => {
  it.each(refused)('refuses %s', (url) => {
    expect(() => checkUrl(url, false)).toThrow(/loopback, private|metadata/);
    expect(() => checkUrl(url, true)).not.toThrow();
  });

  it.each([
    ['ftp://example.com/', /http/],
    ['file:///etc/passwd', /http/],
    ['gopher://example.com/', /http/],
    ['http://user:pw@example.com/', /user name/],
    ['http://example.com@127.0.0.1/', /user name/],
    ['http://127.0.0.1#@example.com/', /fragment|loopback/],
    ['not a url', /valid/],
    [`https://example.com/${'a'.repeat(3000)}`, /2048/],
  ])('refuses %s', (url, why) => {
    expect(() => checkUrl(url, false)).toThrow(why);
  });

  it.each(['https://example.com/hook', 'http://93.184.216.34:8080/x?y=1', 'https://[2606:4700::1111]/', 'http://8.8.8.8/', 'http://172.32.0.1/', 'http://[::ffff:8.8.8.8]/'])('allows %s', (url) => {
    expect(() => checkUrl(url, false)).not.toThrow();
  });

  it('addresses', () => {
    for (const a of ['127.0.0.1', '::1', '::ffff:192.168.0.1', '::ffff:c0a8:1', 'fe80::1%eth0', '169.254.1.1', 'not-an-ip']) expect(isPrivateAddress(a)).toBe(true);
    for (const a of ['8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8', '1.1.1.1']) expect(isPrivateAddress(a)).toBe(false);
  });

  it('a name is refused when any address it resolves to is private', async () => {
    const fake: Resolver = async (h) => (h === 'rebind.example' ? [{ address: '93.184.216.34', family: 4 }, { address: '127.0.0.1', family: 4 }] : h === 'v6.example' ? [{ address: '::ffff:10.0.0.1', family: 6 }] : [{ address: '93.184.216.34', family: 4 }]);
    await expect(resolveDestination('rebind.example', false, fake)).rejects.toThrow(/resolves to a loopback/);
    await expect(resolveDestination('v6.example', false, fake)).rejects.toThrow(/resolves to a loopback/);
    await expect(resolveDestination('ok.example', false, fake)).resolves.toEqual({ address: '93.184.216.34', family: 4 });
    await expect(resolveDestination('nothing.example', false, async () => [])).rejects.toThrow(/no address/);
  });
});

describe('a delivery attempt', () => {
  it('to a name resolving to 127.0.0.1 is refused before any connection; allowed, it connects to the checked address, signed', async () => {
    let hits = 0;
    let seen: { host?: string; sig?: string; body?: string } = {};
    const srv = createServer((req, res) => {
      hits++;
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen = { host: req.headers.host, sig: String(req.headers['keygate-signature']), body };
        res.end('ok');
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as { port: number }).port;
    const toLoopback: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
    try {
      const no = await deliverOnce(`http://hooks.example:${port}/h`, 'whsec_x', 'evt_1_0_00000000', '{"a":1}', { allowPrivate: false, timeoutMs: 2000, resolve: toLoopback });
      expect(no).toEqual({ ok: false, error: expect.stringMatching(/^refused: .*loopback/) });
      expect(hits).toBe(0);
      const yes = await deliverOnce(`http://hooks.example:${port}/h`, 'whsec_x', 'evt_1_0_00000000', '{"a":1}', { allowPrivate: true, timeoutMs: 2000, resolve: toLoopback });
      expect(yes).toEqual({ ok: true, status: 200 });
      expect(seen.host).toBe(`hooks.example:${port}`);
      expect(verify('whsec_x', seen.body!, seen.sig!)).toBe(true);
    } finally {
      srv.closeAllConnections();
      srv.close();
    }
  });

  it('a receiver that never answers costs the timeout, not more', async () => {
    const srv = createServer(() => {});
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as { port: number }).port;
    const t0 = Date.now();
    const r = await deliverOnce(`http://127.0.0.1:${port}/`, 's', 'evt_1_0_00000000', '{}', { allowPrivate: true, timeoutMs: 300, resolve: async () => [] });
    expect(r).toEqual({ ok: false, error: 'no answer within 300 ms' });
    expect(Date.now() - t0).toBeLessThan(2000);
    srv.closeAllConnections();
    srv.close();
  });
});

describe('signature and settings', () => {
  it('signs "<t>.<body>" and verifies within 5 minutes only', () => {
    const h = sign('whsec_abc', '{"x":1}', 1_000_000);
    expect(h).toMatch(/^t=1000000,v1=[0-9a-f]{64}$/);
    expect(verify('whsec_abc', '{"x":1}', h, 1_000_300)).toBe(true);
    expect(verify('whsec_abc', '{"x":1}', h, 1_000_301)).toBe(false);
    expect(verify('whsec_abd', '{"x":1}', h, 1_000_000)).toBe(false);
    expect(verify('whsec_abc', '{"x":2}', h, 1_000_000)).toBe(false);
  });

  it('the default schedule retries for more than 24 hours; the setting is validated', () => {
    expect(DEFAULT_RETRY_SCHEDULE.reduce((a, b) => a + b, 0)).toBeGreaterThan(86_400);
    expect(loadWebhookConfig({}).retryScheduleSeconds).toEqual(DEFAULT_RETRY_SCHEDULE);
    expect(loadWebhookConfig({ KEYGATE_WEBHOOK_RETRY_SCHEDULE: '1, 2.5,60' }).retryScheduleSeconds).toEqual([1, 2.5, 60]);
    for (const bad of ['0', '-1', 'a', '1,,2']) expect(() => loadWebhookConfig({ KEYGATE_WEBHOOK_RETRY_SCHEDULE: bad })).toThrow(/RETRY_SCHEDULE/);
    expect(() => loadWebhookConfig({ KEYGATE_WEBHOOK_ALLOW_PRIVATE: 'yes' })).toThrow(/ALLOW_PRIVATE/);
    expect(loadWebhookConfig({}).disableAfterMs).toBe(5 * 86_400_000);
  });
});
