/**
 * The webhook destination rule with hostile URLs, and a delivery attempt to a name that resolves to
 * loopback (a resolver seam stands in for DNS; the connection goes to the address that was checked).
 */
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { deliverOnce } from '../../src/events/http-delivery.ts';
import { sign, verify } from '../../src/events/signature.ts';
import { checkDestination, checkUrl, isPrivateAddress, resolveDestination, type Resolver } from '../../src/events/ssrf.ts';
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

/** Every special-purpose range of the IANA IPv4 and IPv6 registries, one class per row: a sample inside it. */
describe('every special-purpose class (IANA v4 and v6 registries), literal and embedded', () => {
  const classes: [string, string[]][] = [
    ['this network 0.0.0.0/8', ['0.0.0.0', '0.1.2.3']],
    ['private-use 10/8, 172.16/12, 192.168/16', ['10.0.0.1', '172.16.0.1', '172.31.255.254', '192.168.255.1']],
    ['shared address space 100.64/10', ['100.64.0.1', '100.127.255.254']],
    ['loopback 127/8', ['127.0.0.1', '127.255.255.254']],
    ['link-local 169.254/16', ['169.254.169.254', '169.254.0.1']],
    ['IETF protocol assignments 192.0.0/24 (incl. NAT64 discovery .170/.171, PCP and TURN anycast)', ['192.0.0.1', '192.0.0.9', '192.0.0.10', '192.0.0.170', '192.0.0.171']],
    ['documentation TEST-NET-1/2/3', ['192.0.2.1', '198.51.100.1', '203.0.113.1']],
    ['AS112-v4 192.31.196/24 and direct delegation AS112 192.175.48/24', ['192.31.196.1', '192.175.48.1']],
    ['AMT 192.52.193/24', ['192.52.193.1']],
    ['deprecated 6to4 relay anycast 192.88.99/24', ['192.88.99.1']],
    ['benchmarking 198.18/15', ['198.18.0.1', '198.19.255.1']],
    ['multicast 224/4', ['224.0.0.1', '239.255.255.250']],
    ['reserved 240/4 and limited broadcast', ['240.0.0.1', '255.255.255.255']],
    ['v6 unspecified and loopback', ['::', '::1']],
    ['IPv4-mapped ::ffff:0:0/96 of a special v4', ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '::ffff:a00:1']],
    ['IPv4-translated ::ffff:0:0:0/96 (SIIT) of a special v4', ['::ffff:0:127.0.0.1', '::ffff:0:7f00:1', '::ffff:0:10.0.0.1', '0:0:0:0:ffff:0:a9fe:a9fe']],
    ['IPv4-compatible ::/96 of a special v4', ['::127.0.0.1', '::10.0.0.1']],
    ['NAT64 well-known 64:ff9b::/96 of a special v4', ['64:ff9b::127.0.0.1', '64:ff9b::a9fe:a9fe', '64:ff9b::a00:1']],
    ['NAT64 local-use 64:ff9b:1::/48 (RFC 8215), whatever it embeds', ['64:ff9b:1::a9fe:a9fe', '64:ff9b:1::808:808', '64:ff9b:1:ffff::1']],
    ['discard-only 100::/64 and dummy prefix 100:0:0:1::/64', ['100::1', '100:0:0:1::1']],
    ['IETF protocol assignments 2001::/23', ['2001:1::1', '2001:2::1', '2001:3::1', '2001:4:112::1', '2001:20::1', '2001:30::1', '2001:1ff::1']],
    ['Teredo 2001::/32, the XOR-ed client v4 private or public', ['2001:0:4136:e378:8000:63bf:80ff:fffe', '2001:0:4136:e378:8000:63bf:f5ff:fffe', '2001:0:4136:e378:8000:63bf:f7f7:f7f7']],
    ['documentation 2001:db8::/32 and 3fff::/20', ['2001:db8::1', '3fff::1', '3fff:fff::1']],
    ['6to4 2002::/16 of a special v4', ['2002:7f00:1::', '2002:a00:1::1', '2002:a9fe:a9fe::1', '2002:c0a8:101::1']],
    ['AS112 direct delegation 2620:4f:8000::/48', ['2620:4f:8000::1']],
    ['segment routing SIDs 5f00::/16', ['5f00::1']],
    ['unique-local fc00::/7 (incl. the EC2 metadata fd00:ec2::254)', ['fc00::1', 'fd00:ec2::254', 'fdff::1']],
    ['link-local fe80::/10 and site-local fec0::/10', ['fe80::1', 'fe80::1%eth0', 'febf::1', 'fec0::1']],
    ['multicast ff00::/8', ['ff02::1', 'ff05::1:3']],
    ['outside global unicast 2000::/3 (reserved by the IETF)', ['4000::1', '8000::1', 'e000::1', '1:2:3:4:5:6:7:8', '::1:2:3:4']],
  ];
  it.each(classes)('%s: refused, as an address and in a URL', (_name, addrs) => {
    for (const a of addrs) {
      expect(isPrivateAddress(a), a).toBe(true);
      const host = a.includes(':') ? `[${a.split('%')[0]}]` : a;
      expect(() => checkUrl(`http://${host}/hook`, false), a).toThrow(/loopback, private/);
      expect(() => checkUrl(`http://${host}/hook`, true), a).not.toThrow();
    }
  });

  it('public addresses pass, also embedded in the mapped, translated, NAT64 well-known and 6to4 forms', () => {
    for (const a of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '100.63.255.255', '100.128.0.0', '172.15.255.255', '172.32.0.0', '192.0.1.1', '192.88.98.1', '198.17.255.255', '198.20.0.0', '223.255.255.255', '::ffff:8.8.8.8', '::ffff:0:8.8.8.8', '::ffff:0:808:808', '64:ff9b::8.8.8.8', '2002:808:808::1', '2606:4700::1111', '2a00:1450:4001::1', '2001:200::1', '2620:4f:8001::1', '3fff:1000::1']) {
      expect(isPrivateAddress(a), a).toBe(false);
    }
  });
});

describe('resolution at creation', () => {
  it('a name is refused when any address it resolves to is special, in any embedded form; its own message when it does not resolve; bounded in time', async () => {
    const answers: Record<string, string[]> = { 'a.example': ['93.184.216.34', '::ffff:0:127.0.0.1'], 'b.example': ['2606:4700::1111', '64:ff9b:1::a9fe:a9fe'], 'ok.example': ['93.184.216.34', '2606:4700::1111'] };
    const fake: Resolver = async (h) => {
      if (h === 'slow.example') return new Promise(() => {});
      if (h === 'gone.example') throw Object.assign(new Error('getaddrinfo ENOTFOUND gone.example'), { code: 'ENOTFOUND' });
      return (answers[h] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };
    await expect(checkDestination('http://a.example/x', false, fake)).rejects.toThrow(/resolves to a loopback, private/);
    await expect(checkDestination('http://b.example/x', false, fake)).rejects.toThrow(/resolves to a loopback, private/);
    await expect(checkDestination('http://gone.example/x', false, fake)).rejects.toThrow(/gone\.example does not resolve/);
    await expect(checkDestination('http://none.example/x', false, fake)).rejects.toThrow(/none\.example does not resolve/);
    const t0 = Date.now();
    await expect(checkDestination('http://slow.example/x', false, fake, 200)).rejects.toThrow(/did not resolve within 0\.2 s/);
    expect(Date.now() - t0).toBeLessThan(1500);
    await expect(checkDestination('https://ok.example/x', false, fake)).resolves.toMatchObject({ host: 'ok.example' });
    await expect(checkDestination('http://a.example/x', true, fake)).resolves.toMatchObject({ host: 'a.example' });
    await expect(checkDestination('http://[::ffff:0:127.0.0.1]/x', false, fake)).rejects.toThrow(/loopback, private/);
  });
});
