/**
 * The claims of docs/web-console.md checked against the running console (real Redis, real HTTP):
 * the Content-Security-Policy it quotes, the caching it states per kind of answer, the messages a
 * session's end gives, and the bundle sizes it states (the built page in dist/web/).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import Fastify from 'fastify';
import { consoleWebPlugin } from '../src/console-web/plugin.ts';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startWebConsole, type WebConsole } from './helpers/web-console.ts';

const DOC = readFileSync(join(import.meta.dirname, '..', 'docs', 'web-console.md'), 'utf8');
const ASSETS = join(import.meta.dirname, '..', 'dist', 'web', 'assets');

let redis: RedisServer;
let konsole: WebConsole;

beforeAll(async () => {
  redis = await startRedis();
  konsole = await startWebConsole(redis.url);
}, 60_000);

afterAll(async () => {
  await konsole?.close();
  if (redis) await destroyRedis(redis);
});

describe('docs/web-console.md', () => {
  it('quotes the Content-Security-Policy the page is served with', async () => {
    const quoted = /`Content-Security-Policy: ([^`]+)`/.exec(DOC)![1];
    const res = await fetch(`${konsole.url}/`);
    expect(res.status).toBe(200);
    const directives = (csp: string) => csp.split(';').map((d) => d.trim()).filter(Boolean);
    expect(directives(res.headers.get('content-security-policy')!)).toEqual(directives(quoted!));
    for (const [h, v] of [
      ['x-frame-options', 'DENY'],
      ['x-content-type-options', 'nosniff'],
      ['referrer-policy', 'no-referrer'],
    ] as const) {
      expect(DOC.toLowerCase()).toContain(`\`${h}: ${v.toLowerCase()}\``);
      expect(res.headers.get(h)).toBe(v);
    }
  });

  it('caching: no-store on API and session answers, no-cache on the page, a year and immutable on the fingerprinted assets', async () => {
    const page = await fetch(`${konsole.url}/`);
    expect(page.headers.get('cache-control')).toBe('no-cache');
    expect(page.headers.get('etag')).toBeTruthy();
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(await page.text())![1]!;
    const asset = await fetch(konsole.url + script);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await fetch(`${konsole.url}/session`)).headers.get('cache-control')).toBe('no-store');
    expect((await fetch(`${konsole.url}/v1/accounts/a/keys`)).headers.get('cache-control')).toBe('no-store');
    expect(DOC).toContain('`no-cache` on the page itself');
  });

  it('a session ended by a revoked token says so, as the page shows it', async () => {
    const t = await konsole.createToken('docs-acct', 'owner');
    const signIn = await fetch(`${konsole.url}/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: konsole.url },
      body: JSON.stringify({ token: t.token }),
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    expect((await fetch(`${konsole.url}/v1/accounts/docs-acct/keys`, { headers: { cookie } })).status).toBe(200);
    await konsole.revokeToken(t.id);
    const ended = await fetch(`${konsole.url}/v1/accounts/docs-acct/keys`, { headers: { cookie } });
    expect(ended.status).toBe(401);
    expect(((await ended.json()) as { error: { message: string } }).error.message).toMatch(/its token was revoked/);
    expect(DOC).toContain('“its token was revoked”');
    const gone = await fetch(`${konsole.url}/v1/accounts/docs-acct/keys`, { headers: { cookie } });
    expect(((await gone.json()) as { error: { message: string } }).error.message).toMatch(/expired or was signed out/);
  });

  it('the README shows a committed screenshot of each main state the page has (every one it shows exists)', () => {
    const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8');
    const shown = [...readme.matchAll(/!\[[^\]]*\]\(docs\/screenshots\/([\w-]+\.png)\)/g)].map((m) => m[1]!);
    const committed = readdirSync(join(import.meta.dirname, '..', 'docs', 'screenshots'));
    for (const f of shown) expect(committed, f).toContain(f);
    // signed out, the table, the form's errors, a new key, limit reached, the account, 360 px, and the designed states
    const main = ['sign-in', 'list', 'create-errors', 'created', 'limit-reached', 'account', 'list-360', 'usage', 'empty', 'loading', 'error', 'offline', 'session-ended'];
    expect(shown.map((f) => f.replace(/\.png$/, '')).sort()).toEqual(expect.arrayContaining(main.sort()));
  });

  it('a console without the built page answers / with a 503 naming the command that builds it', async () => {
    expect(DOC.replace(/\s+/g, ' ')).toContain('The console answers `/` with a 503 naming that command when the bundle is missing.');
    const empty = mkdtempSync(join(tmpdir(), 'kg-noweb-'));
    const app = Fastify({ logger: false });
    try {
      await app.register(consoleWebPlugin, {
        redis: redis.client(),
        namespace: 'kgdocs',
        staticRoot: empty,
        tokens: { verify: async () => null, byId: async () => null },
      });
      const res = await app.inject({ method: 'GET', url: '/' });
      expect(res.statusCode).toBe(503);
      expect(res.body).toBe('The web console is not built: run `npm run build:web`.\n');
      expect(DOC).toContain('`npm run build:web`');
    } finally {
      await app.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('states the bundle sizes of the built page (rounded to the KiB, at most what it says)', () => {
    const files = readdirSync(ASSETS);
    const js = files.filter((f) => f.endsWith('.js')).map((f) => readFileSync(join(ASSETS, f)));
    const css = files.filter((f) => f.endsWith('.css')).map((f) => statSync(join(ASSETS, f)).size);
    const m = /into `dist\/web\/`: (\d+) KiB of script \((\d+) KiB gzipped\) and (\d+) KiB of CSS/.exec(DOC)!;
    const kib = (n: number) => Math.round(n / 1024);
    expect(kib(js.reduce((s, b) => s + b.length, 0))).toBeLessThanOrEqual(Number(m[1]));
    expect(kib(js.reduce((s, b) => s + gzipSync(b).length, 0))).toBeLessThanOrEqual(Number(m[2]));
    expect(kib(css.reduce((s, n) => s + n, 0))).toBeLessThanOrEqual(Number(m[3]));
  });
});
