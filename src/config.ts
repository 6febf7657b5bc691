/**
 * Sidecar configuration: flags over environment over defaults, validated with zod.
 * A bad setting stops the start with one line naming it (see `ConfigError`).
 */
import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { parseOperatorEndpoints, type OperatorRow } from './core/endpoints/operator.ts';
import { FAMILIES, type PrefixRule } from './core/families/index.ts';
import { compileModelEndpoints, parseBareProviders, withBareProviders, type EndpointTable } from './core/model/index.ts';
import type { Family } from './core/families/index.ts';
import { DEFAULT_KEY_PREFIX, isValidKeyPrefix, KEY_PREFIX_RULE } from './core/key-format.ts';
import { DEFAULT_NAMESPACE, NAMESPACE_PATTERN } from './schema/redis-schema.ts';
import { parseRedisUrl } from './redis-url.ts';
import { parseCredentialHeaders } from './core/upstream-credential.ts';
import { parseCredentialKeyring } from './keys/credential-crypto.ts';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const port = z.coerce.number().int().min(0).max(65535);
const bool = z
  .union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'])])
  .transform((v) => v === true || v === 'true' || v === '1' || v === 'yes' || v === 'on');
const headerName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be a lower-case HTTP header name')
  .refine((h) => !h.startsWith('x-envoy-') && h !== 'host', 'must not be a reserved header');
const redisUrl = z
  .string()
  .regex(/^(rediss?|redis-sentinel|redis-cluster|rediss-cluster):\/\/[^\s]+$/, 'must be a redis://, rediss://, redis-sentinel:// or redis-cluster:// URL')
  .superRefine((url, ctx) => {
    try {
      parseRedisUrl(url);
    } catch (err) {
      // parseRedisUrl's messages never contain the password
      ctx.addIssue({ code: 'custom', message: (err as Error).message.replace(/^REDIS_URL /, '') });
    }
  });

const prefixTable = z
  .string()
  .transform((s, ctx): PrefixRule[] => {
    const rules: PrefixRule[] = [];
    for (const item of s.split(',').map((x) => x.trim()).filter(Boolean)) {
      const eq = item.lastIndexOf('=');
      const prefix = item.slice(0, eq);
      const family = item.slice(eq + 1);
      if (eq <= 0 || !prefix.startsWith('/') || !(FAMILIES as readonly string[]).includes(family)) {
        ctx.addIssue({ code: 'custom', message: `"${item}" is not /path-prefix=openai|anthropic|google` });
        return z.NEVER;
      }
      rules.push({ prefix, family: family as PrefixRule['family'] });
    }
    return rules;
  });

const modelEndpoints = z.string().transform((s, ctx): EndpointTable => {
  try {
    return compileModelEndpoints(s);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});

/** The most bytes of the operator's endpoint file keygate reads. */
const MAX_ENDPOINTS_FILE = 1024 * 1024;

/** KEYGATE_ENDPOINTS: the operator's endpoint file (YAML), read and checked whole at start (docs/endpoints.md). */
const endpointsFile = z.string().transform((path, ctx): readonly OperatorRow[] => {
  if (path.trim() === '') return [];
  try {
    if (statSync(path).size > MAX_ENDPOINTS_FILE) throw new Error(`larger than ${MAX_ENDPOINTS_FILE} bytes`);
    return parseOperatorEndpoints(readFileSync(path, 'utf8'));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    ctx.addIssue({ code: 'custom', message: `${path}: ${e.code === 'ENOENT' ? 'no such file' : e.code === 'EACCES' ? 'not readable' : e.message}` });
    return z.NEVER;
  }
});

const bareProviders = z.string().transform((s, ctx): ReadonlyMap<Family, string> => {
  try {
    return parseBareProviders(s);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});

const credentialKey = z.string().superRefine((v, ctx) => {
  if (v.trim() === '') return;
  try {
    parseCredentialKeyring(v);
  } catch (err) {
    // The keyring's messages name the variable and the entry's position, never its value.
    ctx.addIssue({ code: 'custom', message: (err as Error).message.replace(/^KEYGATE_CREDENTIAL_KEY:? ?/, '') });
  }
});

/** Kept as written (the README shows the default as none); `parseCredentialHeaders` makes the table at start. */
const credentialHeaders = z.string().superRefine((s, ctx) => {
  try {
    parseCredentialHeaders(s);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
  }
});

export const configSchema = z.object({
  redisUrl: redisUrl.default('redis://127.0.0.1:6379'),
  listenHost: z.string().min(1).default('127.0.0.1'),
  adminHost: z.string().min(1).default('0.0.0.0'),
  grpcPort: port.default(9001),
  httpPort: port.default(9002),
  adminPort: port.default(9003),
  keyPrefix: z.string().refine(isValidKeyPrefix, KEY_PREFIX_RULE).default(DEFAULT_KEY_PREFIX),
  redisNamespace: z.string().regex(NAMESPACE_PATTERN, 'must be 1-32 of [A-Za-z0-9_.-]').default(DEFAULT_NAMESPACE),
  accountHeader: headerName.default('x-keygate-account-id'),
  keyIdHeader: headerName.default('x-keygate-key-id'),
  stripKeyHeaders: bool.default(true),
  pathPrefixes: prefixTable.default([]),
  modelEndpoints: modelEndpoints.default([]),
  /** The operator's endpoint rows (KEYGATE_ENDPOINTS: a YAML file), added to the builtin catalog. */
  endpoints: endpointsFile.default([]),
  /** What a bare model name means per entry family (off by default); carried on `modelEndpoints` to the model reader. */
  bareModelProviders: bareProviders.default(new Map()),
  errorDomain: z.string().regex(/^[A-Za-z0-9.-]{1,253}$/).default('keygate'),
  redisTimeoutMs: z.coerce.number().int().min(10).max(60_000).default(250),
  cacheMaxEntries: z.coerce.number().int().min(0).max(50_000_000).default(200_000),
  serveCachedDuringOutage: bool.default(false),
  requireWallet: bool.default(false),
  /** Accounts' own upstream credentials (docs/credentials.md): the key that opens them ('' = none: never injected). */
  credentialKey: credentialKey.default(''),
  credentialHeaders: credentialHeaders.default(''),
  requireOwnCredential: bool.default(false),
  countUsage: bool.default(true),
  meter: bool.default(true),
  meterForceUsage: bool.default(true),
  /** Usage-log entries kept per account in Redis (the hard cap; with a ledger only acknowledged entries are trimmed below it). */
  usageLogMax: z.coerce.number().int().min(100).max(100_000_000).default(100_000),
  meterMaxStreams: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  meterMaxStreamMs: z.coerce.number().int().min(1000).max(24 * 3600_000).default(15 * 60_000),
  meterFlushMs: z.coerce.number().int().min(10).max(1000).default(250),
  /** Price from the catalog of @pydantic/genai-prices under the operator's table (docs/metering.md, "The price catalog"). */
  priceCatalog: bool.default(true),
  storeMaxInflight: z.coerce.number().int().min(1).max(100_000).default(256),
  stalenessBoundMs: z.coerce.number().int().min(30).max(60_000).default(250),
  grpcTransport: z.enum(['h2', 'grpc-js']).default('h2'),
  grpcMaxReceiveBytes: z.coerce.number().int().min(64 * 1024).max(64 * 1024 * 1024).default(16 * 1024 * 1024),
  grpcReceiveTimeoutMs: z.coerce.number().int().min(100).max(600_000).default(10_000),
  grpcMaxConnectionBufferedBytes: z.coerce.number().int().min(64 * 1024).max(4 * 1024 * 1024 * 1024).default(64 * 1024 * 1024),
  grpcMaxBufferedBytes: z.coerce.number().int().min(64 * 1024).max(16 * 1024 * 1024 * 1024).default(256 * 1024 * 1024),
  httpMaxBodyBytes: z.coerce.number().int().min(64 * 1024).max(64 * 1024 * 1024).default(16 * 1024 * 1024),
  drainDelayMs: z.coerce.number().int().min(0).max(600_000).default(5_000),
  shutdownTimeoutMs: z.coerce.number().int().min(100).max(600_000).default(20_000),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  metricsAccountLabels: bool.default(false),
  metricsMaxAccounts: z.coerce.number().int().min(1).max(100_000).default(1000),
  otlpEndpoint: z.union([z.literal(''), z.url({ protocol: /^https?$/ }).max(2048)]).default(''),
  otlpTraces: z.enum(['otlp', 'none']).default('otlp'),
  otlpMetrics: z.enum(['otlp', 'none']).default('otlp'),
  otlpServiceName: z.string().min(1).max(256).default('keygate'),
  otlpMetricsIntervalMs: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
  traceUnparentedRatio: z.coerce.number().min(0).max(1).default(0),
});

export type Config = z.infer<typeof configSchema>;
type Raw = { [K in keyof Config]?: unknown };

/** Environment variable for each setting. */
export const ENV: { readonly [K in keyof Config]: string } = {
  redisUrl: 'REDIS_URL',
  listenHost: 'KEYGATE_LISTEN_HOST',
  adminHost: 'KEYGATE_ADMIN_HOST',
  grpcPort: 'KEYGATE_GRPC_PORT',
  httpPort: 'KEYGATE_HTTP_PORT',
  adminPort: 'KEYGATE_ADMIN_PORT',
  keyPrefix: 'KEYGATE_KEY_PREFIX',
  redisNamespace: 'KEYGATE_REDIS_NAMESPACE',
  accountHeader: 'KEYGATE_ACCOUNT_HEADER',
  keyIdHeader: 'KEYGATE_KEY_ID_HEADER',
  stripKeyHeaders: 'KEYGATE_STRIP_KEY_HEADERS',
  pathPrefixes: 'KEYGATE_PATH_PREFIXES',
  modelEndpoints: 'KEYGATE_MODEL_ENDPOINTS',
  endpoints: 'KEYGATE_ENDPOINTS',
  bareModelProviders: 'KEYGATE_BARE_MODEL_PROVIDER',
  errorDomain: 'KEYGATE_ERROR_DOMAIN',
  redisTimeoutMs: 'KEYGATE_REDIS_TIMEOUT_MS',
  cacheMaxEntries: 'KEYGATE_CACHE_MAX_ENTRIES',
  serveCachedDuringOutage: 'KEYGATE_SERVE_CACHED_DURING_OUTAGE',
  requireWallet: 'KEYGATE_REQUIRE_WALLET',
  credentialKey: 'KEYGATE_CREDENTIAL_KEY',
  credentialHeaders: 'KEYGATE_CREDENTIAL_HEADERS',
  requireOwnCredential: 'KEYGATE_REQUIRE_OWN_CREDENTIAL',
  countUsage: 'KEYGATE_COUNT_USAGE',
  meter: 'KEYGATE_METER',
  meterForceUsage: 'KEYGATE_METER_FORCE_USAGE',
  usageLogMax: 'KEYGATE_USAGE_LOG_MAX',
  meterMaxStreams: 'KEYGATE_METER_MAX_STREAMS',
  meterMaxStreamMs: 'KEYGATE_METER_MAX_STREAM_MS',
  meterFlushMs: 'KEYGATE_METER_FLUSH_MS',
  priceCatalog: 'KEYGATE_PRICE_CATALOG',
  storeMaxInflight: 'KEYGATE_STORE_MAX_INFLIGHT',
  stalenessBoundMs: 'KEYGATE_STALENESS_BOUND_MS',
  grpcTransport: 'KEYGATE_GRPC_TRANSPORT',
  grpcMaxReceiveBytes: 'KEYGATE_GRPC_MAX_RECEIVE_BYTES',
  grpcReceiveTimeoutMs: 'KEYGATE_GRPC_RECEIVE_TIMEOUT_MS',
  grpcMaxConnectionBufferedBytes: 'KEYGATE_GRPC_MAX_CONNECTION_BUFFERED_BYTES',
  grpcMaxBufferedBytes: 'KEYGATE_GRPC_MAX_BUFFERED_BYTES',
  httpMaxBodyBytes: 'KEYGATE_HTTP_MAX_BODY_BYTES',
  drainDelayMs: 'KEYGATE_DRAIN_DELAY_MS',
  shutdownTimeoutMs: 'KEYGATE_SHUTDOWN_TIMEOUT_MS',
  logLevel: 'KEYGATE_LOG_LEVEL',
  metricsAccountLabels: 'KEYGATE_METRICS_ACCOUNT_LABELS',
  metricsMaxAccounts: 'KEYGATE_METRICS_MAX_ACCOUNTS',
  otlpEndpoint: 'OTEL_EXPORTER_OTLP_ENDPOINT',
  otlpTraces: 'OTEL_TRACES_EXPORTER',
  otlpMetrics: 'OTEL_METRICS_EXPORTER',
  otlpServiceName: 'OTEL_SERVICE_NAME',
  otlpMetricsIntervalMs: 'OTEL_METRIC_EXPORT_INTERVAL',
  traceUnparentedRatio: 'KEYGATE_TRACE_UNPARENTED_RATIO',
};

/** Flags over environment for `keys`, validated by `schema`; throws ConfigError with one line. */
function parseSettings<T>(keys: readonly (keyof Config)[], schema: z.ZodType<T>, flags: Raw, env: NodeJS.ProcessEnv): T {
  const raw: Record<string, unknown> = {};
  for (const k of keys) {
    const fromFlag = flags[k];
    const fromEnv = env[ENV[k]];
    if (fromFlag !== undefined) raw[k] = fromFlag;
    else if (fromEnv !== undefined && fromEnv !== '') raw[k] = fromEnv;
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const key = issue.path[0] as keyof Config;
    const shown = key in ENV ? `${ENV[key]} (${String(key)})` : String(key);
    throw new ConfigError(`invalid setting ${shown}: ${issue.message}`);
  }
  return r.data;
}

/** The settings the console commands read; the sidecar's other settings never stop them. */
export const CONSOLE_SETTINGS = ['redisUrl', 'redisNamespace', 'keyPrefix', 'requireWallet', 'usageLogMax'] as const;
export type ConsoleConfig = Pick<Config, (typeof CONSOLE_SETTINGS)[number]>;

/** The console's settings only (Redis URL, namespace, key prefix, wallets required): flags over environment. */
export function loadConsoleConfig(flags: Raw = {}, env: NodeJS.ProcessEnv = process.env): ConsoleConfig {
  return loadSettings(CONSOLE_SETTINGS, flags, env);
}

/**
 * Only the settings named (flags over environment): a process that uses a few of the sidecar's
 * settings is never stopped by a bad value of another.
 */
export function loadSettings<K extends keyof Config>(keys: readonly K[], flags: Raw = {}, env: NodeJS.ProcessEnv = process.env): Pick<Config, K> {
  const mask = Object.fromEntries(keys.map((k) => [k, true])) as Partial<Record<keyof Config, true>>;
  return parseSettings(keys, configSchema.pick(mask) as unknown as z.ZodType<Pick<Config, K>>, flags, env);
}

/** Every setting's default, for `serve --help`. */
export function configDefaults(): Config {
  return configSchema.parse({});
}

/** Settings from flags (given as parsed values) over environment; throws ConfigError with one line. */
export function loadConfig(flags: Raw = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const c = parseSettings(Object.keys(ENV) as (keyof Config)[], configSchema, flags, env);
  const ports = [c.grpcPort, c.httpPort, c.adminPort].filter((p) => p !== 0);
  if (new Set(ports).size !== ports.length) throw new ConfigError('invalid setting: gRPC, HTTP and admin ports must differ');
  if (c.drainDelayMs >= c.shutdownTimeoutMs) {
    throw new ConfigError('invalid setting KEYGATE_DRAIN_DELAY_MS: must be less than KEYGATE_SHUTDOWN_TIMEOUT_MS');
  }
  if (c.grpcMaxConnectionBufferedBytes < c.grpcMaxReceiveBytes) {
    throw new ConfigError('invalid setting KEYGATE_GRPC_MAX_CONNECTION_BUFFERED_BYTES: must be at least KEYGATE_GRPC_MAX_RECEIVE_BYTES');
  }
  if (c.grpcMaxBufferedBytes < c.grpcMaxConnectionBufferedBytes) {
    throw new ConfigError('invalid setting KEYGATE_GRPC_MAX_BUFFERED_BYTES: must be at least KEYGATE_GRPC_MAX_CONNECTION_BUFFERED_BYTES');
  }
  if (c.accountHeader === c.keyIdHeader) throw new ConfigError('invalid setting KEYGATE_KEY_ID_HEADER: must differ from KEYGATE_ACCOUNT_HEADER');
  const credentialHeaders = Object.values(parseCredentialHeaders(c.credentialHeaders));
  if (credentialHeaders.includes(c.accountHeader) || credentialHeaders.includes(c.keyIdHeader)) {
    throw new ConfigError('invalid setting KEYGATE_CREDENTIAL_HEADERS: a credential header must differ from KEYGATE_ACCOUNT_HEADER and KEYGATE_KEY_ID_HEADER');
  }
  return { ...c, modelEndpoints: withBareProviders(c.modelEndpoints, c.bareModelProviders) };
}
