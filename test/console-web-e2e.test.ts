/// <reference lib="dom" />
/**
 * The "API keys" page end to end: a real headless Chromium on the real console (management API and
 * web plugin) over a real redis-server, with a real sidecar on the same store. The whole seed story
 * in the browser — sign in, create, copy, reveal, restrict, roll, revoke — and after each change the
 * next gateway request through the sidecar shows it. Also: an axe-core scan of every state (no
 * serious or critical violation), no CSP violation or page error, nothing secret in the page's
 * storage or the console's log, the 360 px layout, keyboard-only use, sign-out and a revoked token
 * ending the session. `KEYGATE_UPDATE_SCREENSHOTS=1` writes the screenshots to docs/screenshots/.
 */
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from './helpers/browser.ts';
import { chatRequest, outcomeOf, startStack, waitTracking, type Stack } from './helpers/sidecars.ts';
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
function watch(page: Page): void {
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  page.on('request', (r) => {
    if (!r.url().startsWith(konsole.url)) problems.push(`outside request: ${r.url()}`);
  });
}

/** axe-core run in the page (evaluated through the DevTools protocol, so the page's CSP stays as it is). */
async function axe(page: Page, what: string): Promise<void> {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const r = await (window as unknown as { axe: { run: (ctx: Document, o: object) => Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> } }).axe.run(document, {
      resultTypes: ['violations'],
    });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')) }));
  });
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad, `${what}: ${JSON.stringify(bad, null, 1)}`).toEqual([]);
}

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

const row = (page: Page, name: string) => page.getByRole('listitem').filter({ has: page.getByRole('heading', { name, exact: true }) });

describe('the API keys page', () => {
  let key = '';
  let rolled = '';
  let keyboardKey = '';

  it('signs in with the account token (errors next to the Token field), then shows the empty list and the wallet', async () => {
    const { page } = browser;
    await page.goto('/');
    await expect.poll(() => page.getByRole('button', { name: 'Sign in' }).isVisible()).toBe(true);
    await axe(page, 'sign-in');
    await shot(page, 'sign-in');

    await page.getByLabel('Token').fill('kgm_not_a_real_token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const err = page.locator('#token-error');
    await err.waitFor();
    expect(await page.getByLabel('Token').getAttribute('aria-describedby')).toContain('token-error');
    expect(await page.getByLabel('Token').getAttribute('aria-invalid')).toBe('true');

    await page.getByLabel('Token').fill(token.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Create key' }).waitFor();
    await page.getByText('No keys yet.').waitFor();
    await expect.poll(() => page.locator('.wallet').innerText()).toContain('25.00');
    // The token does not stay in the page; the session cookie is invisible to scripts.
    expect(await page.evaluate(() => [document.cookie, localStorage.length, sessionStorage.length, document.body.innerHTML.length > 0])).toEqual(['', 0, 0, true]);
    expect(await page.content()).not.toContain(token.token);
    await axe(page, 'empty list');
    await shot(page, 'empty');
  });

  it('creates a key (Name, Models, Expires, Limit), shows it once with a Copy button, and the gateway accepts it for its models', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog');
    // A bad model pattern: the error appears under Models and nothing is created.
    await dialog.getByLabel('Name', { exact: true }).fill('ci pipeline');
    await dialog.getByLabel('Models').fill('openai/gpt-4o-mini, bad model%');
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    const modelsError = dialog.locator('#f-models-error');
    await modelsError.waitFor();
    expect(await dialog.getByLabel('Models').getAttribute('aria-invalid')).toBe('true');
    expect(await konsole.keyCount(ACCOUNT)).toBe(0);

    await dialog.getByLabel('Models').fill('openai/gpt-4o-mini');
    await dialog.getByLabel('Expires').fill('2099-12-31');
    await dialog.getByLabel('Limit', { exact: true }).fill('5');
    await axe(page, 'create form');
    await shot(page, 'create');
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
    expect(text).toContain('openai/gpt-4o-mini');
    expect(text).toMatch(/Dec 31, 2099/);
    expect(text).toMatch(/0\.00 of 5\.00 this month/);
    expect(await page.content()).not.toContain(key); // the dialog is gone, and the key with it

    expect(await gateway(key, 'openai/gpt-4o-mini')).toBe('allow');
    expect(await gateway(key, 'anthropic/claude-sonnet-4')).toBe('MODEL_NOT_ALLOWED');

    // The router records what the requests cost: the page shows the spend against the limit, and the
    // key is refused once the spend reaches it.
    const keyId = (await r.getByRole('heading', { name: 'ci pipeline' }).getAttribute('id'))!.replace(/^key-|-title$/g, '');
    await konsole.recordUsage(keyId, 5_000_000);
    expect(await gateway(key, 'openai/gpt-4o-mini')).toBe('KEY_LIMIT_EXCEEDED');
    await page.reload();
    await expect.poll(() => row(page, 'ci pipeline').innerText()).toMatch(/5\.00 of 5\.00 this month/);
    await expect.poll(() => page.locator('.wallet').innerText()).toContain('20.00');
  });

  it('reveals the key again (the same key: not rotated)', async () => {
    const { page } = browser;
    await row(page, 'ci pipeline').getByRole('button', { name: 'Reveal' }).click();
    expect(await shownKey(page)).toBe(key);
    await shot(page, 'revealed');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    // Still the same key (at its spend limit), not a new one.
    expect(await gateway(key, 'openai/gpt-4o-mini')).toBe('KEY_LIMIT_EXCEEDED');
  });

  it('edits the restrictions; the next gateway request follows them', async () => {
    const { page } = browser;
    await row(page, 'ci pipeline').getByRole('button', { name: 'Edit' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.getByLabel('Models').inputValue()).toBe('openai/gpt-4o-mini');
    expect(await dialog.getByLabel('Limit', { exact: true }).inputValue()).toBe('5');
    await dialog.getByLabel('Models').fill('anthropic/*');
    await dialog.getByLabel('Limit', { exact: true }).fill('10'); // raising the limit lifts the refusal
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    await expect.poll(() => row(page, 'ci pipeline').innerText()).toContain('anthropic/*');
    expect(await row(page, 'ci pipeline').innerText()).toMatch(/5\.00 of 10\.00 this month/);
    expect(await gateway(key, 'openai/gpt-4o-mini')).toBe('MODEL_NOT_ALLOWED');
    expect(await gateway(key, 'anthropic/claude-sonnet-4')).toBe('allow');

    // An expiry in the past is refused by the API, and the error appears under Expires.
    await row(page, 'ci pipeline').getByRole('button', { name: 'Edit' }).click();
    await dialog.getByLabel('Expires').fill('2001-01-01');
    await dialog.getByRole('button', { name: 'Save' }).click();
    const expiresError = dialog.locator('#f-expires-error');
    await expiresError.waitFor();
    await shot(page, 'edit-error');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await gateway(key, 'anthropic/claude-sonnet-4')).toBe('allow');
  });

  it('rolls the key: a new key with the same settings; the old one stops at once', async () => {
    const { page } = browser;
    await row(page, 'ci pipeline').first().getByRole('button', { name: 'Roll' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Confirm' }).click();
    await page.getByRole('dialog').getByText('You will not see this key again unless you reveal it.').waitFor();
    rolled = await shownKey(page);
    expect(rolled).not.toBe(key);
    await page.getByRole('dialog').getByRole('button', { name: 'Done' }).click();
    expect(await gateway(rolled, 'anthropic/claude-sonnet-4')).toBe('allow');
    expect(await gateway(rolled, 'openai/gpt-4o-mini')).toBe('MODEL_NOT_ALLOWED');
    expect(await gateway(key, 'anthropic/claude-sonnet-4')).not.toBe('allow');
  });

  it('revokes the key after a confirmation; the next gateway request is refused', async () => {
    const { page } = browser;
    const active = page.getByRole('listitem').filter({ hasText: rolled.slice(-4) });
    await active.getByRole('button', { name: 'Revoke' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Confirm' }).waitFor();
    await axe(page, 'revoke dialog');
    await shot(page, 'revoke');
    // Cancel changes nothing.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await gateway(rolled, 'anthropic/claude-sonnet-4')).toBe('allow');
    await active.getByRole('button', { name: 'Revoke' }).click();
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await gateway(rolled, 'anthropic/claude-sonnet-4')).toBe('INVALID_API_KEY');
    await expect.poll(() => active.innerText()).toMatch(/revoked/i);
    expect(await active.getByRole('button', { name: 'Revoke' }).count()).toBe(0);
  });

  it('the list is readable at 360 px and on desktop, and passes the accessibility scan', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog').getByLabel('Name', { exact: true }).fill('staging');
    await page.getByRole('dialog').getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Done' }).click();
    await row(page, 'staging').waitFor();
    // The sidecar's request counts reach the page (flushed about once a second): last use and requests.
    const used = page.getByRole('listitem').filter({ hasText: rolled.slice(-4) });
    await expect
      .poll(async () => {
        await page.reload();
        return used.innerText();
      }, { timeout: 20_000 })
      .toMatch(/Requests\s+[1-9]\d* today · [1-9]\d* this month/);
    expect(await used.innerText()).not.toContain('Not yet');
    await axe(page, 'list');
    await shot(page, 'list');
    await page.setViewportSize({ width: 360, height: 780 });
    // Nothing wider than the screen: no horizontal scrolling.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    await axe(page, 'list at 360 px');
    await shot(page, 'list-360');
    await page.setViewportSize({ width: 1100, height: 800 });
    // The dark scheme (prefers-color-scheme) keeps its contrast too.
    await page.emulateMedia({ colorScheme: 'dark' });
    await axe(page, 'list, dark');
    await shot(page, 'list-dark');
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('works with the keyboard alone: create a key and close its dialog', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: 'Create key' }).focus();
    await page.keyboard.press('Enter');
    // The dialog opens with the focus in Name; Tab moves through the form; Enter submits.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('f-name');
    await page.keyboard.type('keyboard');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('f-models');
    await page.keyboard.type('google/*');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').getByText('You will not see this key again').waitFor();
    const k = await shownKey(page);
    keyboardKey = k;
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('create-key');
    expect(await gateway(k, 'google/gemini-2.5-pro')).toBe('allow');
    // Tab order reaches every control of a key.
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press('Tab');
      seen.add((await page.evaluate(() => document.activeElement?.textContent?.trim())) ?? '');
    }
    for (const name of ['Reveal', 'Edit', 'Roll', 'Revoke']) expect(seen).toContain(name);
  });

  it('rolls with a grace period: both keys work, and the old one says until when and offers no second roll', async () => {
    const { page } = browser;
    const old = row(page, 'keyboard');
    const before = await old.getByRole('code').innerText();
    await old.getByRole('button', { name: 'Roll' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('The old key stops working').selectOption({ label: 'After 1 hour' });
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await dialog.getByText('keeps working for 1 hour').waitFor();
    const fresh = await shownKey(page);
    await dialog.getByRole('button', { name: 'Done' }).click();
    const previous = page.getByRole('listitem').filter({ hasText: before });
    await expect.poll(() => previous.innerText()).toMatch(/Rolled: replaced by keyboard \(kg_…\w{4}\); this key works until/);
    expect(await previous.getByRole('button', { name: 'Roll' }).count()).toBe(0);
    expect(await gateway(fresh, 'google/gemini-2.5-pro')).toBe('allow');
    expect(await gateway(keyboardKey, 'google/gemini-2.5-pro')).toBe('allow'); // still in its hour
  });

  it('nothing secret reached the console log, and the page met its CSP throughout', () => {
    const log = konsole.logs.join('');
    expect(log.length).toBeGreaterThan(0);
    for (const secret of [key, rolled, token.token]) expect(log).not.toContain(secret);
    expect(problems).toEqual([]);
  });

  it('signing out returns to Sign in; revoking the token ends a session on its next request', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page.getByText('You are signed out.').waitFor();

    await page.getByLabel('Token').fill(token.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Create key' }).waitFor();
    const keys = await konsole.keyCount(ACCOUNT);
    await konsole.revokeToken(token.id);
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog').getByLabel('Name', { exact: true }).fill('after revoke');
    await page.getByRole('dialog').getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByText('Your session has ended. Sign in again.').waitFor();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    expect(await konsole.keyCount(ACCOUNT)).toBe(keys); // the refused create made nothing
    await shot(page, 'session-ended');
  });
});
