/// <reference lib="dom" />
/**
 * The endpoint rule on the "API keys" page (a real headless Chromium, the real console, a real sidecar
 * on one redis-server): a key's row shows "refused: endpoint N" once the sidecar has refused its
 * requests at the endpoint rule (and nothing while it has none); the Account card shows the billing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { launchBrowser, type TestBrowser } from './helpers/browser.ts';
import { startStack, waitFor, waitTracking, type Stack } from './helpers/sidecars.ts';
import { startWebConsole, type WebConsole } from './helpers/web-console.ts';

const ACCOUNT = 'acct-endpoints-page';
let stack: Stack | undefined;
let konsole: WebConsole | undefined;
let browser: TestBrowser | undefined;
const problems: string[] = [];

beforeAll(async () => {
  stack = await startStack();
  konsole = await startWebConsole(stack.redis.url);
  const token = await konsole.createToken(ACCOUNT, 'owner');
  browser = await launchBrowser({ baseURL: konsole.url });
  browser.page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await waitTracking(stack);
  await browser.page.goto('/');
  await browser.page.getByLabel('Token').fill(token.token);
  await browser.page.getByRole('button', { name: 'Sign in' }).click();
  await browser.page.getByText('No keys yet.').waitFor();
}, 120_000);

afterAll(async () => {
  await browser?.close().catch(() => {});
  await konsole?.close().catch(() => {});
  await stack?.close();
});

describe('the API keys page', () => {
  it('shows refused: endpoint on the key row, and the account billing', async () => {
    const page = browser!.page;
    const quiet = await konsole!.server.console.createKey({ account: ACCOUNT, name: 'quiet' }, CLI_ACTOR);
    const k = await konsole!.server.console.createKey({ account: ACCOUNT, name: 'refused' }, CLI_ACTOR);
    const check = (key: string, method: string, path: string) => stack!.client.check({ method, path, headers: { authorization: `Bearer ${key}` }, contextExtensions: { protocol: 'openai' } });
    await check(k.key, 'GET', '/openai/v1/files');
    await check(k.key, 'GET', '/openai/v1/files/file-1');
    await check(quiet.key, 'GET', '/openai/v1/models');
    await waitFor(async () => (await konsole!.server.console.getKeyView(k.id)).usage.refused.endpoint === 2, 'refusals flushed', 10_000);
    await page.reload();
    const row = (name: string) => page.locator('tbody tr').filter({ has: page.locator('.key-name', { hasText: new RegExp(`^${name}$`) }) });
    await expect.poll(() => row('refused').locator('[data-slot="refused"]').innerText(), { timeout: 10_000 }).toBe('refused: endpoint 2');
    expect(await row('quiet').locator('[data-slot="refused"]').count()).toBe(0);
    await expect.poll(() => page.locator('[data-slot="billing"]').innerText(), { timeout: 10_000 }).toMatch(/^Billing\s+Metered/);
    await konsole!.server.console.setAccountBilling(ACCOUNT, 'external', CLI_ACTOR);
    await page.reload();
    await expect.poll(() => page.locator('[data-slot="billing"]').innerText(), { timeout: 10_000 }).toMatch(/^Billing\s+External/);
    expect(problems).toEqual([]);
  });
});
