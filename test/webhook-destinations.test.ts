/**
 * Webhook destinations are resolved at creation, through every path (API, CLI, library), with the
 * system resolver: a name that resolves to loopback or a private address is refused, a name that
 * does not resolve is refused in its own words, a special-purpose literal (NAT64 local-use, IPv4-
 * translated) is refused — and nothing is stored. Private destinations are not allowed here.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConsoleServer } from '../src/console-api/main.ts';
import { isPrivateAddress } from '../src/events/ssrf.ts';
import { WebhookStore } from '../src/events/webhooks.ts';
import { callApi, startTestConsole } from './helpers/console-api.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
let redis: RedisServer;
let srv: ConsoleServer;
let base: string;
let admin: string;
const OWNED = `dst-${randomBytes(3).toString('hex')}`;
const saved = process.env.KEYGATE_WEBHOOK_ALLOW_PRIVATE;
/**
 * A name the system resolver maps to this machine: its own host name (in /etc/hosts or from the
 * resolver, always loopback or a private address on a test machine; checked below).
 */
const SELF = hostname();

beforeAll(async () => {
  delete process.env.KEYGATE_WEBHOOK_ALLOW_PRIVATE;
  redis = await startRedis();
  ({ srv, base, admin } = await startTestConsole(redis.url, OWNED));
}, 60_000);

afterAll(async () => {
  if (saved !== undefined) process.env.KEYGATE_WEBHOOK_ALLOW_PRIVATE = saved;
  await srv?.close();
  if (redis) await destroyRedis(redis);
});

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH!, HOME: process.env.HOME!, KEYGATE_NODE: process.execPath, REDIS_URL: redis.url, KEYGATE_REVEAL_KEY: REVEAL };
  return new Promise((resolve) => execFile(BIN, args, { env, timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr })));
}

const stored = async () => Object.keys(await srv.console.redis.hgetall(new WebhookStore(srv.console.redis, srv.console.schema.ns).s.endpoints())).length;

describe('POST /v1/webhooks resolves the destination', () => {
  it(`a name the system resolver maps to this machine (${SELF}) is refused at creation, nothing stored`, async () => {
    const addrs = (await lookup(SELF, { all: true })).map((a) => a.address);
    expect(addrs.length, `${SELF} resolves`).toBeGreaterThan(0);
    expect(addrs.some(isPrivateAddress), `${SELF} resolves to ${addrs.join(', ')}: loopback or private on a test machine`).toBe(true);
    const before = await stored();
    for (const url of [`http://${SELF}:9/hook`, `https://${SELF.toUpperCase()}/hook`]) {
      const res = await callApi(base, 'POST', '/v1/webhooks', { token: admin, body: { url, account: OWNED } });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.error.message).toMatch(new RegExp(`url: the host name ${SELF} resolves to a loopback, private`, 'i'));
    }
    expect(await stored()).toBe(before);
  });

  it('a name that does not resolve is refused with its own message', async () => {
    const res = await callApi(base, 'POST', '/v1/webhooks', { token: admin, body: { url: 'https://receiver.keygate-test.invalid/hook', account: OWNED } });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/url: the host name receiver\.keygate-test\.invalid (does not resolve|could not be resolved now)/);
  });

  it('special-purpose literals: NAT64 local-use, IPv4-translated, Teredo, 6to4 of a private v4', async () => {
    for (const url of ['http://[64:ff9b:1::a9fe:a9fe]/latest', 'http://[::ffff:0:127.0.0.1]/', 'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/', 'http://[2002:a9fe:a9fe::1]/', 'http://192.31.196.1/']) {
      const res = await callApi(base, 'POST', '/v1/webhooks', { token: admin, body: { url, account: OWNED } });
      expect(res.status, url).toBe(400);
      expect(res.body.error.message, url).toMatch(/loopback, private/);
    }
  });

  it('the CLI and the library refuse the same name', async () => {
    const before = await stored();
    const r = await cli(['webhooks', 'create', '--url', `http://${SELF}/x`, '--account', OWNED]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/resolves to a loopback, private/);
    const gone = await cli(['webhooks', 'create', '--url', 'http://nothing.keygate-test.invalid/x', '--account', OWNED]);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).toMatch(/does not resolve|could not be resolved now/);
    await expect(srv.console.createWebhook({ url: `http://${SELF}/x`, account: OWNED }, undefined, { allowPrivate: false })).rejects.toThrow(/url: the host name .* resolves to a loopback, private/);
    expect(await stored()).toBe(before);
  }, 60_000);
});
