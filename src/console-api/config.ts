/**
 * Configuration of `keygate console` (the management API): its own settings, validated with zod,
 * plus the store settings it shares with the sidecar (Redis URL, namespace, key prefix, wallets
 * required, log level, drain and shutdown bounds), read the same way; the sidecar's other settings
 * are not read at all.
 */
import { z } from 'zod';
import { ConfigError, loadSettings } from '../config.ts';

const trustProxy = z
  .string()
  .trim()
  .transform((v, ctx): boolean | number | string[] => {
    if (v === '' || v === 'false') return false;
    if (v === 'true') return true;
    if (/^\d{1,2}$/.test(v)) return Number(v);
    const list = v.split(',').map((s) => s.trim());
    if (list.every((s) => /^[0-9a-fA-F:.]+(?:\/\d{1,3})?$/.test(s))) return list;
    ctx.addIssue({ code: 'custom', message: 'must be false, true, a hop count, or a comma-separated list of proxy addresses/CIDRs' });
    return z.NEVER;
  });

export const consoleApiConfigSchema = z.object({
  port: z.coerce.number().int().min(0).max(65535).default(9004),
  host: z.string().min(1).default('0.0.0.0'),
  /** Whether X-Forwarded-For/-Proto/-Host are believed (Fastify `trustProxy`). Default: never. */
  trustProxy: trustProxy.default(false),
  /** Requests per minute per management token (per client address before authentication); 429 beyond. */
  rateLimitPerMinute: z.coerce.number().int().min(1).max(1_000_000).default(600),
  /** Book-keeping writes (usage records, credits) per minute per token: their own bucket, apart from reads. */
  bookingRateLimitPerMinute: z.coerce.number().int().min(1).max(10_000_000).default(60_000),
  /** Request body bound in bytes (413 beyond). */
  bodyLimitBytes: z.coerce.number().int().min(1024).max(1024 * 1024).default(1024 * 1024),
  /** How long a web console session lasts after sign-in, in seconds (absolute, not idle). */
  sessionTtlSeconds: z.coerce.number().int().min(60).max(7 * 86400).default(8 * 3600),
  /** The origin browsers use for the web console when a proxy changes scheme or host (else the request's own). */
  /** The deployment's currency code (ISO 4217): what the micro-units of balances and limits count. */
  currency: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code of three capital letters, like USD or EUR').default('USD'),
  publicOrigin: z
    .url({ protocol: /^https?$/ })
    .transform((u) => new URL(u).origin)
    .optional(),
  /** Sign-in with SSO (OpenID Connect, docs/web-console.md): the issuer, the client registered there, and optional memberships from a claim. */
  oidcIssuer: z.url({ protocol: /^https?$/ }).optional(),
  oidcClientId: z.string().min(1).max(512).optional(),
  oidcClientSecret: z.string().min(1).max(1024).optional(),
  oidcRolesClaim: z.string().regex(/^[A-Za-z0-9_.:/-]{1,100}$/, 'must be a claim name').optional(),
  /** Seconds of clock difference tolerated on the ID token's iat/exp. */
  oidcClockToleranceSeconds: z.coerce.number().int().min(0).max(600).default(30),
});

export const CONSOLE_ENV = {
  port: 'KEYGATE_CONSOLE_PORT',
  host: 'KEYGATE_CONSOLE_HOST',
  trustProxy: 'KEYGATE_CONSOLE_TRUST_PROXY',
  rateLimitPerMinute: 'KEYGATE_CONSOLE_RATE_LIMIT',
  bookingRateLimitPerMinute: 'KEYGATE_CONSOLE_BOOKING_RATE_LIMIT',
  bodyLimitBytes: 'KEYGATE_CONSOLE_BODY_LIMIT',
  sessionTtlSeconds: 'KEYGATE_CONSOLE_SESSION_TTL',
  publicOrigin: 'KEYGATE_CONSOLE_PUBLIC_ORIGIN',
  currency: 'KEYGATE_CURRENCY',
  oidcIssuer: 'KEYGATE_OIDC_ISSUER',
  oidcClientId: 'KEYGATE_OIDC_CLIENT_ID',
  oidcClientSecret: 'KEYGATE_OIDC_CLIENT_SECRET',
  oidcRolesClaim: 'KEYGATE_OIDC_ROLES_CLAIM',
  oidcClockToleranceSeconds: 'KEYGATE_OIDC_CLOCK_TOLERANCE',
} as const;

export type ConsoleApiConfig = z.infer<typeof consoleApiConfigSchema> & {
  readonly redisUrl: string;
  readonly redisNamespace: string;
  readonly keyPrefix: string;
  /** `KEYGATE_REQUIRE_WALLET`, read like the sidecars read it: `wallet.enforced` while no live sidecar has published its own. */
  readonly requireWallet: boolean;
  readonly logLevel: string;
  readonly drainDelayMs: number;
  readonly shutdownTimeoutMs: number;
  /** `KEYGATE_USAGE_LOG_MAX`: the per-account cap of the Redis usage log. */
  readonly usageLogMax: number;
  /** `KEYGATE_LEDGER_URL` (postgres://…): the usage ledger (src/ledger); undefined = Redis only. */
  readonly ledgerUrl?: string;
};

/** `KEYGATE_LEDGER_URL`, checked: a postgres:// or postgresql:// URL, or unset. */
export function ledgerUrlOf(env: NodeJS.ProcessEnv): string | undefined {
  const v = env.KEYGATE_LEDGER_URL?.trim();
  if (v === undefined || v === '') return undefined;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError('invalid setting KEYGATE_LEDGER_URL: must be a postgres:// URL');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw new ConfigError('invalid setting KEYGATE_LEDGER_URL: must be a postgres:// URL');
  return v;
}

export function loadConsoleApiConfig(flags: { port?: number; redisUrl?: string } = {}, env: NodeJS.ProcessEnv = process.env): ConsoleApiConfig {
  // The sidecar's settings this process uses, and only those: a bad sidecar setting never stops it.
  const shared = loadSettings(['redisUrl', 'redisNamespace', 'keyPrefix', 'requireWallet', 'logLevel', 'drainDelayMs', 'shutdownTimeoutMs', 'usageLogMax'], { redisUrl: flags.redisUrl }, env);
  if (shared.drainDelayMs >= shared.shutdownTimeoutMs) throw new ConfigError('invalid setting KEYGATE_DRAIN_DELAY_MS: must be less than KEYGATE_SHUTDOWN_TIMEOUT_MS');
  const raw: Record<string, unknown> = {};
  for (const [k, name] of Object.entries(CONSOLE_ENV)) {
    const v = env[name];
    if (v !== undefined && v !== '') raw[k] = v;
  }
  if (flags.port !== undefined) raw.port = flags.port;
  const r = consoleApiConfigSchema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const key = issue.path[0] as keyof typeof CONSOLE_ENV;
    throw new ConfigError(`invalid setting ${CONSOLE_ENV[key] ?? String(key)}: ${issue.message}`);
  }
  checkOidcSettings(r.data);
  return {
    ...r.data,
    redisUrl: shared.redisUrl,
    redisNamespace: shared.redisNamespace,
    keyPrefix: shared.keyPrefix,
    requireWallet: shared.requireWallet,
    logLevel: shared.logLevel,
    drainDelayMs: shared.drainDelayMs,
    shutdownTimeoutMs: shared.shutdownTimeoutMs,
    usageLogMax: shared.usageLogMax,
    ledgerUrl: ledgerUrlOf(env),
  };
}

/** SSO is on with all three of issuer, client id and secret, and needs the public origin (its redirect URI); half a setting stops the start. */
function checkOidcSettings(c: z.infer<typeof consoleApiConfigSchema>): void {
  const set = [c.oidcIssuer, c.oidcClientId, c.oidcClientSecret].filter((v) => v !== undefined).length;
  if (set === 0) {
    if (c.oidcRolesClaim !== undefined) throw new ConfigError('invalid setting KEYGATE_OIDC_ROLES_CLAIM: needs KEYGATE_OIDC_ISSUER, KEYGATE_OIDC_CLIENT_ID and KEYGATE_OIDC_CLIENT_SECRET');
    return;
  }
  if (set < 3) throw new ConfigError('invalid setting KEYGATE_OIDC_ISSUER: sign-in with SSO needs KEYGATE_OIDC_ISSUER, KEYGATE_OIDC_CLIENT_ID and KEYGATE_OIDC_CLIENT_SECRET together');
  if (c.publicOrigin === undefined) throw new ConfigError('invalid setting KEYGATE_CONSOLE_PUBLIC_ORIGIN: sign-in with SSO needs it (the redirect URI is <KEYGATE_CONSOLE_PUBLIC_ORIGIN>/auth/callback)');
}
