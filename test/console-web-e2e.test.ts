/// <reference lib="dom" />
/**
 * The "API keys" page end to end: a real headless Chromium on the real console (management API and
 * web plugin) over a real redis-server, with a real sidecar on the same store. The whole story in
 * the browser — sign in, create (every field checked at once, a past expiry refused before sending),
 * copy, reveal, restrict, roll (a distinct name), revoke (behind the Status filter) — and after each
 * change the next gateway request through the sidecar shows it; the keys table's search, status
 * filter, sort and pages; "Limit reached until …"; the 100-key limit; the account panel (Balance
 * with its currency, the Ledger and its CSV export) and the Audit section; the loading, error,
 * empty, offline and session-ended states (the reason said, the typed form kept); a key's Rate set
 * in the form, refused inline when bad or above the account's, and edited away. Also: an axe-core
 * scan of every state, light and dark (no serious or critical violation), no CSP violation or page error, nothing
 * secret in the page's storage or the console's log, the 360 px layout, keyboard-only use.
 * `KEYGATE_UPDATE_SCREENSHOTS=1` writes the screenshots to docs/screenshots/.
 */
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { CLI_ACTOR } from '../src/console/management.ts';
import { ZONED } from '../web/src/format.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from './helpers/browser.ts';
import { chatRequest, outcomeOf, startStack, startTestSidecar, waitTracking, type Stack } from './helpers/sidecars.ts';
import { startWebConsole, type WebConsole } from './helpers/web-console.ts';

const ACCOUNT = 'acct-e2e';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const SHOTS = process.env.KEYGATE_UPDATE_SCREENSHOTS === '1' ? join(import.meta.dirname, '..', 'docs', 'screenshots') : mkdtempSync(join(tmpdir(), 'keygate-shots-'));
mkdirSync(SHOTS, { recursive: true });

let stack: Stack;
let konsole: WebConsole;
let browser: TestBrowser;
let token: { id: string; token: string };
const problems: string[] = [];
/** While the test takes the browser offline, failed requests are expected. */
let offline = false;

beforeAll(async () => {
  stack = await startStack();
  konsole = await startWebConsole(stack.redis.url);
  token = await konsole.createToken(ACCOUNT, 'owner');
  await konsole.credit(ACCOUNT, 25_000_000);
  browser = await launchBrowser({ baseURL: konsole.url });
  watch(browser.page);
  await waitTracking(stack);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await konsole?.close();
  await stack?.close();
  if (!process.env.KEYGATE_UPDATE_SCREENSHOTS) rmSync(SHOTS, { recursive: true, force: true });
});

/** Records CSP violations, page errors and failed asset loads: any of them fails the suite. */
const sent: string[] = [];
function watch(page: Page): void {
  page.on('request', (r) => sent.push(`${r.method()} ${new URL(r.url()).pathname}`));
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('requestfailed', (r) => {
    // A request the browser itself cancelled (the test reloads the page while a periodic refresh is in
    // flight) fails as net::ERR_ABORTED: not the server's failure. Any other failure text is one.
    if (!offline && r.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`request failed: ${r.url()} (${r.failure()?.errorText})`);
  });
  page.on('request', (r) => {
    if (!r.url().startsWith(konsole.url) && !r.url().startsWith('blob:')) problems.push(`outside request: ${r.url()}`);
  });
}

/**
 * axe-core run in the page (evaluated through the DevTools protocol, so the page's CSP stays as it
 * is), in the light and then the dark colour scheme: every state scanned is scanned in both.
 */
async function axe(page: Page, what: string): Promise<void> {
  await page.evaluate(AXE);
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await axeOnce(page, `${what} (${scheme})`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

async function axeOnce(page: Page, what: string): Promise<void> {
  const violations = await page.evaluate(async () => {
    const r = await (window as unknown as { axe: { run: (ctx: Document, o: object) => Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> } }).axe.run(document, {
      resultTypes: ['violations'],
    });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')) }));
  });
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad, `${what}: ${JSON.stringify(bad, null, 1)}`).toEqual([]);
}

/** expect.poll with the locators' patience (the shared test machine can be slow). */
const poll = <T>(f: () => T | Promise<T>) => expect.poll(f, { timeout: 10_000 });

const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), animations: 'disabled' });

async function gateway(key: string, model: string): Promise<string> {
  return outcomeOf(await stack.client.check(chatRequest(key, model)));
}

/** The open dialog's key (the read-only "Key" field). */
async function shownKey(page: Page): Promise<string> {
  const dialog = page.getByRole('dialog');
  const value = await dialog.getByLabel('Key', { exact: true }).inputValue();
  expect(value).toMatch(/^kg_[0-9A-Za-z]{38}$/);
  return value;
}

/** The keys table's row of the key named exactly `name`. */
const row = (page: Page, name: string) => page.locator('tbody tr').filter({ has: page.locator('.key-name', { hasText: new RegExp(`^${name.replace(/[()]/g, '\\$&')}$`) }) });
const idOf = async (page: Page, name: string) => (await row(page, name).getAttribute('id'))!.replace(/^key-/, '');
const keysTable = (page: Page) => page.locator('table.keys');
const namesShown = (page: Page) => page.locator('tbody .key-name').allInnerTexts();

describe('the API keys page', () => {
  let key = '';
  let rolled = '';
  let keyboardKey = '';

  it('signs in with the account token (errors next to the Token field), then shows the empty list and the balance with its currency', async () => {
    const { page } = browser;
    await page.goto('/');
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await axe(page, 'sign-in');
    await shot(page, 'sign-in');

    await page.getByLabel('Token').fill('kgm_not_a_real_token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const err = page.locator('#token-error');
    await err.waitFor();
    await axe(page, 'sign-in with an error');
    expect(await page.getByLabel('Token').getAttribute('aria-describedby')).toContain('token-error');
    expect(await page.getByLabel('Token').getAttribute('aria-invalid')).toBe('true');

    await page.getByLabel('Token').fill(token.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Create key' }).waitFor();
    await page.getByText('No keys yet.').waitFor();
    await poll(() => page.locator('.account').innerText()).toMatch(/Balance\s+25\.00 USD/);
    await page.locator('.ledger').getByText('test-', { exact: false }).first().waitFor(); // the credit, in the ledger
    // The token does not stay in the page; the session cookie is invisible to scripts.
    expect(await page.evaluate(() => [document.cookie, localStorage.length, sessionStorage.length, document.body.innerHTML.length > 0])).toEqual(['', 0, 0, true]);
    expect(await page.content()).not.toContain(token.token);
    await axe(page, 'empty list');
    await shot(page, 'empty');
  });

  it('checks every field of the create form at once, in words, before sending anything', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog');
    // The expiry picker offers no past time.
    const min = await dialog.getByLabel('Expires').getAttribute('min');
    expect(Date.parse(`${min}:00Z`)).toBeGreaterThan(Date.now());
    await dialog.getByLabel('Name', { exact: true }).fill('   ');
    await dialog.getByLabel('Models').fill('openai/gpt-4o-mini, not a model!!');
    await dialog.getByLabel('Expires').fill('2001-01-01T00:00');
    await dialog.getByLabel('Limit', { exact: true }).fill('12.5.0');
    const before = sent.length;
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await dialog.getByText('Check 4 fields: Name, Models, Expires, Limit.').waitFor();
    expect(await dialog.locator('#f-name-error').innerText()).toBe('Give the key a name, so you can recognise it later.');
    expect(await dialog.locator('#f-models-error').innerText()).toMatch(/^“not a model!!” is not a model name\. Use provider\/model/);
    expect(await dialog.locator('#f-expires-error').innerText()).toMatch(/in the future/);
    expect(await dialog.locator('#f-limit-error').innerText()).toMatch(/positive amount with at most 6 decimals/);
    for (const f of ['Models', 'Expires']) expect(await dialog.getByLabel(f).getAttribute('aria-invalid')).toBe('true');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('f-name');
    expect(sent.slice(before).filter((r) => r.startsWith('POST'))).toEqual([]); // nothing sent
    expect(await konsole.keyCount(ACCOUNT)).toBe(0);
    await axe(page, 'create form with errors');
    await shot(page, 'create-errors');

    await dialog.getByLabel('Name', { exact: true }).fill('ci pipeline');
    await dialog.getByLabel('Models').fill('openai/gpt-4o-mini');
    await dialog.getByLabel('Expires').fill('2099-12-31T00:00');
    await dialog.getByLabel('Limit', { exact: true }).fill('5');
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await dialog.getByText('You will not see this key again unless you reveal it.').waitFor();
    key = await shownKey(page);
    await dialog.getByRole('button', { name: 'Copy' }).click();
    await dialog.getByText('Copied to the clipboard.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
    await axe(page, 'created key');
    await shot(page, 'created');
    await dialog.getByRole('button', { name: 'Done' }).click();

    const r = row(page, 'ci pipeline');
    await r.waitFor();
    const text = await r.innerText();
    expect(text).toContain(key.slice(-4)); // the hint
    expect(text).not.toContain(key);
    expect(text).toMatch(/key_[0-9A-Za-z]{16,32}/); // the key id
    expect(text).toContain('openai/gpt-4o-mini');
    expect(text).toMatch(/Dec 31, 2099, 12:00 AM UTC/); // with its time zone
    expect(text).toMatch(/0\.00 of 5\.00 USD this month/);
    expect(text).toMatch(/Active/);
    expect(await page.content()).not.toContain(key); // the dialog is gone, and the key with it
    // The key id is copyable.
    const id = await idOf(page, 'ci pipeline');
    await r.getByRole('button', { name: `Copy key id ${id}` }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(id);

    expect(await gateway(key, 'openai/gpt-4o-mini')).toBe('allow');
    expect(await gateway(key, 'anthropic/claude-sonnet-4')).toBe('MODEL_NOT_ALLOWED');
  });

  it('a key at its spend limit shows "Limit reached" with the time it lifts; the ledger shows the charge', async () => {
    const { page } = browser;
    const id = await idOf(page, 'ci pipeline');
    await konsole.recordUsage(id, 5_000_000, { input: 1200, output: 340 });
    expect(await gateway(key, 'openai/gpt-4o-mini')).toBe('KEY_LIMIT_EXCEEDED');
    await page.reload();
    const r = row(page, 'ci pipeline');
    await poll(() => r.innerText()).toMatch(/5\.00 of 5\.00 USD this month/);
    const midnight = new Date();
    midnight.setUTCDate(1);
    midnight.setUTCMonth(midnight.getUTCMonth() + 1);
    const lifts = new Intl.DateTimeFormat('en-US', { ...ZONED, timeZone: 'UTC' }).format(
      Date.UTC(midnight.getUTCFullYear(), midnight.getUTCMonth(), 1),
    );
    expect(await r.innerText()).toContain(`Limit reached\nuntil ${lifts}`);
    await poll(() => page.locator('.account').innerText()).toMatch(/Balance\s+20\.00 USD/);
    expect(await page.locator('.ledger tbody tr').first().innerText()).toMatch(/Charge\s+-5\.00/);
    await page.getByLabel('Status').selectOption({ label: 'Limit reached' });
    await poll(() => namesShown(page)).toEqual(['ci pipeline']);
    await page.getByLabel('Status').selectOption({ label: 'Active' });
    await page.getByText('No keys match.').waitFor();
    await axe(page, 'no match');
    await page.getByRole('button', { name: 'Show current keys' }).click();
    await row(page, 'ci pipeline').waitFor();
    await axe(page, 'limit reached');
    await shot(page, 'limit-reached');

    // The key's last 30 days: opened from the keyboard, drawn as bars, every number also as text.
    const toggle = row(page, 'ci pipeline').getByRole('button', { name: '30 days' });
    expect(await toggle.getAttribute('aria-expanded')).toBe('false');
    await toggle.focus();
    await page.keyboard.press('Enter');
    const panel = page.locator(`#key-${id}-usage`);
    await panel.getByText('Last 30 days: 5.00 USD spent, 1 request, 1,200 input and 340 output tokens.').waitFor();
    expect(await toggle.getAttribute('aria-expanded')).toBe('true');
    expect(await toggle.getAttribute('aria-controls')).toBe(`key-${id}-usage`);
    expect(await panel.locator('svg').count()).toBe(2);
    expect(await panel.locator('svg rect.spend').count()).toBe(30);
    // The day's bar is the tallest one, the others are empty.
    const heights = await panel.locator('svg rect.spend').evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('height'))));
    expect(heights.filter((h) => h > 0)).toHaveLength(1);
    expect(heights[29]).toBeGreaterThan(40);
    // The table for screen readers: 30 days, today's numbers.
    const table = panel.getByRole('table', { name: /Usage of ci pipeline per UTC day/ });
    expect(await table.locator('tbody tr').count()).toBe(30);
    const today = new Date().toISOString().slice(0, 10);
    expect(await table.getByRole('row', { name: new RegExp(today) }).innerText()).toMatch(/5\.00\s+1\s+1,200\s+340/);
    await axe(page, 'usage chart');
    await panel.scrollIntoViewIfNeeded();
    await shot(page, 'usage');
    await page.keyboard.press('Enter');
    await poll(() => panel.count()).toBe(0);
    expect(await toggle.getAttribute('aria-expanded')).toBe('false');
  });

  it('reveals the key again (the same key: not rotated)', async () => {
    const { page } = browser;
    await row(page, 'ci pipeline').getByRole('button', { name: 'Reveal' }).click();
    expect(await shownKey(page)).toBe(key);
    await axe(page, 'revealed key');
    await shot(page, 'revealed');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    expect(await gateway(key, 'openai/gpt-4o-mini')).toBe('KEY_LIMIT_EXCEEDED');
  });

  it('edits the restrictions; the next gateway request follows them; a past expiry is refused before sending', async () => {
    const { page } = browser;
    await row(page, 'ci pipeline').getByRole('button', { name: 'Edit' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.getByLabel('Models').inputValue()).toBe('openai/gpt-4o-mini');
    expect(await dialog.getByLabel('Limit', { exact: true }).inputValue()).toBe('5');
    expect(await dialog.getByLabel('Expires').inputValue()).toBe('2099-12-31T00:00');
    await axe(page, 'edit form');
    await dialog.getByLabel('Models').fill('anthropic/*');
    await dialog.getByLabel('Limit', { exact: true }).fill('10'); // raising the limit lifts the refusal
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    await poll(() => row(page, 'ci pipeline').innerText()).toContain('anthropic/*');
    expect(await row(page, 'ci pipeline').innerText()).toMatch(/5\.00 of 10\.00 USD this month/);
    expect(await gateway(key, 'openai/gpt-4o-mini')).toBe('MODEL_NOT_ALLOWED');
    expect(await gateway(key, 'anthropic/claude-sonnet-4')).toBe('allow');

    await row(page, 'ci pipeline').getByRole('button', { name: 'Edit' }).click();
    await dialog.getByLabel('Expires').fill('2001-01-01T00:00');
    const before = sent.length;
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.locator('#f-expires-error').waitFor();
    expect(await dialog.locator('#f-expires-error').innerText()).toBe('Choose a time in the future: a key cannot expire in the past.');
    expect(sent.slice(before).filter((r) => r.startsWith('PATCH'))).toEqual([]);
    await axe(page, 'edit form with a past expiry');
    await shot(page, 'edit-error');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await gateway(key, 'anthropic/claude-sonnet-4')).toBe('allow');
  });

  it('rolls the key: a new key named "… (rolled)" by the roll itself, with the same settings; the old one stops at once', async () => {
    const { page } = browser;
    // The console names the new key in the roll: the page sends no change of its own.
    const writes: string[] = [];
    const onRequest = (r: { method(): string; url(): string }) => void (r.method() !== 'GET' && writes.push(`${r.method()} ${new URL(r.url()).pathname}`));
    page.on('request', onRequest);
    await row(page, 'ci pipeline').getByRole('button', { name: 'Roll' }).click();
    await page.getByRole('dialog').getByText('it is named “ci pipeline (rolled)”').waitFor();
    await axe(page, 'roll dialog');
    await page.getByRole('dialog').getByRole('button', { name: 'Confirm' }).click();
    await page.getByRole('dialog').getByText('You will not see this key again unless you reveal it.').waitFor();
    expect(await page.getByRole('dialog').getByRole('heading').innerText()).toBe('Key rolled: “ci pipeline (rolled)”');
    rolled = await shownKey(page);
    expect(rolled).not.toBe(key);
    await page.getByRole('dialog').getByRole('button', { name: 'Done' }).click();
    await row(page, 'ci pipeline (rolled)').waitFor();
    page.off('request', onRequest);
    expect(writes).toEqual([expect.stringMatching(/^POST \/v1\/keys\/key_\w+\/roll$/)]);
    // The old key is revoked: hidden under the default Status (Current).
    await poll(() => namesShown(page)).toEqual(['ci pipeline (rolled)']);
    expect(await gateway(rolled, 'anthropic/claude-sonnet-4')).toBe('allow');
    expect(await gateway(rolled, 'openai/gpt-4o-mini')).toBe('MODEL_NOT_ALLOWED');
    expect(await gateway(key, 'anthropic/claude-sonnet-4')).not.toBe('allow');
  });

  it('revokes the key after a confirmation; revoked keys are behind the Status filter', async () => {
    const { page } = browser;
    const active = row(page, 'ci pipeline (rolled)');
    await active.getByRole('button', { name: 'Revoke' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Confirm' }).waitFor();
    await axe(page, 'revoke dialog');
    await shot(page, 'revoke');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await gateway(rolled, 'anthropic/claude-sonnet-4')).toBe('allow');
    await active.getByRole('button', { name: 'Revoke' }).click();
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await gateway(rolled, 'anthropic/claude-sonnet-4')).toBe('INVALID_API_KEY');
    await page.getByText('No keys yet.').waitFor();
    await page.getByLabel('Status').selectOption({ label: 'Revoked' });
    await poll(() => namesShown(page)).toEqual(['ci pipeline (rolled)', 'ci pipeline']);
    expect(await row(page, 'ci pipeline (rolled)').innerText()).toMatch(/Revoked/);
    expect(await row(page, 'ci pipeline (rolled)').getByRole('button', { name: 'Revoke' }).count()).toBe(0);
    await page.getByLabel('Status').selectOption({ label: 'Current' });
  });

  it('sets a key\'s request rate in the form and edits it away; a bad rate is refused inline, a rate above the account\'s in the owner\'s words', async () => {
    const { page } = browser;
    const dialog = page.getByRole('dialog');
    // Bad rates: every field checked at once, nothing sent.
    await page.getByRole('button', { name: 'Create key' }).click();
    await dialog.getByLabel('Name', { exact: true }).fill('rated');
    await dialog.getByLabel('Rate', { exact: true }).fill('5/x');
    await dialog.getByLabel('Token rate').fill('2000000000000/h');
    const before = sent.length;
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await dialog.getByText('Check 2 fields: Rate, Token rate.').waitFor();
    expect(await dialog.locator('#f-rate-error').innerText()).toBe('Write requests per unit as N/UNIT, like 5/s or 1000/m (unit s, m, h or d). Empty has no limit.');
    expect(await dialog.locator('#f-token_rate-error').innerText()).toBe('Use at most 1,000,000,000,000 tokens per window.');
    expect(await dialog.getByLabel('Rate', { exact: true }).getAttribute('aria-invalid')).toBe('true');
    expect(await dialog.getByLabel('Rate', { exact: true }).getAttribute('aria-describedby')).toContain('f-rate-error');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('f-rate');
    expect(sent.slice(before).filter((r) => r.startsWith('POST'))).toEqual([]);
    await axe(page, 'create form with rate errors');

    // A good rate: created with it, shown in the Rates column.
    await dialog.getByLabel('Rate', { exact: true }).fill('5/s');
    await dialog.getByLabel('Token rate').fill('');
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await dialog.getByText('You will not see this key again unless you reveal it.').waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();
    await poll(() => row(page, 'rated').innerText()).toMatch(/5 requests per second[\s\S]*No token rate/);

    // Above the account's rate: the API refuses, said next to the field; nothing changes.
    await konsole.setAccountRates(ACCOUNT, { requests: { count: 10, per: 'second' } });
    await row(page, 'rated').getByRole('button', { name: 'Edit' }).click();
    expect(await dialog.getByLabel('Rate', { exact: true }).inputValue()).toBe('5/s');
    expect(await dialog.getByLabel('Token rate').inputValue()).toBe('');
    await dialog.getByLabel('Rate', { exact: true }).fill('1000/m');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.locator('#f-rate-error').waitFor();
    expect(await dialog.locator('#f-rate-error').innerText()).toBe('Your account allows at most 10/s: choose a request rate within it (1000/m is more).');
    expect(await dialog.getByLabel('Rate', { exact: true }).getAttribute('aria-invalid')).toBe('true');
    await axe(page, 'edit form with the account rate refusal');
    const id = await idOf(page, 'rated');
    expect((await konsole.server.console.getKey(id)).rates?.requests).toEqual({ count: 5, per: 'second' });

    // Edited away: the key has no request rate.
    await dialog.getByLabel('Rate', { exact: true }).fill('');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    await poll(() => row(page, 'rated').innerText()).toMatch(/No request rate[\s\S]*No token rate/);
    expect((await konsole.server.console.getKey(id)).rates?.requests ?? null).toBeNull();

    await konsole.setAccountRates(ACCOUNT, { requests: null });
    await konsole.server.console.revokeKey(id, CLI_ACTOR);
    await page.reload();
    await page.getByText('No keys yet.').waitFor();
  });

  it('an API refusal of a field lands under it: an expiry past by the server\'s clock under Expires, a model pattern under Models', async () => {
    // A second tab of the same session whose clock runs three days behind: the page takes yesterday as a future time.
    const page = await browser.context.newPage();
    watch(page);
    try {
      await page.clock.install({ time: Date.now() - 3 * 86_400_000 });
      await page.goto('/');
      await page.getByRole('button', { name: 'Create key' }).click();
      const dialog = page.getByRole('dialog');
      await dialog.getByLabel('Name', { exact: true }).fill('refused by the API');
      await dialog.getByLabel('Expires').fill(new Date(Date.now() - 86_400_000).toISOString().slice(0, 16)); // the browser's zone is UTC
      const keys = await konsole.keyCount(ACCOUNT);
      await dialog.getByRole('button', { name: 'Create', exact: true }).click();
      await dialog.locator('#f-expires-error').waitFor();
      expect(await dialog.locator('#f-expires-error').innerText()).toMatch(/^Expiry \S+ is not in the future/);
      expect(await dialog.getByLabel('Expires').getAttribute('aria-invalid')).toBe('true');
      expect(await dialog.locator('#f-models-error').count()).toBe(0);
      expect(await konsole.keyCount(ACCOUNT)).toBe(keys);
      await axe(page, 'create form with the API refusing the expiry');

      // The API's own refusal of a model pattern (the page's checks agree with it, so it is answered here as the API words it).
      const refusal = await konsole.server.console.createKey({ account: ACCOUNT, name: 'x', models: ['openai/gpt-4o-mini', 'not a model!!'] }, CLI_ACTOR).then(
        () => '',
        (e: Error) => e.message,
      );
      expect(refusal).toMatch(/model/);
      await page.route('**/v1/accounts/*/keys', (route) =>
        route.request().method() === 'POST' ? route.fulfill({ status: 400, contentType: 'application/json', body: JSON.stringify({ error: { code: 'INVALID_INPUT', message: refusal } }) }) : route.continue(),
      );
      await dialog.getByLabel('Expires').fill('');
      await dialog.getByLabel('Models').fill('openai/gpt-4o-mini');
      await dialog.getByRole('button', { name: 'Create', exact: true }).click();
      await dialog.locator('#f-models-error').waitFor();
      expect((await dialog.locator('#f-models-error').innerText()).toLowerCase()).toBe(`${refusal.toLowerCase()}.`); // capitalised, with a full stop
      expect(await dialog.getByLabel('Models').getAttribute('aria-invalid')).toBe('true');
      expect(await dialog.locator('#f-expires-error').count()).toBe(0);
      expect(await konsole.keyCount(ACCOUNT)).toBe(keys);
    } finally {
      await page.close();
    }
  });

  it('pages, searches and sorts 130 keys; at 100 active keys Create says why it is off', async () => {
    const { page } = browser;
    const made: { id: string; name: string; hint: string }[] = [];
    for (let i = 0; i < 130; i++) {
      const c = await konsole.server.console.createKey({ account: ACCOUNT, name: `svc-${String(i).padStart(3, '0')}` }, CLI_ACTOR);
      made.push({ id: c.id, name: c.record.name, hint: c.record.hint });
      if (i < 30) await konsole.server.console.revokeKey(c.id, CLI_ACTOR); // 30 revoked (svc-000 to svc-029), 100 active
    }
    await page.reload();
    await page.getByText('1–50 of 100 keys').waitFor();
    expect(await page.getByText('100 of 100 active keys used', { exact: false }).count()).toBe(1);
    const firstPage = await namesShown(page);
    expect(firstPage).toHaveLength(50);
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByText('51–100 of 100 keys').waitFor();
    const second = await namesShown(page);
    expect(new Set([...firstPage, ...second]).size).toBe(100);
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByText('1–50 of 100 keys').waitFor();
    expect(await namesShown(page)).toEqual(firstPage);

    // Sort by name: svc-030 first (svc-000 to svc-029 are revoked).
    await page.getByLabel('Sort').selectOption({ label: 'Name A–Z' });
    await poll(async () => (await namesShown(page))[0]).toBe('svc-030');
    // Search: part of a name; an exact hint; an exact key id.
    await page.getByRole('searchbox', { name: 'Search' }).fill('SVC-04');
    await poll(() => namesShown(page)).toEqual(Array.from({ length: 10 }, (_, i) => `svc-04${i}`));
    await page.getByRole('searchbox', { name: 'Search' }).fill(made[77]!.hint);
    await poll(() => namesShown(page)).toEqual(['svc-077']);
    await page.getByRole('searchbox', { name: 'Search' }).fill(made[12]!.id);
    await page.getByText('No keys match.').waitFor(); // revoked: not a current key
    await page.getByLabel('Status').selectOption({ label: 'All' });
    await poll(() => namesShown(page)).toEqual(['svc-012']);
    await page.getByRole('searchbox', { name: 'Search' }).fill('');
    await page.getByLabel('Status').selectOption({ label: 'Current' });
    await page.getByLabel('Sort').selectOption({ label: 'Newest first' });
    await page.getByText('1–50 of 100 keys').waitFor();

    const create = page.getByRole('button', { name: 'Create key' });
    expect(await create.getAttribute('aria-disabled')).toBe('true');
    // and looks off: dimmed, with the not-allowed cursor (it stays focusable to read the reason)
    const looks = () => create.evaluate((b) => ({ opacity: Number(getComputedStyle(b).opacity), cursor: getComputedStyle(b).cursor }));
    expect(await looks()).toEqual({ opacity: expect.closeTo(0.6, 2), cursor: 'not-allowed' });
    expect(await page.locator('#create-blocked').innerText()).toMatch(/100 active keys, the most it may have/);
    await create.focus(); // aria-disabled: focusable, so the reason is read out, but it opens nothing
    await page.keyboard.press('Enter');
    expect(await page.getByRole('dialog').count()).toBe(0);
    await axe(page, 'full list');
    await shot(page, 'list');
    // 50 rows a screen can hold: no cell wraps word by word (Tokens and Rates included), each row a line or two.
    const heights = await page.locator('tbody tr.key').evaluateAll((rows) => rows.map((r) => r.getBoundingClientRect().height));
    expect(heights).toHaveLength(50);
    expect(Math.max(...heights)).toBeLessThan(80);
    // On a wide screen the whole table fits, the row's buttons included: no sideways scrolling.
    await page.setViewportSize({ width: 1920, height: 1080 });
    const wrap = page.locator('.table-wrap', { has: keysTable(page) });
    expect(await wrap.evaluate((w) => ({ scroll: w.scrollWidth, client: w.clientWidth }))).toEqual({ scroll: expect.any(Number), client: expect.any(Number) });
    await poll(() => wrap.evaluate((w) => w.scrollWidth <= w.clientWidth)).toBe(true);
    expect(await row(page, 'svc-129').getByRole('button', { name: 'Revoke' }).evaluate((b) => b.getBoundingClientRect().right <= window.innerWidth)).toBe(true);
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.setViewportSize({ width: 360, height: 780 });
    // Nothing wider than the screen (the table scrolls in its own region); Sign out on one line.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    // One line is its line height plus its padding and border (under a button's 2.5rem min-height); a
    // second line adds a whole line height, so half a line over one line's height is a wrap.
    const signOut = await page.getByRole('button', { name: 'Sign out' }).evaluate((b) => {
      const st = getComputedStyle(b);
      const px = (...vs: string[]) => vs.reduce((n, v) => n + parseFloat(v), 0);
      return {
        height: b.getBoundingClientRect().height,
        lineHeight: px(st.lineHeight),
        frame: px(st.paddingTop, st.paddingBottom, st.borderTopWidth, st.borderBottomWidth),
      };
    });
    expect(signOut.lineHeight).toBeGreaterThan(0);
    expect(signOut.height).toBeLessThan(signOut.lineHeight * 1.5 + signOut.frame);
    await axe(page, 'list at 360 px');
    await shot(page, 'list-360');
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot(page, 'list-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    // Back under the limit: Create works again.
    for (const k of made.slice(30, 129)) await konsole.server.console.revokeKey(k.id, CLI_ACTOR);
    await page.reload();
    await page.getByText('1–1 of 1 key').waitFor();
    expect(await page.getByRole('button', { name: 'Create key' }).getAttribute('aria-disabled')).toBe('false');
    expect(await looks()).toEqual({ opacity: 1, cursor: 'pointer' });
  }, 120_000);

  it('a long name and a long model list keep the row to a line or two: cut short on screen, whole in a tooltip and to screen readers', async () => {
    const { page } = browser;
    const name = 'nightly batch of the reporting pipeline for every region '.repeat(3).slice(0, 128).trim();
    const models = ['openai/gpt-4o-mini', 'openai/gpt-4o', 'anthropic/claude-sonnet-4', 'anthropic/claude-opus-4', 'google/gemini-2.5-pro', 'google/gemini-2.5-flash', 'mistral/*', 'meta/llama-3.3-70b'];
    const long = await konsole.server.console.createKey({ account: ACCOUNT, name, models }, CLI_ACTOR);
    await page.reload();
    const r = row(page, name);
    await r.waitFor();
    const height = await r.evaluate((tr) => tr.getBoundingClientRect().height);
    const short = await row(page, 'svc-129').evaluate((tr) => tr.getBoundingClientRect().height);
    expect(height).toBeLessThan(80);
    expect(short).toBeLessThan(80);
    const cell = r.locator('td.models');
    expect(await cell.getAttribute('title')).toBe(models.join(', '));
    expect(await r.locator('.key-name').getAttribute('title')).toBe(name);
    // No model name is broken inside: each sits on one line (the list wraps only after its commas).
    const lines = await cell.locator('.model').evaluateAll((ms) => ms.map((m) => m.getClientRects().length));
    expect(lines.every((n) => n === 1)).toBe(true);
    expect(await r.innerText()).toContain(models.join(', ')); // the whole list is in the page's text
    await axe(page, 'a long name and model list');
    await konsole.server.console.revokeKey(long.id, CLI_ACTOR);
    await page.reload();
    await page.getByText('1–1 of 1 key').waitFor();
  });

  it('the ledger pages and exports as CSV; the audit lists the account events', async () => {
    const { page } = browser;
    const ledger = page.locator('.ledger-section');
    await ledger.getByRole('heading', { name: 'Ledger' }).waitFor();
    const rows = await ledger.locator('tbody tr').allInnerTexts();
    expect(rows[0]).toMatch(/Charge\s+-5\.00/);
    expect(rows[rows.length - 1]).toMatch(/Credit\s+\+25\.00/);
    const download = page.waitForEvent('download');
    await ledger.getByRole('button', { name: 'Export CSV' }).click();
    const file = await (await download).path();
    const csv = readFileSync(file, 'utf8').trim().split('\r\n');
    expect(csv[0]).toBe('time,type,amount,currency,reference,request_id,key_id,model');
    expect(csv).toHaveLength(3);
    expect(csv[1]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z,charge,-5\.000000,USD,,req-[0-9a-f]+,key_\w+,$/);
    expect(csv[2]).toMatch(/,credit,25\.000000,USD,test-[0-9a-f]+,,,$/);
    await ledger.getByText('Exported 2 entries.').waitFor();
    const audit = page.locator('.audit-section');
    // The latest 20 events: the revokes made from the command line in the test before.
    await poll(() => audit.innerText()).toMatch(/Key revoked\s+key_\w+\s+by the command line/);
    expect(await audit.locator('li').count()).toBe(20);
    await axe(page, 'ledger and audit');
    await page.locator('.account').screenshot({ path: join(SHOTS, 'account.png'), animations: 'disabled' });
    await audit.screenshot({ path: join(SHOTS, 'audit.png'), animations: 'disabled' });
  });

  it('works with the keyboard alone: create a key and close its dialog', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: 'Create key' }).focus();
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('f-name');
    await page.keyboard.type('keyboard');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('f-models');
    await page.keyboard.type('google/*');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').getByText('You will not see this key again').waitFor();
    keyboardKey = await shownKey(page);
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    await poll(() => page.evaluate(() => document.activeElement?.id)).toBe('create-key');
    expect(await gateway(keyboardKey, 'google/gemini-2.5-pro')).toBe('allow');
    // Tab order reaches the search, the filter, and every control of a key.
    const seen = new Set<string>();
    for (let i = 0; i < 30; i++) {
      await page.keyboard.press('Tab');
      seen.add(
        (await page.evaluate(() => {
          const el = document.activeElement;
          return el instanceof HTMLInputElement || el instanceof HTMLSelectElement ? el.id : el?.textContent?.trim();
        })) ?? '',
      );
    }
    for (const name of ['q', 'status', 'sort', 'Reveal', 'Edit', 'Roll', 'Revoke', 'Copy']) expect(seen).toContain(name);
  });

  it("the Models help says what a plain model name counts as here, from the live sidecars: none reads it as a provider's; sidecars that differ, the general words", async () => {
    const { page } = browser;
    /** The help of a fresh page's create form, once the account answer is in. */
    const help = async () => {
      const loaded = page.waitForResponse((r) => new URL(r.url()).pathname === `/v1/accounts/${ACCOUNT}`);
      await page.reload();
      await loaded;
      await page.getByRole('button', { name: 'Create key' }).click();
      const text = (await page.getByRole('dialog').locator('#f-models-help').innerText()).replace(/\s+/g, ' ');
      await page.keyboard.press('Escape');
      await page.getByRole('dialog').waitFor({ state: 'detached' });
      return text;
    };
    const none = "A request must name a listed model. Here a plain gpt-4o-mini at the OpenAI entry is not read as any provider's: list the plain name too to allow it.";
    const general = "and a plain gpt-4o-mini only where the gateway reads plain names as OpenAI's (or list the plain name too).";
    expect(await help()).toContain(none);
    const reading = await startTestSidecar(stack.redis.url, { bareModelProviders: 'openai=openai' });
    try {
      await poll(async () => (await konsole.server.console.bareModels()).openai.rule).toBe('mixed');
      const mixed = await help();
      expect(mixed).toContain(general);
      expect(mixed).not.toContain('Here a plain');
    } finally {
      await reading.close();
    }
    expect(await help()).toContain(none);
  });

  it('rolls with a grace period: both keys work, and the old one says until when and offers no second roll', async () => {
    const { page } = browser;
    await row(page, 'keyboard').getByRole('button', { name: 'Roll' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('The old key stops working').selectOption({ label: 'After 1 hour' });
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await dialog.getByText('keeps working for 1 hour').waitFor();
    const fresh = await shownKey(page);
    await dialog.getByRole('button', { name: 'Done' }).click();
    const previous = row(page, 'keyboard');
    await poll(() => previous.innerText()).toMatch(/Rolled: replaced by keyboard \(rolled\) \(kg_…\w{4}\); this key works until .* UTC/);
    expect(await previous.getByRole('button', { name: 'Roll' }).count()).toBe(0);
    await axe(page, 'a key rolled with a grace period');
    expect(await gateway(fresh, 'google/gemini-2.5-pro')).toBe('allow');
    expect(await gateway(keyboardKey, 'google/gemini-2.5-pro')).toBe('allow'); // still in its hour
  });

  it('designed states: loading, error with Try again, offline; the metering and rate slots render when the API has them', async () => {
    const { page } = browser;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await page.route('**/v1/accounts/*/keys?*', async (route) => {
      await held;
      await route.continue().catch(() => {}); // a request the page dropped meanwhile (a reload) is gone
    });
    await page.reload();
    await page.getByText('Loading keys…').waitFor();
    await axe(page, 'loading');
    await shot(page, 'loading');
    release();
    await page.unroute('**/v1/accounts/*/keys?*');
    await row(page, 'keyboard (rolled)').waitFor();

    await page.route('**/v1/accounts/*/keys?*', (route) => route.fulfill({ status: 503, contentType: 'application/json', body: '{"error":{"code":"UNAVAILABLE","message":"the store is unavailable"}}' }));
    await page.getByLabel('Status').selectOption({ label: 'All' });
    await page.getByText('The keys could not be loaded.').waitFor();
    expect(await page.getByRole('alert').filter({ hasText: 'The store is unavailable.' }).count()).toBe(1);
    await axe(page, 'error');
    await shot(page, 'error');
    await page.unroute('**/v1/accounts/*/keys?*');
    await page.getByRole('button', { name: 'Try again' }).click();
    await row(page, 'keyboard (rolled)').waitFor();

    // The slots other parts of keygate fill: shown when the API has them (this console sends `tokens`
    // and `rate`/`token_rate` on every key, so both columns are there); their values follow the API.
    expect(await keysTable(page).locator('th[data-slot="tokens"]').count()).toBe(1);
    expect(await keysTable(page).locator('th[data-slot="rates"]').count()).toBe(1);
    await page.route('**/v1/accounts/*/keys?*', async (route) => {
      const res = await route.fetch();
      const body = await res.json();
      for (const k of body.keys) Object.assign(k, { tokens: { today: { input: 1200, output: 340 }, month: { input: 5000, output: 900 } }, rate: { requests: 60, per: 'minute' }, token_rate: null });
      await route.fulfill({ response: res, json: body });
    });
    await page.getByLabel('Status').selectOption({ label: 'Current' });
    await keysTable(page).getByRole('columnheader', { name: 'Tokens' }).waitFor();
    await row(page, 'keyboard (rolled)').getByText('1,200 in · 340 out today').waitFor(); // the re-fetched page drawn
    expect(await row(page, 'keyboard (rolled)').innerText()).toMatch(/1,200 in · 340 out today[\s\S]*60 requests per minute[\s\S]*No token rate/);
    await page.unroute('**/v1/accounts/*/keys?*');
    // An API without them (no metering, no rate limits): both columns are left out.
    await page.route('**/v1/accounts/*/keys?*', async (route) => {
      const res = await route.fetch();
      const body = await res.json();
      for (const k of body.keys) for (const f of ['tokens', 'rate', 'token_rate', 'rate_use']) delete k[f];
      await route.fulfill({ response: res, json: body });
    });
    await page.getByLabel('Status').selectOption({ label: 'All' });
    await poll(() => keysTable(page).locator('th[data-slot]').count()).toBe(0);
    expect(await keysTable(page).locator('td[data-slot]').count()).toBe(0);
    await page.unroute('**/v1/accounts/*/keys?*');
    await page.getByLabel('Status').selectOption({ label: 'Current' });
    await keysTable(page).locator('th[data-slot="rates"]').waitFor();

    offline = true;
    await browser.context.setOffline(true);
    await page.getByText('You are offline.').first().waitFor();
    expect(await page.locator('p.offline').innerText()).toBe('You are offline. What is shown may be out of date, and no change can be sent until the connection is back.');
    await page.getByLabel('Status').selectOption({ label: 'All' });
    await page.getByText('The keys could not be loaded.').waitFor();
    expect(await page.getByRole('alert').innerText()).toMatch(/You are offline\. Check your connection/);
    await axe(page, 'offline');
    await shot(page, 'offline');
    await browser.context.setOffline(false);
    await poll(() => page.getByText('You are offline.').count()).toBe(0);
    await row(page, 'keyboard (rolled)').waitFor();
    offline = false;
  });

  it('nothing secret reached the console log, and the page met its CSP throughout', () => {
    const log = konsole.logs.join('');
    expect(log.length).toBeGreaterThan(0);
    for (const secret of [key, rolled, keyboardKey, token.token]) expect(log).not.toContain(secret);
    expect(problems).toEqual([]);
  });

  it('signing out returns to Sign in; a revoked token ends the session with its reason and keeps the typed form', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page.getByText('You are signed out.').waitFor();
    await axe(page, 'signed out');
    expect(await page.getByText('You are signed out.').evaluate((p) => getComputedStyle(p).color)).not.toBe('rgb(23, 105, 58)'); // not success green either

    await page.getByLabel('Token').fill(token.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Create key' }).waitFor();
    const keys = await konsole.keyCount(ACCOUNT);
    await konsole.revokeToken(token.id);
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog').getByLabel('Name', { exact: true }).fill('after revoke');
    await page.getByRole('dialog').getByLabel('Models').fill('openai/gpt-4o-mini');
    await page.getByRole('dialog').getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByText('Your session has ended: its token was revoked. Sign in with another token. What you typed is kept for after you sign in.').waitFor();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    // a warning (amber), not the success green a signed-out notice had
    expect(await page.locator('p.notice.ended').evaluate((p) => getComputedStyle(p).color)).toBe('rgb(92, 61, 0)');
    expect(await konsole.keyCount(ACCOUNT)).toBe(keys); // the refused create made nothing
    await axe(page, 'session ended');
    await shot(page, 'session-ended');

    const again = await konsole.createToken(ACCOUNT, 'owner again');
    await page.getByLabel('Token').fill(again.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    expect(await dialog.getByLabel('Name', { exact: true }).inputValue()).toBe('after revoke');
    expect(await dialog.getByLabel('Models').inputValue()).toBe('openai/gpt-4o-mini');
    await page.getByText('Your form was kept: check it and submit again.').waitFor();
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await dialog.getByText('You will not see this key again unless you reveal it.').waitFor();
    expect(await konsole.keyCount(ACCOUNT)).toBe(keys + 1);
  });

  it('the account panel says "No wallet" for an account never credited, and a balance below zero is owed, not "empty"', async () => {
    const { page } = browser;
    await page.getByRole('dialog').getByRole('button', { name: 'Done' }).click();
    await page.getByRole('button', { name: 'Sign out' }).click();
    const other = 'acct-nowallet';
    const t = await konsole.createToken(other, 'owner');
    await page.getByLabel('Token').fill(t.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('No keys yet.').waitFor();
    await poll(() => page.locator('.account').innerText()).toMatch(/Balance\s+No wallet\s+Requests are not limited by a balance\./);
    expect(await page.locator('.account').innerText()).not.toMatch(/0\.00/);
    await axe(page, 'no wallet');
    await page.locator('.account').screenshot({ path: join(SHOTS, 'no-wallet.png'), animations: 'disabled' });

    const k = await konsole.server.console.createKey({ account: other, name: 'owing', models: null, expiresAt: null, limit: null }, CLI_ACTOR);
    // (a millisecond apart: the ledger orders by the millisecond, then credits before charges)
    await konsole.credit(other, 1_000_000);
    await new Promise((r) => setTimeout(r, 3));
    await konsole.recordUsage(k.id, 3_000_000);
    await page.reload();
    await poll(() => page.locator('.account').innerText()).toMatch(/Balance\s+-2\.00 USD\s+The balance is below zero \(owed\): requests are refused until it is topped up\./);
    expect(await page.locator('.account').innerText()).not.toMatch(/empty/i);
    await axe(page, 'balance below zero');
    await page.locator('.account').screenshot({ path: join(SHOTS, 'owed.png'), animations: 'disabled' });

    // The ledger 20 at a time, newest first, Older / Newer entries; the CSV holds every entry.
    for (let i = 0; i < 25; i++) {
      await new Promise((r) => setTimeout(r, 3));
      await konsole.credit(other, 10_000 * (i + 1)); // 0.01 … 0.25
    }
    await page.reload();
    const ledger = page.locator('.ledger-section');
    const amounts = () => ledger.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.children[2]!.textContent!.trim()));
    await poll(amounts).toHaveLength(20);
    expect((await amounts()).slice(0, 3)).toEqual(['+0.25', '+0.24', '+0.23']);
    expect(await ledger.getByRole('button', { name: 'Newer entries' }).isDisabled()).toBe(true);
    await ledger.getByRole('button', { name: 'Older entries' }).click();
    await poll(amounts).toEqual(['+0.05', '+0.04', '+0.03', '+0.02', '+0.01', '-3.00', '+1.00']);
    expect(await ledger.getByRole('button', { name: 'Older entries' }).isDisabled()).toBe(true);
    await ledger.getByRole('button', { name: 'Newer entries' }).click();
    await poll(async () => (await amounts())[0]).toBe('+0.25');
    const download = page.waitForEvent('download');
    await ledger.getByRole('button', { name: 'Export CSV' }).click();
    const csv = readFileSync(await (await download).path(), 'utf8').trim().split('\r\n');
    expect(csv).toHaveLength(1 + 27);
    await ledger.getByText('Exported 27 entries.').waitFor();
  });

  it('an API refusal lands where it belongs: the key limit at the foot of the form, a failed reveal in its row', async () => {
    const { page } = browser;
    const other = 'acct-nowallet';
    const lib = konsole.server.console;
    const more = [];
    for (let i = 0; i < 98; i++) more.push(await lib.createKey({ account: other, name: `fill-${String(i).padStart(2, '0')}`, models: null, expiresAt: null, limit: null }, CLI_ACTOR));
    await page.reload();
    await page.getByText('99 of 100 active keys used', { exact: false }).waitFor();
    expect(await page.getByRole('button', { name: 'Create key' }).getAttribute('aria-disabled')).toBe('false');
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Name', { exact: true }).fill('one too many');
    // Another owner's create (the CLI) takes the last place while the form is open.
    await lib.createKey({ account: other, name: 'the 100th', models: null, expiresAt: null, limit: null }, CLI_ACTOR);
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    const foot = dialog.locator('p.error[role="alert"]');
    await foot.waitFor();
    expect(await foot.innerText()).toMatch(/already has 100 active keys; revoke one first/);
    expect(await konsole.keyCount(other)).toBe(100);
    await axe(page, 'create refused at the key limit');
    await dialog.getByRole('button', { name: 'Cancel' }).click();

    // A key revoked elsewhere after the page drew it: Reveal fails in its own row.
    const gone = more[97]!;
    await lib.revokeKey(gone.id, CLI_ACTOR);
    const r = row(page, 'fill-97');
    await r.getByRole('button', { name: 'Reveal' }).click();
    const err = r.locator('[role="alert"]');
    await err.waitFor();
    expect(await err.innerText()).toMatch(/revoked|not found|no key/i);
    expect(await page.getByRole('dialog').count()).toBe(0);
    await axe(page, 'reveal refused in its row');
  });

  it('a session that ran out its time ends with "it expired", keeping what was typed', async () => {
    const { page } = browser;
    await page.clock.install();
    await page.reload(); // the same session, the page now on a clock the test moves
    await page.getByRole('button', { name: 'Create key' }).waitFor();
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog').getByLabel('Name', { exact: true }).fill('typed before expiry');
    // 8 hours on (the session's lifetime), and Redis drops the session at its expiry as PEXPIREAT does.
    await page.clock.fastForward('08:00:05');
    const sessions = await stack.db.keys('*websession*');
    expect(sessions.length).toBeGreaterThan(0);
    await stack.db.del(...sessions);
    await page.getByRole('dialog').getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByText('Your session has ended: it expired. Sign in again. What you typed is kept for after you sign in.').waitFor();
    expect(await konsole.keyCount('acct-nowallet')).toBe(100); // nothing made
    await axe(page, 'session expired');
  });
});
