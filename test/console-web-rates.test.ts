/// <reference lib="dom" />
/**
 * A key's rates set through the "API keys" page, end to end: a real headless Chromium on the real
 * console (management API and web plugin) over a real redis-server, with a real sidecar on the same
 * store. The form's bad rates (0, negative, not a number, above the most the API takes) are refused
 * on the page in words, with nothing sent and nothing stored, on create and on edit; good rates are
 * created and edited through the form, shown back in the Rates column (with the current window's
 * use) and the form, stored in the key record (`rate`, `token_rate`) and the token-rate mirror
 * (`tokrate:{acct}:{keyId}`) as
 * src/schema/rates.ts names them, and as the console library reads them; the largest rates the API
 * takes are accepted; and the sidecar honours the request rate set on the page: exactly N allowed in
 * the window (the `x-ratelimit-*` headers counting down, the window counter at N), then 429
 * RATE_LIMITED in the client's (OpenAI's) shape. The page offers no account rates (an operator sets
 * those), so only a key's are set here.
 */
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { keyDigest } from '../src/core/key-format.ts';
import { rateKeys, RateField, RequestWindowField, TokenWindowField } from '../src/schema/rates.ts';
import { schema } from '../src/schema/redis-schema.ts';
import type { TestBrowser } from './helpers/browser.ts';
import { deniedBody, deniedHeaders, responseHeadersToAdd } from './helpers/envoy-client.ts';
import { awayFromWindowEnd } from './helpers/rate-window.ts';
import { chatRequest, outcomeOf, startStack, waitTracking, type Stack } from './helpers/sidecars.ts';
import { signedInPage, startWebConsole, type WebConsole } from './helpers/web-console.ts';

const ACCOUNT = 'acct-rates';
const S = schema();
const RK = rateKeys(S);

let stack: Stack | undefined;
let konsole: WebConsole | undefined;
let browser: TestBrowser | undefined;
const problems: string[] = [];
/** Every request the page sent, as `METHOD /path`. */
const sent: string[] = [];

beforeAll(async () => {
  stack = await startStack();
  konsole = await startWebConsole(stack.redis.url);
  const token = await konsole.createToken(ACCOUNT, 'owner');
  browser = await signedInPage(konsole.url, token.token, { sent, problems, ready: 'No keys yet.', beforeSignIn: () => waitTracking(stack!) });
}, 120_000);

afterAll(async () => {
  // Each one stopped even when the one before failed, and when setup stopped halfway.
  await browser?.close().catch(() => {});
  await konsole?.close().catch(() => {});
  await stack?.close();
});

const poll = <T>(f: () => T | Promise<T>) => expect.poll(f, { timeout: 10_000 });
const namesShown = (page: Page) => page.locator('tbody .key-name').allInnerTexts();
const SHOTS = process.env.KEYGATE_UPDATE_SCREENSHOTS === '1' ? join(import.meta.dirname, '..', 'docs', 'screenshots') : null;
/** With `KEYGATE_UPDATE_SCREENSHOTS=1`, writes the screenshot to docs/screenshots/ (as the end-to-end suite does). */
const shot = async (page: Page, name: string) => {
  if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`), animations: 'disabled' });
};
const row = (page: Page, name: string) => page.locator('tbody tr').filter({ has: page.locator('.key-name', { hasText: new RegExp(`^${name}$`) }) });
const writesSince = (n: number) => sent.slice(n).filter((r) => /^(POST|PATCH|PUT|DELETE) \/v1\//.test(r));
/** Every rate record in the store (windows and token mirrors). */
const rateRecords = async () => [...(await stack!.db.keys(`${S.ns}:v1:rate:*`)), ...(await stack!.db.keys(`${S.ns}:v1:tokrate:*`))];

const REQUEST_WORDS = 'Write requests per unit as N/UNIT, like 5/s or 1000/m (unit s, m, h or d). Empty has no limit.';
const TOKEN_WORDS = 'Write tokens per unit as N/UNIT, like 5/s or 1000/m (unit s, m, h or d). Empty has no limit.';
/** The bad rates typed in the form, each with the words the page must show next to its field. */
const BAD: { rate: string; rateError: string; tokenRate: string; tokenError: string }[] = [
  { rate: '0/s', rateError: 'Use at least 1 request per window. Empty has no limit.', tokenRate: '0/h', tokenError: 'Use at least 1 token per window. Empty has no limit.' },
  { rate: '-5/s', rateError: 'Use at least 1 request per window. Empty has no limit.', tokenRate: '-100/m', tokenError: 'Use at least 1 token per window. Empty has no limit.' },
  { rate: 'five/s', rateError: REQUEST_WORDS, tokenRate: 'lots', tokenError: TOKEN_WORDS },
  { rate: '5', rateError: REQUEST_WORDS, tokenRate: '2.5/h', tokenError: TOKEN_WORDS },
  { rate: '1000000001/s', rateError: 'Use at most 1,000,000,000 requests per window.', tokenRate: '1000000000001/d', tokenError: 'Use at most 1,000,000,000,000 tokens per window.' },
];

/** Types each bad pair into the open dialog and submits: both fields said wrong, nothing sent. */
async function refusesBadRates(page: Page, submit: 'Create' | 'Save'): Promise<void> {
  const dialog = page.getByRole('dialog');
  for (const bad of BAD) {
    await dialog.getByLabel('Rate', { exact: true }).fill(bad.rate);
    await dialog.getByLabel('Token rate').fill(bad.tokenRate);
    const before = sent.length;
    await dialog.getByRole('button', { name: submit, exact: true }).click();
    await dialog.getByText('Check 2 fields: Rate, Token rate.').waitFor();
    expect(await dialog.locator('#f-rate-error').innerText(), bad.rate).toBe(bad.rateError);
    expect(await dialog.locator('#f-token_rate-error').innerText(), bad.tokenRate).toBe(bad.tokenError);
    for (const label of ['Rate', 'Token rate']) expect(await dialog.getByLabel(label, { exact: true }).getAttribute('aria-invalid')).toBe('true');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('f-rate');
    expect(writesSince(before), `${bad.rate} ${bad.tokenRate}`).toEqual([]);
  }
}

describe('rates set through the API keys page', () => {
  let key = '';
  let id = '';

  it('refuses bad rates in the create form, in words next to each field; nothing is sent or stored', async () => {
    const page = browser!.page;
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog').getByLabel('Name', { exact: true }).fill('bad rates');
    await refusesBadRates(page, 'Create');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    expect(await konsole!.keyCount(ACCOUNT)).toBe(0);
    expect(await rateRecords()).toEqual([]);
  });

  it('creates a key with both rates; the page, the key record, the token mirror and the library show them', async () => {
    const page = browser!.page;
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Name', { exact: true }).fill('rated');
    await dialog.getByLabel('Rate', { exact: true }).fill('3/s');
    await dialog.getByLabel('Token rate').fill(' 5000/m '); // spaces around are fine
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await dialog.getByText('You will not see this key again unless you reveal it.').waitFor();
    key = await dialog.getByLabel('Key', { exact: true }).inputValue();
    expect(key).toMatch(/^kg_[0-9A-Za-z]{38}$/);
    await dialog.getByRole('button', { name: 'Done' }).click();
    const r = row(page, 'rated');
    await poll(() => r.locator('td[data-slot="rates"]').innerText()).toMatch(/^3 requests per second \(0 used this window\)\s+5,000 tokens per minute \(0 used this window\)$/);
    id = (await r.getAttribute('id'))!.replace(/^key-/, '');

    expect(await stack!.db.hmget(S.keyRecord(keyDigest(key)), RateField.rate, RateField.tokenRate)).toEqual(['3/s', '5000/m']);
    const mirror = await stack!.db.hgetall(RK.tokens(ACCOUNT, id));
    expect({ limit: mirror[TokenWindowField.limit], per: mirror[TokenWindowField.per] }).toEqual({ limit: '5000', per: 'minute' });
    expect((await konsole!.server.console.getKey(id)).rates).toEqual({ requests: { count: 3, per: 'second' }, tokens: { count: 5000, per: 'minute' } });

    // The sidecar sees the rate of the new key on its first request.
    const first = await stack!.client.check(chatRequest(key));
    expect(outcomeOf(first)).toBe('allow');
    expect(responseHeadersToAdd(first)['x-ratelimit-limit-requests']).toBe('3');
  });

  it('refuses bad rates in the edit form too; the stored rates stay as they were', async () => {
    const page = browser!.page;
    await row(page, 'rated').getByRole('button', { name: 'Edit' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.getByLabel('Rate', { exact: true }).inputValue()).toBe('3/s');
    expect(await dialog.getByLabel('Token rate').inputValue()).toBe('5000/m');
    await refusesBadRates(page, 'Save');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    expect(await stack!.db.hmget(S.keyRecord(keyDigest(key)), RateField.rate, RateField.tokenRate)).toEqual(['3/s', '5000/m']);
    expect((await konsole!.server.console.getKey(id)).rates).toEqual({ requests: { count: 3, per: 'second' }, tokens: { count: 5000, per: 'minute' } });
  });

  it('takes the largest rates the API accepts', async () => {
    const page = browser!.page;
    await row(page, 'rated').getByRole('button', { name: 'Edit' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Rate', { exact: true }).fill('1000000000/s');
    await dialog.getByLabel('Token rate').fill('1000000000000/d');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    await poll(() => row(page, 'rated').locator('td[data-slot="rates"]').innerText()).toMatch(/^1,000,000,000 requests per second \(\d+ used this window\)\s+1,000,000,000,000 tokens per day \(0 used this window\)$/);
    expect(await stack!.db.hmget(S.keyRecord(keyDigest(key)), RateField.rate, RateField.tokenRate)).toEqual(['1000000000/s', '1000000000000/d']);
  });

  it('edits the rates; the sidecar then allows exactly the request rate in the window and refuses the next with 429 RATE_LIMITED', async () => {
    const page = browser!.page;
    await row(page, 'rated').getByRole('button', { name: 'Edit' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Rate', { exact: true }).fill('7/h');
    await dialog.getByLabel('Token rate').fill('250000/d');
    const before = sent.length;
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(writesSince(before)).toEqual([`PATCH /v1/keys/${id}`]);
    await poll(() => row(page, 'rated').locator('td[data-slot="rates"]').innerText()).toMatch(/^7 requests per hour \(0 used this window\)\s+250,000 tokens per day \(0 used this window\)$/);
    // Shown back in the form as typed.
    await row(page, 'rated').getByRole('button', { name: 'Edit' }).click();
    expect(await dialog.getByLabel('Rate', { exact: true }).inputValue()).toBe('7/h');
    expect(await dialog.getByLabel('Token rate').inputValue()).toBe('250000/d');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });

    expect(await stack!.db.hmget(S.keyRecord(keyDigest(key)), RateField.rate, RateField.tokenRate)).toEqual(['7/h', '250000/d']);
    const mirror = await stack!.db.hgetall(RK.tokens(ACCOUNT, id));
    expect({ limit: mirror[TokenWindowField.limit], per: mirror[TokenWindowField.per] }).toEqual({ limit: '250000', per: 'day' });
    expect((await konsole!.server.console.getKey(id)).rates).toEqual({ requests: { count: 7, per: 'hour' }, tokens: { count: 250000, per: 'day' } });

    await awayFromWindowEnd('hour');
    const hour = Math.floor(Date.now() / 3_600_000);
    const remaining: string[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await stack!.client.check(chatRequest(key));
      expect(outcomeOf(res), `request ${i + 1} of 7`).toBe('allow');
      const h = responseHeadersToAdd(res);
      expect(h['x-ratelimit-limit-requests']).toBe('7');
      remaining.push(h['x-ratelimit-remaining-requests']!);
    }
    expect(remaining).toEqual(['6', '5', '4', '3', '2', '1', '0']);
    const denied = await stack!.client.check(chatRequest(key));
    expect(Math.floor(Date.now() / 3_600_000)).toBe(hour); // all in one window
    expect(outcomeOf(denied)).toBe('RATE_LIMITED');
    expect(denied.status?.code).toBe(8); // RESOURCE_EXHAUSTED
    expect(denied.denied_response?.status?.code).toBe(429);
    const body = deniedBody(denied);
    expect(body.error.type).toBe('rate_limit_error');
    expect(body.error.code).toBe('RATE_LIMITED');
    expect(JSON.stringify(body)).toContain('key request rate 7/h');
    const h = deniedHeaders(denied);
    expect(h['x-should-retry']).toBeUndefined();
    const retry = Number(h['retry-after']);
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(3600);
    // The shared window counter holds exactly the allowed seven.
    const window = await stack!.db.hgetall(RK.requests(ACCOUNT, id));
    expect(Number(window[RequestWindowField.start])).toBe(hour * 3_600_000);
    expect(window[RequestWindowField.counted]).toBe('7');
    expect(outcomeOf(await stack!.client.check(chatRequest(key)))).toBe('RATE_LIMITED');
    // The page shows the window's use beside the rate (the state filter already knows the key is rate limited).
    await page.reload();
    await poll(() => row(page, 'rated').locator('td[data-slot="rates"]').innerText()).toMatch(/^7 requests per hour \(7 used this window\)\s+250,000 tokens per day \(0 used this window\)$/);
    // Its status says so, and the Rate limited filter lists it (Active does not).
    expect(await row(page, 'rated').locator('.badge').innerText()).toBe('Rate-limited');
    await page.getByLabel('Status').selectOption({ label: 'Rate limited' });
    await poll(() => namesShown(page)).toEqual(['rated']);
    await shot(page, 'rate-limited');
    await page.getByLabel('Status').selectOption({ label: 'Active' });
    await page.getByText('No keys match.').waitFor();
    await page.getByLabel('Status').selectOption({ label: 'Current' });
    await row(page, 'rated').waitFor();
  });

  it('removing the request rate on the page lets the key through again', async () => {
    const page = browser!.page;
    await row(page, 'rated').getByRole('button', { name: 'Edit' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Rate', { exact: true }).fill('');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    await poll(() => row(page, 'rated').locator('td[data-slot="rates"]').innerText()).toMatch(/^No request rate\s+250,000 tokens per day \(0 used this window\)$/);
    expect(await stack!.db.hmget(S.keyRecord(keyDigest(key)), RateField.rate, RateField.tokenRate)).toEqual([null, '250000/d']);
    expect(outcomeOf(await stack!.client.check(chatRequest(key)))).toBe('allow');
  });

  it('a 1000/h key: while a sidecar holds a lease the page says how much of the use is reserved ahead; idle, exactly the requests allowed', async () => {
    const page = browser!.page;
    await awayFromWindowEnd('hour');
    const k = await konsole!.server.console.createKey({ account: ACCOUNT, name: 'busy', rates: { requests: { count: 1000, per: 'hour' } } });
    let allowed = 0;
    let stop = false;
    // Requests every 50 ms keep the sidecar's lease in use (an idle one goes back after 250 ms).
    const traffic = (async () => {
      while (!stop) {
        if (outcomeOf(await stack!.client.check(chatRequest(k.key))) === 'allow') allowed++;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const cell = async () => {
      await page.reload();
      return row(page, 'busy').locator('td[data-slot="rates"]').innerText();
    };
    try {
      await poll(cell).toMatch(/^1,000 requests per hour \(\d+ used this window, up to 25 of them reserved ahead by sidecars\)\s+No token rate$/);
    } finally {
      stop = true;
      await traffic;
    }
    expect(allowed).toBeGreaterThan(0);
    await poll(cell).toBe(`1,000 requests per hour (${allowed} used this window)\nNo token rate`);
  });

  it("an account whose request rate is used up: every one of its keys shows Rate-limited (its requests are refused), and the filter lists them", async () => {
    const page = browser!.page;
    const other = 'acct-rates-full';
    const lib = konsole!.server.console;
    const t = await konsole!.createToken(other, 'owner');
    const one = await lib.createKey({ account: other, name: 'one' }, CLI_ACTOR);
    const two = await lib.createKey({ account: other, name: 'two' }, CLI_ACTOR);
    await konsole!.setAccountRates(other, { requests: { count: 2, per: 'hour' } });
    await awayFromWindowEnd('hour');
    expect(outcomeOf(await stack!.client.check(chatRequest(one.key)))).toBe('allow');
    expect(outcomeOf(await stack!.client.check(chatRequest(two.key)))).toBe('allow');
    // The account's window is used up: both keys are refused, though neither has a rate of its own.
    expect(outcomeOf(await stack!.client.check(chatRequest(one.key)))).toBe('RATE_LIMITED');
    expect(outcomeOf(await stack!.client.check(chatRequest(two.key)))).toBe('RATE_LIMITED');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Token').fill(t.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    for (const name of ['one', 'two']) await poll(() => row(page, name).locator('.badge').innerText()).toBe('Rate-limited');
    expect(await row(page, 'one').locator('td[data-slot="rates"]').innerText()).toMatch(/^No request rate/); // the key's own: none
    await page.getByLabel('Status').selectOption({ label: 'Rate limited' });
    await poll(() => namesShown(page)).toEqual(['two', 'one']);
    await page.getByLabel('Status').selectOption({ label: 'Active' });
    await page.getByText('No keys match.').waitFor();
    // The account's rate removed: Active again.
    await konsole!.setAccountRates(other, { requests: null });
    await page.getByLabel('Status').selectOption({ label: 'Current' });
    for (const name of ['one', 'two']) await poll(() => row(page, name).locator('.badge').innerText()).toBe('Active');
  });

  it('the page met its CSP and made no failed request', () => {
    expect(problems).toEqual([]);
  });
});
