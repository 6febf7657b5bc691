/**
 * `keygate dev`: the whole system on one machine with nothing else running. It starts, in order,
 * the components of `devComponents()`: its own redis-server (data under the dev directory, kept
 * across restarts), the sidecar, a demo account and key, a stub LLM upstream and the dev gateway
 * (see gateway.ts). Stopping stops them in reverse order. A component that fails to start stops
 * the ones before it. Before anything starts, every port is checked and redis-server must be on
 * PATH: otherwise one line says why and nothing is left running. redis-server is not in this process,
 * so it outlives a `keygate dev` that was killed (SIGKILL, a crash): it writes its pid file under the
 * dev directory, and the next start stops such a leftover (`stopLeftoverRedis`) with one line saying so.
 *
 * Plugging in another component (e.g. the management console): add an entry to
 * `devComponents()` — a name, the ports it needs (checked up front) and `start(ctx)` returning
 * the lines it wants printed and `stop()`. `ctx` carries the Redis URL, the reveal key, the
 * sidecar and the log.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { accessSync, constants } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { delimiter, join } from 'node:path';
import type { Logger } from 'pino';
import { loadConfig, loadConsoleConfig } from '../config.ts';
import { ConsoleService } from '../console/service.ts';
import { formatAmount } from '../schema/money.ts';
import { priceBookingUsage } from '../metering/pricing.ts';
import { PriceTable } from '../schema/prices.ts';
import type { PriceCatalog } from '../prices/catalog.ts';
import { catalogEnabled, priceCatalog } from '../prices/index.ts';
import { schema } from '../schema/redis-schema.ts';
import type { Sidecar } from '../main.ts';
import { createDevGateway } from './gateway.ts';
import { answeredModel, listenStubUpstream, STUB_USAGE } from './stub-upstream.ts';
import { ssoComponent, ssoEnv, ssoLines, ssoMembers, type DevSso } from './sso.ts';

export interface DevOptions {
  /** Where dev keeps its state: Redis data, the reveal key and the demo key (mode 0600). */
  readonly dir: string;
  readonly redisPort: number;
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly adminPort: number;
  readonly gatewayPort: number;
  /** Port of the management API (and its web page). */
  readonly consolePort: number;
  /** Base URL of a real upstream for the dev gateway; default: the built-in stub. */
  readonly upstream?: string;
  /** `--sso`: a local OpenID provider with demo people, and "Sign in with SSO" on the page (sso.ts). */
  readonly sso?: boolean;
  readonly ssoPort?: number;
  /**
   * The gateway's own upstream credential, which the dev gateway adds to a request that carries no
   * credential after the authz answer (as Envoy's route config does: docs/credentials.md); an
   * account's own credential set by the answer wins. Absent: none added.
   */
  readonly upstreamCredential?: string;
  /** `--ledger URL`: the usage ledger's PostgreSQL (docs/ledger.md); without it dev is Redis-only, whatever KEYGATE_LEDGER_URL says. */
  readonly ledger?: string;
}



export class DevError extends Error {
  override name = 'DevError';
}

/** What the components share; each one fills in what it provides. */
export interface DevContext {
  readonly options: DevOptions;
  readonly log: Logger;
  readonly redisUrl: string;
  /** The key-encryption key for creating and revealing keys (KEYGATE_REVEAL_KEY format). */
  revealKey?: string;
  /** The key accounts' own upstream credentials are sealed with (KEYGATE_CREDENTIAL_KEY format), shared by the console and the sidecar. */
  credentialKey?: string;
  sidecar?: Sidecar;
  upstreamUrl?: string;
  demoKey?: { id: string; key: string; account: string };
  /** The console's base URL and the demo account's sign-in token (account-scoped). */
  console?: { url: string; token: string };
  /** With `--sso`: the local provider and the console's client there. */
  sso?: DevSso;
}

export interface Running {
  /** Lines for the banner (ports, URLs, commands). */
  readonly lines: readonly string[];
  stop(): Promise<void>;
}

export interface DevComponent {
  readonly name: string;
  /** Ports this component listens on, with the flag that changes each (checked before any start). */
  ports(o: DevOptions): ReadonlyArray<{ port: number; flag: string }>;
  /**
   * Imports the modules `start` needs. All components load before the first one starts: loading
   * the console's modules takes a few hundred milliseconds of the event loop, which a running
   * sidecar would otherwise spend with its heartbeat and Redis command timers overdue.
   */
  load?(): Promise<unknown>;
  start(ctx: DevContext): Promise<Running>;
}

/** redis-server on PATH, or null. */
export function findOnPath(cmd: string, path = process.env.PATH ?? ''): string | null {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, cmd);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return null;
}

function bindable(port: number, host: string): Promise<boolean> {
  const server: Server = createServer();
  return new Promise((resolve) => {
    // No IPv6 loopback on this machine: nothing can listen on [::1] either.
    server.once('error', (err: NodeJS.ErrnoException) => resolve(host === '::1' && (err.code === 'EADDRNOTAVAIL' || err.code === 'EAFNOSUPPORT')));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * Whether `port` can be bound now on 127.0.0.1 and on [::1] (nothing listens on either): a client
 * that resolves `localhost` to [::1] would otherwise reach another program.
 */
export async function portFree(port: number): Promise<boolean> {
  return (await bindable(port, '127.0.0.1')) && (await bindable(port, '::1'));
}

function secretFile(path: string, content: string): void {
  writeFileSync(path, content, { mode: 0o600 });
}

/** redis-server's pid file (written by redis-server itself, removed on its clean exit). */
export const redisPidFile = (dir: string) => join(dir, 'redis', 'redis-server.pid');

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** The command line of a process ('' when it cannot be read); redis-server shows `redis-server host:port` there. */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    try {
      return execFileSync('ps', ['-o', 'args=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return '';
    }
  }
}

function readPid(path: string): number | null {
  let pid: number;
  try {
    pid = Number(readFileSync(path, 'utf8').trim());
  } catch {
    return null;
  }
  return Number.isSafeInteger(pid) && pid > 1 && pid !== process.pid && alive(pid) ? pid : null;
}

/** The live redis-server on this port that the directory's pid file names (a leftover of a killed dev), or null. */
export function leftoverRedis(o: Pick<DevOptions, 'dir' | 'redisPort'>): number | null {
  const pid = readPid(redisPidFile(o.dir));
  if (pid === null) return null;
  const cmd = commandLine(pid);
  return /redis-server/.test(cmd) && new RegExp(`:${o.redisPort}(\\s|$)`).test(cmd) ? pid : null;
}

/**
 * A redis-server left running by an earlier `keygate dev` on this directory that did not stop (it
 * was killed): when the directory's pid file names a live redis-server on this port, it is stopped
 * (SIGTERM: it writes its append-only file and exits; SIGKILL after 10 s) and the line saying so is
 * returned. Any other process, or none, is left alone (null). Called only while this process owns
 * the directory (`claimDir`): a redis-server of a live dev is never a leftover.
 */
export async function stopLeftoverRedis(o: Pick<DevOptions, 'dir' | 'redisPort'>): Promise<string | null> {
  const pid = leftoverRedis(o);
  if (pid === null) return null;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 10_000;
  while (alive(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, 'SIGKILL');
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  while (alive(pid)) await new Promise((r) => setTimeout(r, 50));
  return `keygate dev: stopped redis-server (pid ${pid}, port ${o.redisPort}) left running by an earlier keygate dev on this directory`;
}

/** The owning dev's pid file: written with O_EXCL, removed on stop; a dead owner's is taken over. */
export const devPidFile = (dir: string) => join(dir, 'dev.pid');

/**
 * Makes this process the directory's owner, or throws the one line naming the live `keygate dev`
 * that owns it. A pid file whose process is gone (a killed dev), or now runs something that is not
 * a `dev`, is taken over. Returns the release function.
 */
export function claimDir(dir: string): () => void {
  const file = devPidFile(dir);
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return () => {
        try {
          if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file);
        } catch {
          /* already gone */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new DevError(`cannot write ${file}: ${(err as Error).message}`);
    }
    const owner = readPid(file);
    if (owner !== null && /\bdev\b/.test(commandLine(owner) || ' dev ')) {
      throw new DevError(`${dir} is in use by a running keygate dev (pid ${owner}); stop it (Ctrl-C) or pass --dir <another directory>`);
    }
    if (attempt > 0) throw new DevError(`${dir} is being claimed by another keygate dev; try again`);
    try {
      unlinkSync(file);
    } catch {
      /* another start removed it first; the next attempt decides */
    }
  }
}

/** Every `*.json` state file of the directory parses, or the one line naming the file and what to do. */
export function checkStateFiles(dir: string): void {
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.json')).sort()) {
    const file = join(dir, name);
    try {
      const value: unknown = JSON.parse(readFileSync(file, 'utf8'));
      if (value === null || typeof value !== 'object') throw new Error('not an object');
    } catch {
      throw new DevError(`${file} is truncated or not valid JSON; delete it and start again (a new one is made)`);
    }
  }
}

const redisComponent: DevComponent = {
  name: 'redis',
  ports: (o) => [{ port: o.redisPort, flag: '--redis-port' }],
  async start(ctx) {
    const bin = findOnPath('redis-server');
    if (!bin) throw new DevError('redis-server not found on PATH; run scripts/install (Debian/Ubuntu: apt-get install redis-server)');
    const data = join(ctx.options.dir, 'redis');
    mkdirSync(data, { recursive: true, mode: 0o700 });
    const child: ChildProcess = spawn(
      bin,
      ['--port', String(ctx.options.redisPort), '--bind', '127.0.0.1', '--dir', data, '--appendonly', 'yes', '--save', '', '--daemonize', 'no', '--logfile', '', '--pidfile', redisPidFile(ctx.options.dir)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      const onData = (c: Buffer) => {
        output = (output + c.toString('utf8')).slice(-4000);
        if (output.includes('Ready to accept connections')) resolve();
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('error', (err) => reject(new DevError(`redis-server did not start: ${err.message}`)));
      child.once('exit', (code) => {
        const last = output.trim().split('\n').filter(Boolean).pop() ?? '';
        reject(new DevError(`redis-server exited (code ${code}) before it was ready: ${last.replace(/^\d+:\w \S+ \S+ \S+ [*#.-] /, '')}`));
      });
    });
    return {
      lines: [`redis      ${ctx.redisUrl}   (data in ${data})`],
      async stop() {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
          await exited;
          clearTimeout(t);
        }
      },
    };
  },
};

const sidecarComponent: DevComponent = {
  name: 'sidecar',
  ports: (o) => [
    { port: o.grpcPort, flag: '--grpc-port' },
    { port: o.httpPort, flag: '--http-port' },
    { port: o.adminPort, flag: '--admin-port' },
  ],
  load: () => import('../main.ts'),
  async start(ctx) {
    const o = ctx.options;
    const config = loadConfig({
      redisUrl: ctx.redisUrl,
      grpcPort: o.grpcPort,
      httpPort: o.httpPort,
      adminPort: o.adminPort,
      listenHost: '127.0.0.1',
      adminHost: '127.0.0.1',
      drainDelayMs: 0,
      // A plain model name at the OpenAI entry means OpenAI's (the dev gateway sends it there): a key
      // limited to openai/gpt-4o-mini works with the printed curl's "gpt-4o-mini".
      bareModelProviders: process.env.KEYGATE_BARE_MODEL_PROVIDER ?? DEV_BARE_MODEL_PROVIDER,
      // The console's credential key (the dev directory's), so accounts' own credentials are injected.
      ...(ctx.credentialKey !== undefined && { credentialKey: ctx.credentialKey }),
    });
    const { startSidecar } = await import('../main.ts');
    const sidecar = await startSidecar(config, ctx.log);
    ctx.sidecar = sidecar;
    return {
      lines: [
        `sidecar    gRPC ext_authz 127.0.0.1:${sidecar.grpcPort}   HTTP authz http://127.0.0.1:${sidecar.httpPort}/authz   admin http://127.0.0.1:${sidecar.adminPort}/readyz`,
      ],
      stop: () => sidecar.close(),
    };
  },
};

const DEMO_ACCOUNT = 'demo';
/** The demo wallet's first credit: 100 currency units. */
export const DEV_DEMO_CREDIT_MICROS = 100_000_000;
/** The demo request whose price `keygate dev` prints: OpenAI chat with gpt-4o, answered with its dated name. */
export const DEV_DEMO_MODEL = 'gpt-4o';

/**
 * What one demo request costs (the stub's usage, the model answered dated), priced as the sidecar
 * prices it: the price table now, then the catalog (src/prices/). A line for `keygate dev` to print.
 */
export function demoPriceLine(table: PriceTable, catalog: PriceCatalog | null, at = Date.now()): string {
  const answered = answeredModel(DEV_DEMO_MODEL);
  const usage = { input_tokens: STUB_USAGE.input, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: STUB_USAGE.output };
  const p = priceBookingUsage({ table, catalog }, 'openai', answered, DEV_DEMO_MODEL, usage, at);
  if (p.unpriced) return `price      one demo request (${DEV_DEMO_MODEL}, answered ${answered}) is unpriced: books 0 (the catalog is off and the table has no price for it)`;
  const from = p.basis.source === 'catalog' ? `the catalog, ${p.basis.catalog_version}` : `the price table (${p.basis.model})`;
  return `price      one demo request (${DEV_DEMO_MODEL}, answered ${answered}, ${STUB_USAGE.input} input + ${STUB_USAGE.output} output tokens) costs ${formatAmount(p.amount)} (${p.amount} micro-units) from ${from}; \`keygate prices show ${answered}\` explains it`;
}
/** `keygate dev`'s KEYGATE_BARE_MODEL_PROVIDER: its gateway sends /openai to OpenAI only. */
export const DEV_BARE_MODEL_PROVIDER = 'openai=openai';

const demoKeyComponent: DevComponent = {
  name: 'demo key',
  ports: () => [],
  async start(ctx) {
    const dir = ctx.options.dir;
    const revealPath = join(dir, 'reveal-key');
    if (!existsSync(revealPath)) secretFile(revealPath, `base64:${randomBytes(32).toString('base64')}\n`);
    ctx.revealKey = readFileSync(revealPath, 'utf8').trim();
    const credentialPath = join(dir, 'credential-key');
    if (!existsSync(credentialPath)) secretFile(credentialPath, `base64:${randomBytes(32).toString('base64')}\n`);
    ctx.credentialKey = process.env.KEYGATE_CREDENTIAL_KEY || readFileSync(credentialPath, 'utf8').trim();
    const config = loadConsoleConfig({ redisUrl: ctx.redisUrl });
    const kc = new ConsoleService({ redis: ctx.redisUrl, revealKey: ctx.revealKey, namespace: config.redisNamespace, keyPrefix: config.keyPrefix });
    const keyPath = join(dir, 'demo-key.json');
    try {
      let demo: { id: string; key: string; account: string } | undefined;
      if (existsSync(keyPath)) {
        const saved = JSON.parse(readFileSync(keyPath, 'utf8')) as { id: string; key: string; account: string };
        // Reused only while Redis still holds it as an active key (the data may have been wiped).
        const rec = await kc.getKey(saved.id).catch(() => null);
        if (rec && rec.status === 'active' && (rec.expiresAt === null || rec.expiresAt > Date.now())) demo = saved;
      }
      if (!demo) {
        const created = await kc.createKey({ account: DEMO_ACCOUNT, name: 'keygate dev demo key' });
        demo = { id: created.id, key: created.key, account: DEMO_ACCOUNT };
        secretFile(keyPath, `${JSON.stringify(demo)}\n`);
      }
      ctx.demoKey = demo;
      // Metering: prices come from the catalog (an operator's table, when set, overrides it) and a
      // funded demo wallet (credited once: the reference makes a restart a no-op), so spending shows.
      const table = PriceTable.fromHash(await kc.redis.hgetall(schema(config.redisNamespace).prices()));
      const credit = await kc.creditAccount(demo.account, DEV_DEMO_CREDIT_MICROS, 'keygate-dev-initial-credit');
      return {
        lines: [
          `demo key   account ${demo.account}, key id ${demo.id} (saved in ${keyPath})`,
          `wallet     demo balance ${formatAmount(credit.balanceMicros)} (metered answers are booked from it)`,
          demoPriceLine(table, priceCatalog(catalogEnabled())),
        ],
        stop: async () => {},
      };
    } finally {
      await kc.close();
    }
  },
};

/**
 * The management API (and the web page it serves at `/`) on its own port, with an account-scoped
 * management token for the demo account, created on the first start and kept (mode 0600) so that
 * every start prints the same sign-in token. A revoked or lost token is replaced.
 */
const consoleModules = () => Promise.all([import('../console-api/config.ts'), import('../console-api/main.ts'), import('../console/management.ts')]);

const consoleComponent: DevComponent = {
  name: 'console',
  ports: (o) => [{ port: o.consolePort, flag: '--console-port' }],
  load: consoleModules,
  async start(ctx) {
    const [{ loadConsoleApiConfig }, { startConsole }, { CLI_ACTOR }] = await consoleModules();
    const config = { ...loadConsoleApiConfig({ port: ctx.options.consolePort, redisUrl: ctx.redisUrl }, { ...process.env, ...ssoEnv(ctx) }), host: '127.0.0.1', drainDelayMs: 0, ledgerUrl: ctx.options.ledger };
    const server = await startConsole(config, ctx.log, { revealKey: ctx.revealKey, credentialKey: ctx.credentialKey });
    try {
      await ssoMembers(ctx, server.console);
      const tokenPath = join(ctx.options.dir, 'console-token.json');
      let saved: { id: string; token: string } | undefined;
      if (existsSync(tokenPath)) {
        const s = JSON.parse(readFileSync(tokenPath, 'utf8')) as { id: string; token: string };
        const rec = await server.console.getToken(s.id).catch(() => null);
        if (rec && rec.status === 'active') saved = s;
      }
      if (!saved) {
        const { token, record } = await server.console.createToken({ name: 'keygate dev demo owner', account: ctx.demoKey!.account }, CLI_ACTOR);
        saved = { id: record.id, token };
        secretFile(tokenPath, `${JSON.stringify(saved)}\n`);
      }
      const url = `http://127.0.0.1:${server.port}`;
      ctx.console = { url, token: saved.token };
      return {
        lines: [
          `console    ${url}/   (the "API keys" page; management API under ${url}/v1, OpenAPI at ${url}/openapi.json)`,
          ...(ctx.options.ledger ? ['ledger     usage copied to PostgreSQL (--ledger); usage reads come from it'] : []),
        ],
        stop: () => server.close(),
      };
    } catch (err) {
      await server.close();
      throw err;
    }
  },
};

const upstreamComponent: DevComponent = {
  name: 'upstream',
  ports: () => [],
  async start(ctx) {
    if (ctx.options.upstream) {
      ctx.upstreamUrl = ctx.options.upstream.replace(/\/+$/, '');
      return { lines: [`upstream   ${ctx.upstreamUrl}`], stop: async () => {} };
    }
    const { server, port } = await listenStubUpstream(0, '127.0.0.1');
    ctx.upstreamUrl = `http://127.0.0.1:${port}`;
    return {
      lines: [`upstream   ${ctx.upstreamUrl}   (built-in stub: answers in each provider's shape)`],
      stop: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    };
  },
};

const gatewayComponent: DevComponent = {
  name: 'gateway',
  ports: (o) => [{ port: o.gatewayPort, flag: '--gateway-port' }],
  async start(ctx) {
    const server = createDevGateway(
      { authzPort: ctx.sidecar!.httpPort, upstream: ctx.upstreamUrl!, grpcPort: ctx.sidecar!.grpcPort, ...(ctx.options.upstreamCredential !== undefined && { upstreamCredential: ctx.options.upstreamCredential }) },
      ctx.log,
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(ctx.options.gatewayPort, '127.0.0.1', () => resolve());
    });
    return {
      lines: [`gateway    http://127.0.0.1:${ctx.options.gatewayPort}   (dev gateway in front of the upstream: /openai, /anthropic, /google)`],
      stop: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    };
  },
};

/** The components `keygate dev` starts, in order. */
export function devComponents(): DevComponent[] {
  // The console before the sidecar: building it (schemas, OpenAPI document) holds the event loop for
  // a while, which a running sidecar would spend with its heartbeat overdue.
  return [redisComponent, demoKeyComponent, ssoComponent, consoleComponent, sidecarComponent, upstreamComponent, gatewayComponent];
}

/** How to use the running system: the key, a curl per entry, the SDK base URLs. */
export function usageLines(ctx: DevContext): string[] {
  const g = `http://127.0.0.1:${ctx.options.gatewayPort}`;
  const key = ctx.demoKey!.key;
  return [
    '',
    'Demo key (local only; kept in the dev directory, shown again on each start):',
    `  KEY=${key}`,
    '',
    'Try it (set KEY as above first):',
    `  curl -sS ${g}/openai/v1/chat/completions -H "Authorization: Bearer $KEY" -H 'content-type: application/json' -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'`,
    `  curl -sS ${g}/anthropic/v1/messages -H "x-api-key: $KEY" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d '{"model":"claude-3-5-haiku-latest","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'`,
    `  curl -sS ${g}/google/v1beta/models/gemini-2.0-flash:generateContent -H "x-goog-api-key: $KEY" -H 'content-type: application/json' -d '{"contents":[{"parts":[{"text":"hi"}]}]}'`,
    `  curl -sS ${g}/openai/v1/chat/completions -H 'Authorization: Bearer kg_wrong' -d '{}'   # a deny, in the OpenAI error shape`,
    `A key limited to openai/gpt-4o-mini accepts "gpt-4o-mini" at the OpenAI entry here (KEYGATE_BARE_MODEL_PROVIDER=${process.env.KEYGATE_BARE_MODEL_PROVIDER ?? DEV_BARE_MODEL_PROVIDER}).`,
    '',
    'SDK base URLs:',
    `  openai             ${g}/openai/v1`,
    `  @anthropic-ai/sdk  ${g}/anthropic`,
    `  @google/genai      ${g}/google`,
    '',
    ...(ctx.console
      ? [
          `Console: open ${ctx.console.url}/ and sign in with the demo account's token (local only; kept in the dev directory):`,
          `  TOKEN=${ctx.console.token}`,
          `  curl -sS ${ctx.console.url}/v1/accounts/${ctx.demoKey!.account}/keys -H "Authorization: Bearer $TOKEN"`,
          '',
        ]
      : []),
    ...ssoLines(ctx),
    `Manage keys: REDIS_URL=${ctx.redisUrl} KEYGATE_REVEAL_KEY=$(cat ${join(ctx.options.dir, 'reveal-key')}) bin/keygate keys list --account ${ctx.demoKey!.account}`,
    'Ctrl-C stops everything keygate dev started.',
  ];
}

/**
 * Checks ports and redis-server, then starts the components in order. Resolves with the banner
 * and `stop()`; on a failure stops what started and rejects (a DevError carries the one line).
 */
export async function startDev(options: DevOptions, log: Logger, components = devComponents()): Promise<{ ctx: DevContext; banner: string[]; stop(): Promise<void> }> {
  if (!findOnPath('redis-server')) throw new DevError('redis-server not found on PATH; run scripts/install (Debian/Ubuntu: apt-get install redis-server)');
  mkdirSync(options.dir, { recursive: true, mode: 0o700 });
  const release = claimDir(options.dir);
  let leftover: string | null;
  try {
    const seen = new Set<number>();
    for (const c of components) {
      for (const { port, flag } of c.ports(options)) {
        if (seen.has(port)) throw new DevError(`port ${port} is given twice; pick distinct ports (${flag})`);
        seen.add(port);
        // The Redis port may be held by this directory's own leftover redis-server (stopped below).
        if (port === options.redisPort && leftoverRedis(options) !== null) continue;
        if (!(await portFree(port))) throw new DevError(`port ${port} (${c.name}) is already in use; stop what uses it or pass ${flag} <port>`);
      }
    }
    checkStateFiles(options.dir);
    leftover = await stopLeftoverRedis(options);
  } catch (err) {
    release();
    throw err;
  }
  const ctx: DevContext = { options, log, redisUrl: `redis://127.0.0.1:${options.redisPort}` };
  const started: Running[] = [];
  const stop = async () => {
    for (const r of started.reverse().splice(0)) {
      await r.stop().catch((err: unknown) => log.error({ err: { message: (err as Error)?.message } }, 'dev: stop failed'));
    }
    release();
  };
  try {
    await Promise.all(components.map((c) => c.load?.()));
    for (const c of components) started.push(await c.start(ctx));
  } catch (err) {
    await stop();
    if (err instanceof DevError) throw err;
    throw new DevError(`${(err as Error)?.message ?? String(err)}`);
  }
  const banner = [...(leftover ? [leftover] : []), 'keygate dev is running:', ...started.flatMap((r) => r.lines.map((l) => `  ${l}`)), ...usageLines(ctx)];
  return { ctx, banner, stop };
}
