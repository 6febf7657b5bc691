/**
 * `keygate` command line (SPEC §5). `serve` runs the sidecar; the console commands manage keys.
 * Bad input: one line on stderr, non-zero exit, nothing changed.
 */
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { ConfigError, loadConfig } from '../config.ts';
import { ConsoleError } from '../console/errors.ts';
import { registerConsoleCommands } from './console-commands.ts';

export class UsageError extends Error {
  override name = 'UsageError';
}

function intArg(name: string) {
  return (v: string) => {
    if (!/^\d{1,5}$/.test(v)) throw new InvalidArgumentError(`${name} must be a port number`);
    return Number(v);
  };
}

export function buildProgram(): Command {
  const program = new Command('keygate')
    .description('API-key authentication sidecar for an LLM gateway behind Envoy')
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
    .addHelpText('after', '\nEvery setting also reads its environment variable; see README "Configuration".')
    .action(async (o: { redis?: string; grpcPort?: number; httpPort?: number; adminPort?: number }) => {
      const config = loadConfig({ redisUrl: o.redis, grpcPort: o.grpcPort, httpPort: o.httpPort, adminPort: o.adminPort });
      // Loaded here so that the console commands start without the sidecar's modules.
      const [{ startSidecar }, { createLogger }] = await Promise.all([import('../main.ts'), import('../telemetry/logger.ts')]);
      const log = createLogger(config.logLevel, undefined, { keyPrefix: config.keyPrefix });
      process.on('unhandledRejection', (err) => log.error({ err: { message: (err as Error)?.message } }, 'unhandled rejection'));
      const sidecar = await startSidecar(config, log);
      const exit = (code: number) => log.flush(() => process.exit(code));
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        log.info({ signal }, 'shutting down');
        // Backstop: the shutdown bounds itself by shutdownTimeoutMs; this only catches a hang.
        setTimeout(() => {
          log.error('shutdown did not finish in time; exiting');
          exit(1);
        }, config.shutdownTimeoutMs + 2_000).unref();
        sidecar.shutdown().then(
          () => exit(0),
          (err: unknown) => {
            log.error({ err: { message: (err as Error)?.message } }, 'shutdown failed');
            exit(1);
          },
        );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
    });

  registerConsoleCommands(program);
  return program;
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
