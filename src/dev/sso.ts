/**
 * `keygate dev --sso`: a local OpenID provider (oidc-provider.ts, loopback, in memory) with two demo
 * people, and the console configured to offer "Sign in with SSO" against it:
 *
 *   demo  (demo@keygate.dev, verified)  owner of the demo account
 *   dev   (dev@keygate.dev, verified)   developer of the demo account
 *
 * Its login form accepts any password (oidc-provider's development form). For trying the flow on
 * this machine only, never for production. Without `--sso` this adds nothing: no port, no line, no
 * setting. `oidc-provider` is a devDependency: `keygate dev` runs from a checkout with its
 * devDependencies installed (`scripts/install`), and the module is imported only with `--sso`.
 */
import { randomBytes } from 'node:crypto';
import { ConsoleError } from '../console/errors.ts';
import { CLI_ACTOR } from '../console/management.ts';
import type { ConsoleService } from '../console/service.ts';
import type { DevComponent, DevContext } from './index.ts';

export const DEV_SSO_PORT = 9005;
export const DEV_SSO_PEOPLE = [
  { login: 'demo', email: 'demo@keygate.dev', emailVerified: true, name: 'Demo Owner', role: 'owner' },
  { login: 'dev', email: 'dev@keygate.dev', emailVerified: true, name: 'Demo Developer', role: 'developer' },
] as const;

export interface DevSso {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
}

export const ssoComponent: DevComponent = {
  name: 'sso',
  ports: (o) => (o.sso ? [{ port: o.ssoPort ?? DEV_SSO_PORT, flag: '--sso-port' }] : []),
  async start(ctx) {
    if (!ctx.options.sso) return { lines: [], stop: async () => {} };
    const { startDevProvider } = await import('./oidc-provider.ts');
    // A fresh client secret each start: the provider keeps nothing across restarts either.
    const client = { clientId: 'keygate-dev', clientSecret: randomBytes(24).toString('base64url') };
    const provider = await startDevProvider({
      port: ctx.options.ssoPort ?? DEV_SSO_PORT,
      ...client,
      redirectUris: [`http://127.0.0.1:${ctx.options.consolePort}/auth/callback`],
      people: DEV_SSO_PEOPLE,
    });
    ctx.sso = { issuer: provider.issuer, ...client };
    return {
      lines: [`sso        ${provider.issuer}   (a local OpenID provider for "Sign in with SSO"; development only)`],
      stop: () => provider.close(),
    };
  },
};

/** The console's settings for the local provider (none without `--sso`). */
export function ssoEnv(ctx: DevContext): Record<string, string> {
  if (!ctx.sso) return {};
  return {
    KEYGATE_OIDC_ISSUER: ctx.sso.issuer,
    KEYGATE_OIDC_CLIENT_ID: ctx.sso.clientId,
    KEYGATE_OIDC_CLIENT_SECRET: ctx.sso.clientSecret,
    KEYGATE_CONSOLE_PUBLIC_ORIGIN: `http://127.0.0.1:${ctx.options.consolePort}`,
  };
}

/** The demo people as members of the demo account (kept across starts; added once). */
export async function ssoMembers(ctx: DevContext, mc: ConsoleService): Promise<void> {
  if (!ctx.sso) return;
  for (const p of DEV_SSO_PEOPLE) {
    await mc.members.add(ctx.demoKey!.account, { email: p.email }, p.role, CLI_ACTOR).catch((err: unknown) => {
      if (!(err instanceof ConsoleError && err.code === 'CONFLICT')) throw err;
    });
  }
}

/** The banner's lines for trying the flow. */
export function ssoLines(ctx: DevContext): string[] {
  if (!ctx.sso || !ctx.console) return [];
  return [
    `Sign in with SSO: open ${ctx.console.url}/, press "Sign in with SSO", and log in at the local provider as`,
    ...DEV_SSO_PEOPLE.map((p) => `  ${p.login.padEnd(5)} (${p.email}, ${p.role} of ${ctx.demoKey!.account}), any password (the development form does not check it)`),
    '',
  ];
}
