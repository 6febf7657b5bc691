/**
 * A local OpenID provider (`oidc-provider`, a certified OpenID Provider) for trying sign-in with SSO
 * (`keygate dev --sso`) and for the tests: loopback only, its people from a table, one confidential
 * client, PKCE required, the scope claims in the ID token, first-party consent (no consent screen).
 * Its login form is oidc-provider's development form (a login name and a password field; it accepts
 * any password): never for production. `oidc-provider` is a devDependency: `keygate dev` runs from a
 * checkout with its devDependencies installed, and this module is loaded only by `dev --sso`.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type RequestListener, type Server } from 'node:http';

export interface DevPerson {
  /** What is typed into the login field; also the `sub`. */
  readonly login: string;
  readonly email?: string;
  readonly emailVerified?: boolean;
  readonly name?: string;
  /** The `keygate_roles` claim (`account:role` entries), when given. */
  readonly roles?: readonly string[];
}

export interface DevProviderOptions {
  readonly port: number;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly redirectUris: readonly string[];
  readonly people: readonly DevPerson[];
}

export interface DevProvider {
  readonly issuer: string;
  /** The signing key's id (changes with `rotateKeys`). */
  readonly kid: string;
  /** Restarts on the same port with a new signing key (the old one gone from the JWKS). */
  rotateKeys(): Promise<void>;
  close(): Promise<void>;
}

function signingKey(): { kid: string; jwk: Record<string, unknown> } {
  const kid = `dev-${randomBytes(6).toString('hex')}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, jwk: { ...privateKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' } };
}

export async function startDevProvider(opts: DevProviderOptions): Promise<DevProvider> {
  // oidc-provider ships no types: the two members used here.
  const name = 'oidc-provider';
  const { default: Provider } = (await import(name)) as { default: new (issuer: string, config: object) => { callback(): RequestListener } };
  const issuer = `http://127.0.0.1:${opts.port}`;
  const people = new Map(opts.people.map((p) => [p.login, p]));
  const cookieKeys = [randomBytes(32).toString('base64url')];
  let key = signingKey();
  let server: Server | undefined;

  const start = async () => {
    const provider = new Provider(issuer, {
      clients: [
        {
          client_id: opts.clientId,
          client_secret: opts.clientSecret,
          redirect_uris: [...opts.redirectUris],
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      jwks: { keys: [key.jwk] },
      cookies: { keys: cookieKeys },
      pkce: { required: () => true },
      ttl: { IdToken: 3600, AccessToken: 3600, AuthorizationCode: 60, Interaction: 600, Session: 86400, Grant: 86400 },
      conformIdTokenClaims: false,
      claims: { openid: ['sub', 'keygate_roles'], email: ['email', 'email_verified'], profile: ['name'] },
      features: { devInteractions: { enabled: true } },
      findAccount: async (_ctx: unknown, id: string) => {
        const p = people.get(id);
        if (!p) return undefined;
        return {
          accountId: id,
          claims: async () => ({
            sub: id,
            ...(p.email !== undefined && { email: p.email, email_verified: p.emailVerified ?? false }),
            ...(p.name !== undefined && { name: p.name }),
            ...(p.roles !== undefined && { keygate_roles: [...p.roles] }),
          }),
        };
      },
      // First-party client: the grant is made at login, no consent screen.
      loadExistingGrant: async (ctx: any) => {
        const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
        if (grantId) return ctx.oidc.provider.Grant.find(grantId);
        const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
        grant.addOIDCScope('openid email profile');
        await grant.save();
        return grant;
      },
    });
    const s = createServer(provider.callback());
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(opts.port, '127.0.0.1', () => resolve());
    });
    server = s;
  };
  const stop = async () => {
    const s = server;
    server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  await start();
  return {
    issuer,
    get kid() {
      return key.kid;
    },
    async rotateKeys() {
      await stop();
      key = signingKey();
      await start();
    },
    close: stop,
  };
}
