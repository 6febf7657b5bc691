/**
 * `keygate` command line. `serve` runs the sidecar, `dev` the whole system on one machine; the console commands manage keys.
 * Bad input: one line on stderr, non-zero exit, nothing changed.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { ConfigError, configDefaults, ENV, loadConfig, type Config } from '../config.ts';
import { ConsoleError } from '../console/errors.ts';
import { registerConsoleCommands } from './console-commands.ts';
import { registerManagementCommands } from './management-commands.ts';
import { registerEventCommands } from './event-commands.ts';
import { registerPriceCommands } from './price-commands.ts';
import { registerMemberCommands } from './member-commands.ts';
import { registerCredentialCommands } from './credential-commands.ts';
import { registerLedgerCommands } from './ledger-commands.ts';
import { ledgerUrlOf } from '../console-api/config.ts';
import { stopOnSignals } from './signals.ts';
import { refuseConflictingOptions } from './option-conflicts.ts';

/** Default ports of `keygate dev` (the sidecar's are those of `serve`). */
const DEV_PORTS = { redisPort: 6380, grpcPort: 9001, httpPort: 9002, adminPort: 9003, gatewayPort: 8080, consolePort: 9004 } as const;

export class UsageError extends Error {
  override name = 'UsageError';
}

function intArg(name: string) {
  return (v: string) => {
    if (!/^\d{1,5}$/.test(v)) throw new InvalidArgumentError(`${name} must be a port number`);
    return Number(v);
  };
}

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** Every setting with its environment variable and default, for `serve --help`. */
export function settingsHelp(): string {
  const d = configDefaults();
  const show = (v: unknown) => (Array.isArray(v) ? (v.length ? JSON.stringify(v) : '(none)') : String(v));
  const rows = (Object.keys(ENV) as (keyof Config)[]).map((k) => [ENV[k], show(d[k])]);
  const w = Math.max(...rows.map((r) => r[0]!.length));
  return ['', 'Settings (flags above win over the environment; defaults in brackets):', ...rows.map(([e, v]) => `  ${e!.padEnd(w)}  [${v}]`), '', 'See README "Configuration" for what each one does.'].join('\n');
}

/** A port already taken, as one line naming the setting; null for any other error. */
export function portError(err: unknown, config: Pick<Config, 'grpcPort' | 'httpPort' | 'adminPort'>): UsageError | null {
  const e = err as NodeJS.ErrnoException & { port?: number; address?: string };
  if (e?.code !== 'EADDRINUSE' && e?.code !== 'EACCES') return null;
  const which =
    e.port === config.grpcPort ? 'gRPC ext_authz port (--grpc-port, KEYGATE_GRPC_PORT)'
    : e.port === config.httpPort ? 'HTTP authz port (--http-port, KEYGATE_HTTP_PORT)'
    : e.port === config.adminPort ? 'admin port (--admin-port, KEYGATE_ADMIN_PORT)'
    : 'port';
  const what = e.code === 'EADDRINUSE' ? 'is already in use; stop what uses it or choose another port' : 'needs privileges; choose a port above 1023';
  return new UsageError(`${which} ${e.port ?? ''} on ${e.address ?? ''} ${what}`.replace(/\s+/g, ' '));
}

export function buildProgram(): Command {
  const program = new Command('keygate')
    .description('API-key authentication sidecar for an LLM gateway behind Envoy')
    .version(version, '-V, --version', 'print the version')
    .exitOverride()
    .showHelpAfterError(false)
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });

  program
    .command('serve')
    .description('run the sidecar: gRPC ext_authz, HTTP external auth, and health/metrics')
    .option('--redis <url>', 'Redis URL (env REDIS_URL; default redis://127.0.0.1:6379)')
    .option('--grpc-port <n>', 'gRPC ext_authz port (env KEYGATE_GRPC_PORT; default 9001)', intArg('--grpc-port'))
    .option('--http-port <n>', 'HTTP external auth port (env KEYGATE_HTTP_PORT; default 9002)', intArg('--http-port'))
    .option('--admin-port <n>', '/healthz, /readyz, /metrics port (env KEYGATE_ADMIN_PORT; default 9003)', intArg('--admin-port'))
    .addHelpText('after', settingsHelp())
    .action(async (o: { redis?: string; grpcPort?: number; httpPort?: number; adminPort?: number }) => {
      const config = loadConfig({ redisUrl: o.redis, grpcPort: o.grpcPort, httpPort: o.httpPort, adminPort: o.adminPort });
      // Loaded here so that the console commands start without the sidecar's modules.
      const [{ startSidecar }, { createLogger }] = await Promise.all([import('../main.ts'), import('../telemetry/logger.ts')]);
      const log = createLogger(config.logLevel, undefined, { keyPrefix: config.keyPrefix });
      // Last resort only: every request's errors are contained where they happen (docs/decisions.md).
      // A rejection nobody awaited is one detached operation: logged, serving goes on. A thrown
      // exception that reached the top unwound code midway, so state may be half-updated: logged
      // (message and code only, never request content), then exit 1 for the supervisor to restart.
      process.on('unhandledRejection', (err) => log.error({ err: { message: (err as Error)?.message } }, 'unhandled rejection'));
      process.on('uncaughtException', (err) => {
        log.fatal({ err: { message: err?.message, code: (err as NodeJS.ErrnoException)?.code } }, 'uncaught exception; exiting');
        log.flush(() => process.exit(1));
      });
      let sidecar;
      try {
        sidecar = await startSidecar(config, log);
      } catch (err) {
        throw portError(err, config) ?? err;
      }
      stopOnSignals(log, config.shutdownTimeoutMs, () => sidecar.shutdown());
    });

  program
    .command('dev')
    .description('try keygate on this machine: its own redis-server, the sidecar, the console, a dev gateway and a demo key (Ctrl-C stops all)')
    .option('--dir <path>', 'state directory: Redis data, reveal key, demo key (default: .keygate/ in the checkout)')
    .option('--redis-port <n>', `port of the redis-server dev starts (default ${DEV_PORTS.redisPort})`, intArg('--redis-port'))
    .option('--grpc-port <n>', `sidecar gRPC ext_authz port (default ${DEV_PORTS.grpcPort})`, intArg('--grpc-port'))
    .option('--http-port <n>', `sidecar HTTP authz port (default ${DEV_PORTS.httpPort})`, intArg('--http-port'))
    .option('--admin-port <n>', `sidecar admin port (default ${DEV_PORTS.adminPort})`, intArg('--admin-port'))
    .option('--gateway-port <n>', `dev gateway port, what curl and the SDKs talk to (default ${DEV_PORTS.gatewayPort})`, intArg('--gateway-port'))
    .option('--console-port <n>', `management API and web page port (default ${DEV_PORTS.consolePort})`, intArg('--console-port'))
    .option('--upstream <url>', 'send allowed requests to this upstream instead of the built-in stub')
    .option('--sso', 'also start a local OpenID provider with demo people, and offer "Sign in with SSO" on the page (development only)')
    .option('--sso-port <n>', 'port of that provider (default 9005)', intArg('--sso-port'))
    .option('--upstream-credential-env <var>', "the gateway's own upstream credential, from this environment variable: added where an account has none of its own (docs/credentials.md)")
    .option('--ledger <url>', 'copy usage into this PostgreSQL (postgres://…) and read usage from it (docs/ledger.md); default: Redis only')
    .action(async (o: { dir?: string; redisPort?: number; grpcPort?: number; httpPort?: number; adminPort?: number; gatewayPort?: number; consolePort?: number; upstream?: string; sso?: boolean; ssoPort?: number; upstreamCredentialEnv?: string; ledger?: string }) => {
      const [{ startDev, DevError }, { createLogger }, pino] = await Promise.all([import('../dev/index.ts'), import('../telemetry/logger.ts'), import('pino')]);
      if (o.upstream !== undefined && !/^https?:\/\/[^\s/]+/.test(o.upstream)) throw new UsageError('--upstream must be an http:// or https:// URL');
      // Logs go to stderr; stdout carries the banner.
      const log = createLogger(process.env.KEYGATE_LOG_LEVEL || 'info', pino.default.destination({ dest: 2, sync: true }));
      const options = {
        dir: o.dir ?? fileURLToPath(new URL('../../.keygate', import.meta.url)),
        redisPort: o.redisPort ?? DEV_PORTS.redisPort,
        grpcPort: o.grpcPort ?? DEV_PORTS.grpcPort,
        httpPort: o.httpPort ?? DEV_PORTS.httpPort,
        adminPort: o.adminPort ?? DEV_PORTS.adminPort,
        gatewayPort: o.gatewayPort ?? DEV_PORTS.gatewayPort,
        consolePort: o.consolePort ?? DEV_PORTS.consolePort,
        ...(o.upstream ? { upstream: o.upstream } : {}),
        ...(o.sso ? { sso: true, ssoPort: o.ssoPort } : {}),
        ...(o.upstreamCredentialEnv !== undefined ? { upstreamCredential: gatewayCredential(o.upstreamCredentialEnv) } : {}),
        ...(o.ledger ? { ledger: ledgerUrlOf({ KEYGATE_LEDGER_URL: o.ledger }) } : {}),
      };
      let dev;
      try {
        dev = await startDev(options, log);
      } catch (err) {
        if (err instanceof DevError) throw new UsageError(`dev: ${err.message}`);
        throw err;
      }
      process.stdout.write(`${dev.banner.join('\n')}\n`);
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        process.stdout.write('keygate dev: stopping\n');
        dev.stop().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });

  registerConsoleCommands(program);
  registerManagementCommands(program);
  registerEventCommands(program);
  registerPriceCommands(program);
  registerMemberCommands(program);
  registerCredentialCommands(program);
  registerLedgerCommands(program);
  return refuseConflictingOptions(program);
}

/** `keygate dev --upstream-credential-env VAR`: the variable's value (never echoed), or a UsageError. */
function gatewayCredential(name: string): string {
  const v = process.env[name]?.trim();
  if (v === undefined || v === '') throw new UsageError(`--upstream-credential-env: the environment variable ${name.slice(0, 64)} is not set or empty`);
  return v;
}

/** One line on stderr for any error we expect a user to fix. */
export async function run(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    const msg = err instanceof Error ? err.message : String(err);
    process.stderr.write(`keygate: ${msg.split('\n')[0]}\n`);
    process.exitCode = err instanceof ConfigError || err instanceof UsageError || (err instanceof ConsoleError && err.isUsage) ? 2 : 1;
  }
}

// Run only as the entry point, so tests and embedders can import buildProgram/run.
if (import.meta.main) await run(process.argv.slice(2));
