/// <reference lib="dom" />
/**
 * The account panel's "Upstream credentials" section in a real browser (docs/credentials.md): the
 * owner sets the account's OpenAI credential and a real sidecar's next Check carries it; the page
 * shows the provider and the last four only, clears the field, refuses a credential that cannot be a
 * header value before sending anything, and removes it (the sidecar's next Check carries none). The
 * secret is never in the page, nor in the console's debug log.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestBrowser } from './helpers/browser.ts';
import { okHeaders } from './helpers/envoy-client.ts';
import { chatRequest, startStack, waitTracking, type Stack } from './helpers/sidecars.ts';
import { signedInPage, startWebConsole, type WebConsole } from './helpers/web-console.ts';

const ACCOUNT = 'acct-creds';
const CRED_KEY = `c1:${randomBytes(32).toString('base64')}`;
const SECRET = `sk-web-${randomBytes(16).toString('hex')}`;

let stack: Stack | undefined;
let konsole: WebConsole | undefined;
let browser: TestBrowser | undefined;
let key = '';
const problems: string[] = [];
const sent: string[] = [];

beforeAll(async () => {
  process.env.KEYGATE_CREDENTIAL_KEY = CRED_KEY; // the console reads it from its environment
  stack = await startStack({ credentialKey: CRED_KEY });
  konsole = await startWebConsole(stack.redis.url);
  key = (await konsole.server.console.createKey({ account: ACCOUNT, name: 'web' })).key;
  const token = await konsole.createToken(ACCOUNT, 'owner');
  browser = await signedInPage(konsole.url, token.token, { sent, problems, ready: 'Upstream credentials', beforeSignIn: () => waitTracking(stack!) });
}, 120_000);

afterAll(async () => {
  await browser?.close().catch(() => {});
  await konsole?.close().catch(() => {});
  await stack?.close();
});

const authorization = async () => okHeaders(await stack!.client.check({ ...chatRequest(key), contextExtensions: { protocol: 'openai' } })).authorization;

describe("the account panel's upstream credentials", () => {
  it('sets, shows only the last four, is used by the sidecar, and removes', async () => {
    const { page } = browser!;
    const panel = page.locator('section.credentials-section');
    await panel.getByText('None:').waitFor();
    expect(await authorization()).toBeUndefined();

    // A credential that cannot be a header value: said next to the form, nothing sent.
    const before = sent.length;
    await panel.getByLabel('Credential', { exact: true }).fill('has a space in it');
    await panel.getByRole('button', { name: 'Save credential' }).click();
    await panel.getByRole('alert').getByText('visible ASCII').waitFor();
    expect(sent.slice(before).filter((r) => r.startsWith('PUT '))).toEqual([]);

    await panel.getByLabel('Provider').selectOption('openai');
    await panel.getByLabel('Credential', { exact: true }).fill(SECRET);
    await panel.getByRole('button', { name: 'Save credential' }).click();
    await panel.getByText(`…${SECRET.slice(-4)}`).waitFor();
    expect(await panel.getByLabel('Credential', { exact: true }).inputValue()).toBe('');
    expect(await page.content()).not.toContain(SECRET);
    expect(await authorization()).toBe(`Bearer ${SECRET}`);

    await panel.getByRole('button', { name: 'Remove the OpenAI credential' }).click();
    await panel.getByText('None:').waitFor();
    expect(await authorization()).toBeUndefined();
    // The audit section names both changes.
    await page.getByText('Upstream credential removed').waitFor();
    expect(konsole!.logs.join('')).not.toContain(SECRET);
    expect(problems).toEqual([]);
  }, 60_000);
});
