/// <reference lib="dom" />
/**
 * Sign-in with SSO end to end: a real OpenID provider (`oidc-provider`, started here on a free port
 * with its real login form), the real console (openid-client as the relying party) on a real
 * redis-server, and a real headless Chromium typing into the provider's form.
 *
 * The story: a developer signs in through the provider, sees only their account, creates a key, is
 * refused (by the API) a reveal of a colleague's key, and is audited by name; an owner adds, changes
 * and removes a member on the page. Every failure — a forged state, a replayed answer (refused by
 * keygate, and with its flow put back by the provider: the code was used), an expired ID
 * token (a console whose clock is two hours off), a person who is a member of nothing, an email not
 * verified, the provider down — is a clear page and no session; a clock off within the tolerance
 * signs in; a key rotation at the provider between two sign-ins is followed. axe-core finds no
 * serious or critical violation on the new screens; the page works at 360 px.
 */
import { createRequire } from 'node:module';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { startDevProvider, type DevProvider } from '../src/dev/oidc-provider.ts';
import { launchBrowser, type TestBrowser } from './helpers/browser.ts';
import { destroyRedis, freePort, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startWebConsole, type WebConsole } from './helpers/web-console.ts';

const A = 'acct-sso';
const B = 'acct-elsewhere';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const CLIENT = { id: 'keygate-console', secret: randomBytes(24).toString('base64url') };

let redis: RedisServer;
let provider: DevProvider;
let konsole: WebConsole;
/** The same console with a clock two hours ahead (the ID token looks expired), and one 20 s behind (within tolerance). */
let late: WebConsole;
let skewed: WebConsole;
let browser: TestBrowser;
const problems: string[] = [];
let colleagueKey = '';
/** A code, a state and a flow id seen in the browser: none may reach the console's log. */
const secrets: string[] = [];

async function consoleOn(port: number, clockSkewSeconds?: number): Promise<WebConsole> {
  const env = {
    KEYGATE_OIDC_ISSUER: provider.issuer,
    KEYGATE_OIDC_CLIENT_ID: CLIENT.id,
    KEYGATE_OIDC_CLIENT_SECRET: CLIENT.secret,
    KEYGATE_CONSOLE_PUBLIC_ORIGIN: `http://127.0.0.1:${port}`,
    KEYGATE_OIDC_ROLES_CLAIM: 'keygate_roles',
  };
  return startWebConsole(redis.url, env, { port, clockSkewSeconds });
}

beforeAll(async () => {
  redis = await startRedis();
  const [main, latePort, skewPort, providerPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  provider = await startDevProvider({
    port: providerPort,
    clientId: CLIENT.id,
    clientSecret: CLIENT.secret,
    redirectUris: [main, latePort, skewPort].map((p) => `http://127.0.0.1:${p}/auth/callback`),
    people: [
      { login: 'ada', email: 'ada@example.com', emailVerified: true, name: 'Ada Lovelace' },
      { login: 'grace', email: 'grace@example.com', emailVerified: true, name: 'Grace Hopper' },
      { login: 'stranger', email: 'stranger@example.com', emailVerified: true, name: 'A Stranger' },
      // Claims grace's email, unverified: must not become grace.
      { login: 'mallory', email: 'grace@example.com', emailVerified: false, name: 'Mallory' },
      // Memberships from the identity provider's claim.
      { login: 'lin', email: 'lin@example.com', emailVerified: true, name: 'Lin', roles: [`${A}:viewer`, `${B}:developer`, 'not an entry'] },
    ],
  });
  konsole = await consoleOn(main);
  late = await consoleOn(latePort, 7200);
  skewed = await consoleOn(skewPort, -20);
  const mc = konsole.server.console;
  await mc.members.add(A, { email: 'ada@example.com' }, 'developer', CLI_ACTOR);
  await mc.members.add(A, { email: 'grace@example.com' }, 'owner', CLI_ACTOR);
  // A colleague's key (grace created it) and a key of another account.
  const k = await mc.createKey({ account: A, name: 'colleague key' }, CLI_ACTOR);
  await mc.members.setCreator(A, k.id, { iss: provider.issuer, sub: 'grace' });
  colleagueKey = k.id;
  await mc.createKey({ account: B, name: 'elsewhere key' }, CLI_ACTOR);
  browser = await launchBrowser({ baseURL: konsole.url });
  browser.page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  browser.page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const c of [konsole, late, skewed]) await c?.close();
  await provider?.close();
  if (redis) await destroyRedis(redis);
});

/** axe-core in the page, in the light and the dark colour scheme: no serious or critical violation. */
async function axe(page: Page, what: string): Promise<void> {
  await page.evaluate(AXE);
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    const violations = await page.evaluate(async () => {
      const r = await (window as unknown as { axe: { run: (ctx: Document, o: object) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')) }));
    });
    expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'), `${what} (${scheme})`).toEqual([]);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

/** A fresh browser state: no console session, no provider session. */
async function fresh(): Promise<Page> {
  await browser.context.clearCookies();
  return browser.page;
}

/** From the console's sign-in page through the provider's login form; `at`: which console. */
async function ssoSignIn(page: Page, login: string, at: WebConsole = konsole): Promise<void> {
  await page.goto(`${at.url}/`);
  await page.getByRole('link', { name: 'Sign in with SSO' }).click();
  await page.waitForURL((u) => u.href.startsWith(provider.issuer));
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  await page.waitForURL((u) => u.href.startsWith(at.url));
}

/** The session as the page's API sees it (from inside the page, with its cookie). */
const sessionOf = (page: Page) => page.evaluate(async () => (await fetch('/session')).json());

const row = (page: Page, name: string) => page.locator('tbody tr').filter({ has: page.locator('.key-name', { hasText: new RegExp(`^${name}$`) }) });

describe('sign-in with SSO', () => {
  it('a developer signs in through the provider, sees only their account, creates a key, is refused a colleague’s key by the API, and is audited by name', async () => {
    const page = await fresh();
    await page.goto('/');
    await page.getByRole('link', { name: 'Sign in with SSO' }).waitFor();
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor(); // the token sign-in stays
    await axe(page, 'sign-in with SSO offered');

    await ssoSignIn(page, 'ada');
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    await page.locator('.who.person').getByText('ada@example.com · Developer').waitFor();
    expect(await page.locator('.who strong').innerText()).toBe(A);
    await row(page, 'colleague key').waitFor();
    expect(await page.locator('tbody .key-name').allInnerTexts()).toEqual(['colleague key']); // nothing of acct-elsewhere
    expect(await page.getByRole('combobox', { name: 'Account' }).count()).toBe(0); // one account: no select
    // A colleague's key: readable, but none of the controls a developer may not use.
    for (const b of ['Reveal', 'Edit', 'Roll', 'Revoke']) expect(await row(page, 'colleague key').getByRole('button', { name: b }).count()).toBe(0);
    expect(await page.getByRole('heading', { name: 'Members' }).count()).toBe(0);

    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Name', { exact: true }).fill('ada key');
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await dialog.getByText('You will not see this key again unless you reveal it.').waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();
    await row(page, 'ada key').getByRole('button', { name: 'Reveal' }).waitFor(); // hers: every control
    await axe(page, 'signed in as a developer');

    // The API, not the page, refuses: the page's own session asks for the colleague's key.
    const refused = await page.evaluate(async (id) => {
      const s = await (await fetch('/session')).json();
      const r = await fetch(`/v1/keys/${id}/reveal`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': s.csrf_token }, body: '{}' });
      return { status: r.status, body: await r.json() };
    }, colleagueKey);
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toMatch(/only the keys they created/);
    expect(JSON.stringify(refused.body)).not.toMatch(/kg_[0-9A-Za-z]{30,}/);

    // Audited as the person, and shown so on the page.
    const events = await konsole.server.console.listAudit({ account: A, limit: 10 });
    const created = events.find((e) => e.action === 'create');
    expect(created?.actor).toEqual({ type: 'user', id: 'ada', name: 'ada@example.com' });
    expect(events.filter((e) => e.action === 'reveal')).toEqual([]);
    await page.reload();
    await page.locator('.audit li').filter({ hasText: 'Key created' }).filter({ hasText: 'by ada@example.com' }).first().waitFor();

    // Sign out: the session is gone.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('link', { name: 'Sign in with SSO' }).waitFor();
    expect((await sessionOf(page)).signed_in).toBe(false);
  });

  it('an owner adds a member, changes their role and removes them on the page (audited by name), at 360 px too', async () => {
    const page = await fresh();
    await ssoSignIn(page, 'grace');
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    // An owner changes any key of the account.
    await row(page, 'ada key').getByRole('button', { name: 'Reveal' }).waitFor();
    const members = page.locator('.members-section');
    await members.locator('.member-name', { hasText: 'ada@example.com' }).waitFor();
    await members.getByLabel('Email').fill('newcomer@example.com');
    await members.getByLabel('Role', { exact: true }).selectOption('viewer');
    await members.getByRole('button', { name: 'Add member' }).click();
    await members.locator('.member-name', { hasText: 'newcomer@example.com' }).waitFor();
    await axe(page, 'members section');
    await members.getByLabel('Role of newcomer@example.com').selectOption('developer');
    await expect.poll(async () => (await konsole.server.console.members.list(A)).find((m) => m.email === 'newcomer@example.com')?.role, { timeout: 10_000 }).toBe('developer');
    await members.getByRole('button', { name: 'Remove newcomer@example.com' }).click();
    await expect.poll(() => members.locator('.member-name', { hasText: 'newcomer@example.com' }).count(), { timeout: 10_000 }).toBe(0);
    expect((await konsole.server.console.members.list(A)).map((m) => m.email)).not.toContain('newcomer@example.com');
    const actions = (await konsole.server.console.listAudit({ account: A, limit: 10 })).filter((e) => e.action.startsWith('member_'));
    expect(actions.map((e) => e.action).slice(0, 3)).toEqual(['member_remove', 'member_update', 'member_add']);
    for (const e of actions.slice(0, 3)) expect(e.actor).toEqual({ type: 'user', id: 'grace', name: 'grace@example.com' });

    // Bad input: said next to the form, nothing added.
    await members.getByLabel('Email').fill('not an email');
    await members.getByRole('button', { name: 'Add member' }).click();
    await members.getByRole('alert').waitFor();
    expect((await konsole.server.console.members.list(A)).length).toBe(2);

    await page.setViewportSize({ width: 360, height: 800 });
    await page.reload();
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    await axe(page, 'members at 360 px');
    await page.setViewportSize({ width: 1100, height: 800 });
  });

  it('a person in several accounts picks one with the Account select (memberships from the roles claim)', async () => {
    const page = await fresh();
    await ssoSignIn(page, 'lin');
    const select = page.getByRole('combobox', { name: 'Account' });
    await select.waitFor();
    expect(await select.locator('option').allInnerTexts()).toEqual([`${B} (Developer)`, `${A} (Viewer)`]);
    const first = (await sessionOf(page)).account;
    await select.selectOption(first === A ? B : A);
    await expect.poll(async () => (await sessionOf(page)).account, { timeout: 10_000 }).toBe(first === A ? B : A);
    await page.selectOption('#account-select', A);
    await row(page, 'colleague key').waitFor();
    await page.locator('.who.person').getByText('lin@example.com · Viewer').waitFor();
    expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(0); // a viewer reads only
    expect(await page.getByRole('button', { name: 'Reveal' }).count()).toBe(0);
    await axe(page, 'several accounts, viewer');
    await page.setViewportSize({ width: 360, height: 800 });
    await page.locator('#account-select').waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    await axe(page, 'several accounts at 360 px');
    await page.setViewportSize({ width: 1100, height: 800 });
    const claimed = (await konsole.server.console.members.list(B)).find((m) => m.subject === 'lin');
    expect(claimed).toMatchObject({ role: 'developer', source: 'claim' });
  });
});

describe('every failure is a clear page and no session', () => {
  async function expectFailure(page: Page, title: RegExp, why: RegExp): Promise<void> {
    await page.getByRole('heading', { name: title }).waitFor();
    expect(await page.locator('#why').innerText()).toMatch(why);
    await axe(page, `failure: ${await page.locator('h1').innerText()}`);
    await page.getByRole('link', { name: 'Back to sign-in' }).click();
    await page.getByRole('link', { name: 'Sign in with SSO' }).waitFor();
    expect((await sessionOf(page)).signed_in).toBe(false);
  }

  it('a person who is a member of no account sees why, and nothing else', async () => {
    const page = await fresh();
    await ssoSignIn(page, 'stranger');
    await expectFailure(page, /No account for you here/, /not a member of any account.*subject stranger/);
  });

  it('an email the provider did not verify matches no membership', async () => {
    const page = await fresh();
    await ssoSignIn(page, 'mallory');
    await expectFailure(page, /No account for you here/, /grace@example\.com is not verified/);
  });

  it('a forged state is refused (the provider answers with a state this browser did not start)', async () => {
    const page = await fresh();
    // The console's redirect to the provider, with its state replaced: the provider echoes the forgery back.
    await page.route('**/auth/login', async (route) => {
      const res = await route.fetch({ maxRedirects: 0 });
      const to = new URL(res.headers().location!);
      to.searchParams.set('state', 'forged-state');
      await route.fulfill({ response: res, headers: { ...res.headers(), location: to.href } });
    });
    try {
      await ssoSignIn(page, 'ada');
      await expectFailure(page, /Sign-in failed/, /state differs/);
    } finally {
      await page.unroute('**/auth/login');
    }
  });

  it('a replayed answer is refused: by keygate (the flow is read once), and by the provider (the code was used)', async () => {
    const page = await fresh();
    let answer = '';
    let cookie = '';
    let record: string | null = null;
    const flowKey = (id: string) => `kg:v1:{mgmt}:oidcflow:${createHash('sha256').update(id).digest('hex')}`;
    const onRequest = (r: { url(): string }) => {
      if (r.url().includes('/auth/callback?')) answer = r.url();
    };
    const onResponse = async (r: { url(): string; headerValue(n: string): Promise<string | null> }) => {
      if (!r.url().endsWith('/auth/login')) return;
      cookie = /keygate_oidc_flow=([^;]+)/.exec((await r.headerValue('set-cookie')) ?? '')?.[1] ?? '';
      record = await konsole.server.console.redis.get(flowKey(cookie)); // what the callback will take
    };
    page.on('request', onRequest);
    page.on('response', onResponse);
    try {
      await ssoSignIn(page, 'ada');
      await page.getByRole('heading', { name: 'API keys' }).waitFor();
      expect(cookie).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(answer).toMatch(/code=/);
      const q = new URL(answer).searchParams;
      secrets.push(cookie, q.get('code')!, q.get('state')!);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('link', { name: 'Sign in with SSO' }).waitFor();
      await browser.context.addCookies([{ name: 'keygate_oidc_flow', value: cookie, domain: '127.0.0.1', path: '/auth/' }]);
      await page.goto(answer);
      await expectFailure(page, /Sign-in failed/, /already used or has expired/);
      // The flow record put back as it was: keygate lets the answer through, the provider refuses its used code.
      expect(record).toMatch(/"verifier"/);
      await konsole.server.console.redis.set(flowKey(cookie), record!, 'EX', 60);
      await browser.context.addCookies([{ name: 'keygate_oidc_flow', value: cookie, domain: '127.0.0.1', path: '/auth/' }]);
      await page.goto(answer);
      await expectFailure(page, /Sign-in failed/, /refused the sign-in code: it was already used or has expired/);
    } finally {
      page.off('request', onRequest);
      page.off('response', onResponse);
    }
  });

  it('an answer without the flow cookie of this browser is refused', async () => {
    const page = await fresh();
    await page.goto(`${konsole.url}/auth/callback?code=abc&state=def`);
    await expectFailure(page, /Sign-in failed/, /not started in this browser/);
  });

  it('an expired ID token (this console’s clock two hours ahead) is refused; 20 s off is within the tolerance', async () => {
    let page = await fresh();
    await ssoSignIn(page, 'ada', late);
    await expectFailure(page, /Sign-in failed/, /expired or is not valid yet/);
    page = await fresh();
    await ssoSignIn(page, 'ada', skewed);
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    expect((await sessionOf(page)).user.sub).toBe('ada');
    await page.goto(konsole.url);
  });

  it('a key rotation at the provider between two sign-ins is followed (the JWKS is read again)', async () => {
    let page = await fresh();
    await ssoSignIn(page, 'grace');
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    const before = provider.kid;
    await provider.rotateKeys();
    expect(provider.kid).not.toBe(before);
    page = await fresh();
    await ssoSignIn(page, 'grace');
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    expect((await sessionOf(page)).user.sub).toBe('grace');
  });

  it('the provider down: a clear page, and the token sign-in still works', async () => {
    const page = await fresh();
    await provider.close();
    try {
      await page.goto('/');
      await page.getByRole('link', { name: 'Sign in with SSO' }).click();
      await expectFailure(page, /Sign-in is unavailable/, /cannot be reached/);
      const token = await konsole.createToken(A, 'owner token');
      await page.getByLabel('Token').fill(token.token);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.getByRole('button', { name: 'Create key' }).waitFor();
      expect(await page.getByRole('heading', { name: 'Members' }).count()).toBe(0); // the token page as it was
    } finally {
      await provider.rotateKeys(); // starts it again
    }
  });

  it('no CSP violation or page error anywhere', () => {
    expect(problems).toEqual([]);
  });

  it("the console's log tells sign-ins and refusals, and never a code, a state or a flow id", () => {
    const log = konsole.logs.join('');
    expect(log).toContain('web console: signed in with SSO');
    expect(log).toContain('web console: sign-in with SSO refused');
    expect(log).toContain('web console: the identity provider cannot be reached');
    expect(secrets.length).toBe(3);
    for (const s of secrets) expect(log).not.toContain(s);
    expect(late.logs.join('')).toContain('"reason":"ID token time check"');
  });
});
