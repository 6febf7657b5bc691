/// <reference lib="dom" />
/**
 * `keygate dev --sso`: the whole dev system with a local OpenID provider; its banner names the demo
 * people, a newcomer signs in through the provider's form in Chromium as the demo owner and sees the
 * demo account with its Members section; stopping dev stops the provider. Without `--sso` the
 * provider component adds no port, no setting and no line.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { portFree, startDev, type DevOptions } from '../src/dev/index.ts';
import { ssoComponent, ssoEnv, ssoLines } from '../src/dev/sso.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { launchBrowser } from './helpers/browser.ts';
import { freePort } from './helpers/redis-server.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('keygate dev --sso', () => {
  it('without --sso: no provider port, no console setting, no banner line', () => {
    const o = { consolePort: 1, sso: false } as DevOptions;
    expect(ssoComponent.ports(o)).toEqual([]);
    const ctx = { options: o } as Parameters<typeof ssoEnv>[0];
    expect(ssoEnv(ctx)).toEqual({});
    expect(ssoLines(ctx)).toEqual([]);
  });

  it('starts a local provider with demo people; the demo owner signs in through its form; stop stops it', async () => {
    const p: number[] = [];
    while (p.length < 7) {
      const n = await freePort();
      if (!p.includes(n)) p.push(n);
    }
    const dir = mkdtempSync(join(tmpdir(), 'keygate-dev-sso-'));
    dirs.push(dir);
    const options: DevOptions = { dir, redisPort: p[0]!, grpcPort: p[1]!, httpPort: p[2]!, adminPort: p[3]!, gatewayPort: p[4]!, consolePort: p[5]!, sso: true, ssoPort: p[6]! };
    const dev = await startDev(options, createLogger('silent'));
    const browser = await launchBrowser({ baseURL: `http://127.0.0.1:${p[5]}` });
    try {
      const banner = dev.banner.join('\n');
      expect(banner).toContain(`sso        http://127.0.0.1:${p[6]}`);
      expect(banner).toMatch(/log in at the local provider as\n {2}demo {2}\(demo@keygate\.dev, owner of \S+\), any password/);
      const page = browser.page;
      await page.goto('/');
      await page.getByRole('link', { name: 'Sign in with SSO' }).click();
      await page.locator('input[name="login"]').fill('demo');
      await page.locator('input[name="password"]').fill('anything');
      await page.getByRole('button', { name: 'Sign-in' }).click();
      await page.getByRole('heading', { name: 'Members' }).waitFor({ timeout: 30_000 });
      await page.locator('.who.person').getByText('demo@keygate.dev · Owner').waitFor();
      expect(await page.locator('.members-section .member-name').allInnerTexts()).toEqual(['demo@keygate.dev', 'dev@keygate.dev']);
    } finally {
      await browser.close();
      await dev.stop();
    }
    expect(await portFree(p[6]!)).toBe(true);
  }, 120_000);
});
