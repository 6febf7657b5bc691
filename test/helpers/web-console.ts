/**
 * The real `keygate console` (management API with the web page) on a given Redis, for browser
 * tests: free port, loopback only, a log captured in memory at debug level (to prove nothing
 * secret is written), and the operator calls a test needs besides the page.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { CLI_ACTOR } from '../../src/console/management.ts';
import type { RatesPatch } from '../../src/console/rates.ts';
import { loadConsoleApiConfig } from '../../src/console-api/config.ts';
import { startConsole, type ConsoleServer } from '../../src/console-api/main.ts';
import { createLogger } from '../../src/telemetry/logger.ts';

export interface WebConsole {
  readonly url: string;
  readonly server: ConsoleServer;
  /** Every line the console logged. */
  readonly logs: string[];
  createToken(account: string, name: string): Promise<{ id: string; token: string }>;
  revokeToken(id: string): Promise<void>;
  keyCount(account: string): Promise<number>;
  /** Operator operations the page does not offer: a wallet credit, a usage record from the router. */
  credit(account: string, micros: number): Promise<void>;
  recordUsage(keyId: string, micros: number, tokens?: { input: number; output: number }): Promise<void>;
  /** Sets or removes (null) the account's rates, as an operator does. */
  setAccountRates(account: string, patch: RatesPatch): Promise<unknown>;
  close(): Promise<void>;
}

/** `opts.port`: a fixed port (sign-in with SSO needs its redirect URI before the start); `opts.clockSkewSeconds`: a wrong clock for the ID token's checks. */
export async function startWebConsole(redisUrl: string, env: Record<string, string> = {}, opts: { port?: number; clockSkewSeconds?: number } = {}): Promise<WebConsole> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const config = loadConsoleApiConfig({ port: opts.port ?? 0, redisUrl }, { KEYGATE_CONSOLE_HOST: '127.0.0.1', KEYGATE_CONSOLE_RATE_LIMIT: '100000', ...env });
  const server = await startConsole(config, createLogger('debug', sink), { revealKey: `k1:${randomBytes(32).toString('base64')}`, oidcClockSkewSeconds: opts.clockSkewSeconds });
  return {
    url: `http://127.0.0.1:${server.port}`,
    server,
    logs,
    async createToken(account, name) {
      const t = await server.console.createToken({ name, account }, CLI_ACTOR);
      return { id: t.record.id, token: t.token };
    },
    async revokeToken(id) {
      await server.console.revokeToken(id, CLI_ACTOR);
    },
    async keyCount(account) {
      return (await server.console.listKeys(account)).length;
    },
    async credit(account, micros) {
      await server.console.creditAccount(account, micros, `test-${randomBytes(6).toString('hex')}`, CLI_ACTOR);
    },
    async recordUsage(keyId, micros, tokens) {
      await server.console.recordUsage({
        keyId,
        amountMicros: micros,
        requestId: `req-${randomBytes(6).toString('hex')}`,
        ...(tokens && { inputTokens: tokens.input, outputTokens: tokens.output }),
      });
    },
    setAccountRates: (account, patch) => server.console.setAccountRates(account, patch, CLI_ACTOR),
    close: () => server.close(),
  };
}

/**
 * A browser on the console's page, signed in with `token`: every request it sends is noted in `sent`
 * (`METHOD /path`), every page error and failed request in `problems`; `ready` is a text the signed-in
 * page shows. `beforeSignIn` runs after the page's listeners are set, before it is opened.
 */
export async function signedInPage(
  url: string,
  token: string,
  o: { sent: string[]; problems: string[]; ready: string; beforeSignIn?: () => Promise<void> },
): Promise<import('./browser.ts').TestBrowser> {
  const { launchBrowser } = await import('./browser.ts');
  const browser = await launchBrowser({ baseURL: url });
  const { page } = browser;
  page.on('request', (r) => o.sent.push(`${r.method()} ${new URL(r.url()).pathname}`));
  page.on('pageerror', (e) => o.problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => o.problems.push(`request failed: ${r.url()}`));
  await o.beforeSignIn?.();
  await page.goto('/');
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText(o.ready).waitFor();
  return browser;
}
