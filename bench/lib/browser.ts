/**
 * A real headless Chromium (Debian's package, never a downloaded browser) driven by playwright-core,
 * with a fresh profile per launch and no background traffic. `close` stops the browser and removes
 * the profile, also when the test failed halfway.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.KEYGATE_CHROMIUM ?? '/usr/bin/chromium';

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

export async function launchBrowser(opts: { baseURL: string; width?: number; height?: number }): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install Debian's chromium (scripts/install does)`);
  const profile = mkdtempSync(join(tmpdir(), 'keygate-chromium-'));
  let context: BrowserContext | undefined;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      baseURL: opts.baseURL,
      viewport: { width: opts.width ?? 1100, height: opts.height ?? 800 },
      locale: 'en-US',
      timezoneId: 'UTC',
      colorScheme: 'light',
      reducedMotion: 'reduce',
    });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: opts.baseURL });
    // Under the test timeout, so a stuck step fails with the locator it waited for.
    context.setDefaultTimeout(10_000);
    const page = context.pages()[0] ?? (await context.newPage());
    const ctx = context;
    return {
      context: ctx,
      page,
      async close() {
        await ctx.close().catch(() => {});
        rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await context?.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
    throw err;
  }
}
