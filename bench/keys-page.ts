/**
 * The "API keys" page and its list API at 10,000 keys in one account.
 *
 *   scripts/node bench/keys-page.ts [--keys 10000] [--rounds 20] [--out bench/results/NAME.md]
 *
 * Starts its own redis-server and `keygate console`, creates the keys through the console library
 * (100 active, the rest revoked: an account may hold 100 active keys), then times, over HTTP with a
 * session-less bearer token, `GET /v1/accounts/{account}/keys` for the page's first page (Current,
 * newest first), a search, the Revoked filter and a page deep in the Revoked list (by cursor); and
 * in Debian's Chromium, the page from navigation to its keys table drawn (signed in). Prints
 * markdown (and writes it with --out).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { CLI_ACTOR } from '../src/console/management.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { startConsole } from '../src/console-api/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { launchBrowser } from './lib/browser.ts';
import { percentile } from './lib/loadgen.ts';
import { startRedis } from './lib/redis.ts';

const { values: opt } = parseArgs({ options: { keys: { type: 'string', default: '10000' }, rounds: { type: 'string', default: '20' }, out: { type: 'string' } } });
const KEYS = Number(opt.keys);
const ROUNDS = Number(opt.rounds);
const ACCOUNT = 'bench-page';
const load0 = loadavg().map((x) => x.toFixed(2)).join(' ');

const redis = await startRedis();
const config = loadConsoleApiConfig({ port: 0, redisUrl: redis.url }, { KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_CONSOLE_RATE_LIMIT: '1000000' });
const srv = await startConsole(config, createLogger('silent'), { revealKey: `k1:${randomBytes(32).toString('base64')}` });
const base = `http://127.0.0.1:${srv.port}`;
const lines: string[] = [];
try {
  const seedStart = performance.now();
  const revoked = KEYS - 100;
  let hint = '';
  let firstId = '';
  for (let made = 0; made < KEYS; ) {
    const batch = Math.min(50, KEYS - made);
    const created = await Promise.all(Array.from({ length: batch }, (_, i) => srv.console.createKey({ account: ACCOUNT, name: `service ${String(made + i).padStart(5, '0')}` }, CLI_ACTOR)));
    if (made < revoked) await Promise.all(created.map((c) => srv.console.revokeKey(c.id, CLI_ACTOR)));
    hint = created[0]!.record.hint;
    firstId ||= created[0]!.id;
    made += batch;
  }
  const seedMs = performance.now() - seedStart;
  const token = (await srv.console.createToken({ name: 'bench', account: ACCOUNT }, CLI_ACTOR)).token;

  const get = async (path: string) => {
    const t = performance.now();
    const r = await fetch(base + path, { headers: { authorization: `Bearer ${token}` } });
    const body = (await r.json()) as { keys: unknown[]; next_cursor: string | null; total?: number };
    if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
    return { ms: performance.now() - t, body };
  };
  // A cursor deep in the Revoked list: page 100 of 50.
  let cursor: string | null = null;
  for (let i = 0; i < 99; i++) cursor = (await get(`/v1/accounts/${ACCOUNT}/keys?status=revoked&sort=-created${cursor ? `&cursor=${cursor}` : ''}`)).body.next_cursor;
  const cases: [string, string][] = [
    ['first page (Current, newest first, 50)', `/v1/accounts/${ACCOUNT}/keys?status=current&sort=-created`],
    ['search by name ("service 0999")', `/v1/accounts/${ACCOUNT}/keys?status=all&q=service%200999`],
    ['search by hint (exact)', `/v1/accounts/${ACCOUNT}/keys?status=all&q=${encodeURIComponent(hint)}`],
    ['Revoked, first page (50)', `/v1/accounts/${ACCOUNT}/keys?status=revoked&sort=-created`],
    ['Revoked, page 100 by cursor', `/v1/accounts/${ACCOUNT}/keys?status=revoked&sort=-created&cursor=${cursor}`],
    ['All, 200 a page, by name', `/v1/accounts/${ACCOUNT}/keys?status=all&sort=name&limit=200`],
    // The page's other requests, for where the page's time goes.
    ['(page) the account', `/v1/accounts/${ACCOUNT}`],
    ['(page) the ledger, 20', `/v1/accounts/${ACCOUNT}/ledger?limit=20`],
    ['(page) the audit, 20', `/v1/audit?account=${ACCOUNT}&limit=20`],
    ["(page) a key's 30 days", `/v1/keys/${firstId}/usage?days=30`],
  ];
  const rows: string[] = [];
  for (const [label, path] of cases) {
    await get(path); // warm
    const times: number[] = [];
    let total = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const r = await get(path);
      times.push(r.ms);
      total = r.body.total ?? 0;
    }
    times.sort((a, b) => a - b);
    rows.push(`| ${label} | ${total} | ${percentile(times, 50).toFixed(1)} | ${percentile(times, 95).toFixed(1)} |`);
  }

  // The page in Chromium: navigation to the keys table drawn, signed in (the session cookie set once).
  const browser = await launchBrowser({ baseURL: base });
  const pageTimes: number[] = [];
  const domTimes: number[] = [];
  const keysTimes: number[] = [];
  const apiTimes: number[] = [];
  try {
    const { page } = browser;
    const pageToken = (await srv.console.createToken({ name: 'bench page', account: ACCOUNT }, CLI_ACTOR)).token;
    await page.goto('/');
    await page.getByLabel('Token').fill(pageToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('tbody tr').first().waitFor({ timeout: 60_000 });
    for (let i = 0; i < Math.min(ROUNDS, 10); i++) {
      const t = performance.now();
      await page.goto('/');
      await page.locator('tbody tr').nth(49).waitFor({ timeout: 60_000 });
      pageTimes.push(performance.now() - t);
      // Where the time went, by the page's own clock (ms from navigation start).
      const [dcl, keysDone, apiDone] = await page.evaluate(() => {
        const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
        const api = performance.getEntriesByType('resource').filter((e) => /\/(v1|session)/.test(e.name)) as PerformanceResourceTiming[];
        const keys = api.filter((e) => e.name.includes('/keys?'));
        return [nav.domContentLoadedEventEnd, Math.max(0, ...keys.map((e) => e.responseEnd)), Math.max(0, ...api.map((e) => e.responseEnd))];
      });
      domTimes.push(dcl);
      keysTimes.push(keysDone);
      apiTimes.push(apiDone);
    }
  } finally {
    await browser.close();
  }
  for (const t of [pageTimes, domTimes, keysTimes, apiTimes]) t.sort((a, b) => a - b);

  lines.push(
    `# bench/keys-page.ts — the keys page and its list API at ${KEYS.toLocaleString('en-US')} keys`,
    '',
    `Command: \`scripts/node bench/keys-page.ts --keys ${KEYS} --rounds ${ROUNDS}\` (${cpus().length} vCPU, load average ${load0} at the start, shared with other work; Node ${process.versions.node}).`,
    `One account with ${KEYS.toLocaleString('en-US')} keys: 100 active, ${revoked.toLocaleString('en-US')} revoked (made in ${(seedMs / 1000).toFixed(1)} s through the console library).`,
    '',
    `\`GET /v1/accounts/{account}/keys\` over HTTP on loopback, ${ROUNDS} requests each after one warm-up, milliseconds:`,
    '',
    '| request | matching keys | p50 ms | p95 ms |',
    '|---|---:|---:|---:|',
    ...rows,
    '',
    `The page in Chromium (headless, Debian's), signed in: navigation to the 50th row of the keys table drawn, ${pageTimes.length} loads, p50 **${percentile(pageTimes, 50).toFixed(0)} ms**, p95 ${percentile(pageTimes, 95).toFixed(0)} ms (the page's own requests — session, keys, account, ledger, audit — included). By the page's clock (p50, from navigation start): the document parsed and its script run at ${percentile(domTimes, 50).toFixed(0)} ms, the keys answer in at ${percentile(keysTimes, 50).toFixed(0)} ms, the last of its API answers at ${percentile(apiTimes, 50).toFixed(0)} ms; the rest is the browser drawing and the test harness seeing it.`,
    '',
    'How a page is made: newest or oldest first over All, Current or Revoked, the console reads a range of the account\'s key list index (sorted sets by creation time; Revoked skips the at most 100 current keys) and then the page\'s own key records and usage: the cost of a page is its size. The other filters read the current keys\' index entries (at most 100); a search or a sort by name or expiry reads every key\'s small index fields (one HGETALL), never the records. The rows marked (page) are the page\'s other requests.',
  );
} finally {
  await srv.close();
  await redis.stop();
}
const text = `${lines.join('\n')}\n`;
process.stdout.write(text);
if (opt.out) writeFileSync(opt.out, text);
