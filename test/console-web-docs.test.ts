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
import { expiryProblem, modelsProblem, nameProblem } from '../src/core/key-rules.ts';
import { rateProblem } from '../src/core/rate-text.ts';
import { plainNameWords, rateRefusalWords, rateWords, useWords } from '../web/src/format.ts';
import { usageSummary } from '../web/src/usage-chart.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startWebConsole, type WebConsole } from './helpers/web-console.ts';

const DOC = readFileSync(join(import.meta.dirname, '..', 'docs', 'web-console.md'), 'utf8');
const ASSETS = join(import.meta.dirname, '..', 'dist', 'web', 'assets');
/** The page's own source: every module of web/src/. */
const PAGE_SOURCE = readdirSync(join(import.meta.dirname, '..', 'web', 'src'), { recursive: true, withFileTypes: true })
  .filter((f) => f.isFile() && f.name.endsWith('.ts'))
  .map((f) => readFileSync(join(f.parentPath, f.name), 'utf8'))
  .join('\n');
/** The document's text with each run of white space (line breaks included) as one space. */
const FLAT = DOC.replace(/\s+/g, ' ');

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
    // signed out, the table, the form's errors, a new key, limit reached, the account, 360 px, the designed states,
    // a revealed key, the revoke dialog, an edit refused, dark, no wallet, owed, the audit and a rate-limited key
    const main = ['sign-in', 'list', 'create-errors', 'created', 'limit-reached', 'account', 'list-360', 'usage', 'empty', 'loading', 'error', 'offline', 'session-ended',
      'revealed', 'revoke', 'edit-error', 'list-dark', 'no-wallet', 'owed', 'audit', 'rate-limited'];
    // Every committed screenshot is shown.
    expect([...committed].sort()).toEqual([...new Set(shown)].sort());
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

  it('quotes the page\'s messages in its own words (a quote ending in … is the start of the message)', async () => {
    // The account-rate refusal as the API words it, then as the page puts it.
    await konsole.setAccountRates('docs-rates', { requests: { count: 10, per: 'second' } });
    const apiRefusal = await konsole.server.console.rates.checkWithinAccount('docs-rates', { requests: { count: 1000, per: 'minute' }, tokens: null }).then(
      () => '',
      (e: Error) => e.message,
    );
    const day = (i: number) => ({ day: `d${i}`, amount_micros: i === 29 ? 5_000_000 : 0, requests: i === 29 ? 1 : 0, input_tokens: i === 29 ? 1200 : 0, output_tokens: i === 29 ? 340 : 0 });
    const shown: [quote: string, page: string | null][] = [
      ['Give the key a name…', nameProblem('   ')],
      ['“not a model!!” is not a model name…', modelsProblem(['not a model!!'])],
      ['Choose a time in the future…', expiryProblem(Date.now() - 1000, Date.now())],
      ['Use at least 1 request per window.', rateProblem('0/s', 'requests')],
      ['Use at least 1 request per window.', rateProblem('-5/s', 'requests')],
      ['Use at most 1,000,000,000 requests per window.', rateProblem('1000000001/s', 'requests')],
      ['Your account allows at most 10/s: choose a request rate within it…', rateRefusalWords(apiRefusal)],
      ['7 requests per hour (3 used this window)', `${rateWords(7, 'request', 'hour')}${useWords({ used: 3 })}`],
      ['1,000 requests per hour (26 used this window, up to 25 of them reserved ahead by sidecars)', `${rateWords(1000, 'request', 'hour')}${useWords({ used: 26, held: 25 })}`],
      ['Last 30 days: 5.00 USD spent, 1 request, 1,200 input and 340 output tokens.', usageSummary(Array.from({ length: 30 }, (_, i) => day(i)), 'USD')],
      ['Here a plain gpt-4o-mini at the OpenAI entry counts as openai/gpt-4o-mini.', plainNameWords({ rule: 'provider', provider: 'openai' })],
      ["Here a plain gpt-4o-mini at the OpenAI entry is not read as any provider's: list the plain name too to allow it.", plainNameWords({ rule: 'none', provider: null })],
    ];
    for (const [quote, page] of shown) {
      expect(FLAT, quote).toContain(`“${quote}”`);
      expect(page, quote).not.toBeNull();
      if (quote.endsWith('…')) expect(page!.startsWith(quote.slice(0, -1)), `${quote} / ${page}`).toBe(true);
      else expect(page!.startsWith(quote), `${quote} / ${page}`).toBe(true);
    }
    // Words the page writes itself, as its source has them.
    for (const [quote, source] of [
      ['You are signed out.', "'You are signed out.'"],
      ['it expired', "'Your session has ended: it expired. Sign in again.'"],
      ['its token was revoked', "'Your session has ended: its token was revoked. Sign in with another token.'"],
      ['No request rate', '>No request rate<'],
      ['You are offline. What is shown may be out of date, and no change can be sent until the connection is back.', '>You are offline. What is shown may be out of date, and no change can be sent until the connection is back.<'],
      ['You are offline. Check your connection; the page tries again when it is back.', "'You are offline. Check your connection; the page tries again when it is back.'"],
    ] as const) {
      expect(FLAT, quote).toContain(`“${quote}”`);
      expect(PAGE_SOURCE, quote).toContain(source);
    }
    // Every other quote in the document is a name, not a message of the page.
    const checked = new Set([...shown.map(([q]) => q), 'You are signed out.', 'it expired', 'its token was revoked', 'No request rate', 'You are offline. What is shown may be out of date, and no change can be sent until the connection is back.', 'You are offline. Check your connection; the page tries again when it is back.']);
    const names = new Set(['Key list index', 'Performance', 'empty', 'until …', 'NAME (rolled)', 'NAME (rolled 2)', 'NAME (rolled 3)']);
    const quotes = [...FLAT.matchAll(/“((?:[^“”]|“[^”]*”)*)”/g)].map((m) => m[1]!);
    expect(quotes.length).toBeGreaterThan(10);
    for (const q of quotes) expect(checked.has(q) || names.has(q), q).toBe(true);
  });

  it('states the bundle sizes of the built page (rounded to the KiB, at most what it says)', () => {
    const files = readdirSync(ASSETS);
    const js = files.filter((f) => f.endsWith('.js')).map((f) => readFileSync(join(ASSETS, f)));
    const css = files.filter((f) => f.endsWith('.css')).map((f) => statSync(join(ASSETS, f)).size);
    const cssGz = files.filter((f) => f.endsWith('.css')).map((f) => gzipSync(readFileSync(join(ASSETS, f))).length);
    const m = /into `dist\/web\/`: (\d+) KiB of script \((\d+) KiB gzipped\) and (\d+) KiB of CSS \((\d+) KiB gzipped\)/.exec(FLAT)!;
    const kib = (n: number) => Math.round(n / 1024);
    expect(kib(js.reduce((s, b) => s + b.length, 0))).toBeLessThanOrEqual(Number(m[1]));
    expect(kib(js.reduce((s, b) => s + gzipSync(b).length, 0))).toBeLessThanOrEqual(Number(m[2]));
    expect(kib(css.reduce((s, n) => s + n, 0))).toBeLessThanOrEqual(Number(m[3]));
    expect(kib(cssGz.reduce((s, n) => s + n, 0))).toBeLessThanOrEqual(Number(m[4]));
    // No other size is stated beside them (a figure the test does not hold would drift).
    const building = FLAT.slice(FLAT.indexOf('## Building'), FLAT.indexOf('## Performance'));
    expect(building.match(/\d+(\.\d+)? KiB/g)).toHaveLength(4);
  });
});
