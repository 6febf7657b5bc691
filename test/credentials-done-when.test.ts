/**
 * Per-account upstream credentials, end to end (SPEC 18, docs/credentials.md), as the issue's "Done
 * when" states it: the real `keygate dev` (a child process, debug logging, the decision log on) with
 * `--upstream` pointing at a recording stub (a real HTTP server in this test that records the
 * headers it receives) and `--upstream-credential-env` giving the gateway's own credential; a
 * second sidecar (`keygate serve`, a child process) on the same Redis answering gRPC Checks.
 *
 * - a key of an account with its own OpenAI credential (set with the CLI from standard input)
 *   reaches the upstream carrying that credential and no other; a key of another account carries
 *   the gateway's; the second sidecar's Check sets it with OVERWRITE and does not remove its header;
 * - the credential changed through the management API is used on the next request, removed with the
 *   CLI it is gone on the next request at both sidecars;
 * - no output of the whole run contains the secret: the CLI's and the API's answers, the clients'
 *   responses (allowed and denied), the Check answers but their allow headers, both sidecars' stdout
 *   and stderr (debug logging, the decision log), the metrics of both (per-account labels on), the
 *   second sidecar's OTLP traces and metrics, the audit log, and the files of the dev directory
 *   (Redis' append-only file holds the envelope only).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { redisPidFile } from '../src/dev/index.ts';
import { EnvoyClient, okHeaders, type CheckResponseMsg } from './helpers/envoy-client.ts';
import { freePort } from './helpers/redis-server.ts';
import { serveChild, type ServeChild } from './helpers/serve-child.ts';
import { startOtlpReceiver } from './helpers/otlp-receiver.ts';

const MAIN = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
const SECRET = 'sk-own-Zq8vN3rT6yW1pL4mK7xB2cF5hJ9dG0sAeUiOo';
const SECRET2 = 'sk-own-second-Vb7nM2qW5eR8tY1uI4oP6aS9dF3gH0jK';
const GATEWAY = 'sk-gateway-Hh4Jj7Kk0Ll3Mm6Nn9Pp2Qq5Rr8Ss1Tt';

const cleanup: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
});

interface Recorded {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
}

/** The recording stub: an OpenAI-shaped answer with usage, and every request's headers kept. */
async function recordingUpstream(): Promise<{ url: string; seen: Recorded[]; server: Server }> {
  const seen: Recorded[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers });
      const body = JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } });
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, seen, server };
}

/** Every credential-carrying header the upstream saw on one request. */
function credentialsSeen(h: IncomingHttpHeaders): Record<string, string | string[] | undefined> {
  return { authorization: h.authorization, 'x-api-key': h['x-api-key'], 'x-goog-api-key': h['x-goog-api-key'] };
}

describe('per-account upstream credentials: keygate dev, a recording upstream, two sidecars', () => {
  it('injects the account’s own credential, the gateway’s for others, honours a change and a removal at both sidecars, and never outputs the secret', async () => {
    const outputs: Array<[string, string]> = [];
    const upstream = await recordingUpstream();
    cleanup.push(() => new Promise<void>((r) => upstream.server.close(() => r())));

    const dir = mkdtempSync(join(tmpdir(), 'keygate-cred-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const p: number[] = [];
    while (p.length < 6) {
      const n = await freePort();
      if (!p.includes(n)) p.push(n);
    }
    const [redisPort, grpcPort, httpPort, adminPort, gatewayPort, consolePort] = p as [number, number, number, number, number, number];
    const devEnv: NodeJS.ProcessEnv = { ...process.env, KEYGATE_LOG_LEVEL: 'debug', GATEWAY_CRED: GATEWAY };
    delete devEnv.KEYGATE_CREDENTIAL_KEY;
    const dev: ChildProcess = spawn(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', MAIN, 'dev', '--dir', dir, '--redis-port', `${redisPort}`, '--grpc-port', `${grpcPort}`, '--http-port', `${httpPort}`, '--admin-port', `${adminPort}`, '--gateway-port', `${gatewayPort}`, '--console-port', `${consolePort}`, '--upstream', upstream.url, '--upstream-credential-env', 'GATEWAY_CRED'],
      { env: devEnv, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let devOut = '';
    let devErr = '';
    dev.stdout!.on('data', (c: Buffer) => (devOut += c.toString()));
    dev.stderr!.on('data', (c: Buffer) => (devErr += c.toString()));
    const devExit = new Promise<void>((r) => dev.once('exit', () => r()));
    cleanup.push(async () => {
      if (dev.exitCode === null && dev.signalCode === null) {
        dev.kill('SIGKILL');
        await devExit;
      }
      const pidFile = redisPidFile(dir);
      const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : 0;
      if (pid > 1) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    });
    const deadline = Date.now() + 90_000;
    while (!devOut.includes('Ctrl-C stops everything')) {
      if (dev.exitCode !== null) throw new Error(`dev exited: ${devErr}`);
      if (Date.now() > deadline) throw new Error(`dev did not start: ${devErr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const demoKey = /^ {2}KEY=(\S+)$/m.exec(devOut)![1]!;
    const redisUrl = `redis://127.0.0.1:${redisPort}`;
    const cliEnv = {
      PATH: process.env.PATH,
      KEYGATE_NODE: process.execPath,
      REDIS_URL: redisUrl,
      KEYGATE_REVEAL_KEY: readFileSync(join(dir, 'reveal-key'), 'utf8').trim(),
      KEYGATE_CREDENTIAL_KEY: readFileSync(join(dir, 'credential-key'), 'utf8').trim(),
    };
    const cli = (args: string[], input?: string, env: Record<string, string | undefined> = {}) => {
      const r = spawnSync(BIN, args, { env: { ...cliEnv, ...env }, input, encoding: 'utf8', timeout: 60_000 });
      outputs.push([`cli ${args.slice(0, 3).join(' ')} stdout`, r.stdout], [`cli ${args.slice(0, 3).join(' ')} stderr`, r.stderr]);
      return r;
    };

    // An account of its own: a key, and its OpenAI credential set from standard input.
    const created = cli(['keys', 'create', '--account', 'byok', '--name', 'byok key', '--json']);
    expect(created.status, created.stderr).toBe(0);
    const byokKey = (JSON.parse(created.stdout) as { key: string }).key;
    const restricted = cli(['keys', 'create', '--account', 'byok', '--name', 'mini only', '--models', 'openai/gpt-4o-mini', '--json']);
    expect(restricted.status, restricted.stderr).toBe(0);
    const restrictedKey = (JSON.parse(restricted.stdout) as { key: string }).key;
    // A secret on the command line is refused, and not echoed.
    const onLine = cli(['accounts', 'credential', 'set', 'byok', '--provider', 'openai', '--secret', SECRET]);
    expect(onLine.status).toBe(2);
    expect(onLine.stderr).toContain('--from-env VAR or --stdin');
    const asArgument = cli(['accounts', 'credential', 'set', 'byok', SECRET, '--provider', 'openai']);
    expect(asArgument.status).toBe(2);
    expect(asArgument.stderr).toContain('--from-env VAR or --stdin');
    const asOption = cli(['accounts', 'credential', 'set', 'byok', '--provider', 'openai', `--token=${SECRET}`]);
    expect(asOption.status).toBe(2);
    // Without the credential key the console refuses, saying why.
    const noKey = cli(['accounts', 'credential', 'set', 'byok', '--provider', 'openai', '--stdin'], SECRET, { KEYGATE_CREDENTIAL_KEY: undefined });
    expect(noKey.status).toBe(2);
    expect(noKey.stderr).toContain('KEYGATE_CREDENTIAL_KEY is not set');
    const set = cli(['accounts', 'credential', 'set', 'byok', '--provider', 'openai', '--stdin', '--json'], `${SECRET}\n`);
    expect(set.status, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ provider: 'openai', hint: SECRET.slice(-4) });
    const list = cli(['accounts', 'credential', 'list', 'byok', '--json']);
    expect(JSON.parse(list.stdout).credentials).toEqual([expect.objectContaining({ provider: 'openai', hint: SECRET.slice(-4) })]);

    const gw = `http://127.0.0.1:${gatewayPort}/openai/v1/chat/completions`;
    const chat = async (key: string, header: 'authorization' | 'x-api-key' = 'authorization', model = 'gpt-4o-mini') => {
      const r = await fetch(gw, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(header === 'authorization' ? { authorization: `Bearer ${key}` } : { 'x-api-key': key }) },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const text = await r.text();
      outputs.push([`response ${r.status}`, `${JSON.stringify([...r.headers])}\n${text}`]);
      return { status: r.status, seen: r.status === 200 ? upstream.seen.at(-1)! : null };
    };

    // 1. The account's own credential, and no other; the client's key headers gone.
    const own = await chat(byokKey);
    expect(own.status).toBe(200);
    expect(credentialsSeen(own.seen!.headers)).toEqual({ authorization: `Bearer ${SECRET}`, 'x-api-key': undefined, 'x-goog-api-key': undefined });
    expect(own.seen!.headers['x-keygate-account-id']).toBe('byok');
    // The key in x-api-key at the OpenAI entry: removed, the credential in authorization.
    const ownX = await chat(byokKey, 'x-api-key');
    expect(credentialsSeen(ownX.seen!.headers)).toEqual({ authorization: `Bearer ${SECRET}`, 'x-api-key': undefined, 'x-goog-api-key': undefined });
    // 2. Another account: the gateway's.
    const other = await chat(demoKey);
    expect(other.status).toBe(200);
    expect(credentialsSeen(other.seen!.headers)).toEqual({ authorization: `Bearer ${GATEWAY}`, 'x-api-key': undefined, 'x-goog-api-key': undefined });
    // Denies of the account (a model outside the key's list) and of a bad key: nothing reaches the upstream.
    const before = upstream.seen.length;
    expect((await chat(restrictedKey, 'authorization', 'gpt-4o')).status).toBe(403);
    expect((await chat('kg_wrong')).status).toBe(401);
    expect(upstream.seen.length).toBe(before);

    // The second sidecar (gRPC Check), with the same credential key.
    // Its traces and metrics exported over OTLP, every Check a root span (searched below).
    const otlp = await startOtlpReceiver();
    cleanup.push(() => otlp.close());
    const second: ServeChild = await serveChild(redisUrl, {
      KEYGATE_CREDENTIAL_KEY: cliEnv.KEYGATE_CREDENTIAL_KEY,
      KEYGATE_LOG_LEVEL: 'debug',
      KEYGATE_REDIS_NAMESPACE: 'kg',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      KEYGATE_TRACE_UNPARENTED_RATIO: '1',
      OTEL_METRIC_EXPORT_INTERVAL: '200',
      KEYGATE_METRICS_ACCOUNT_LABELS: 'true',
    });
    cleanup.push(() => second.stop());
    const client = new EnvoyClient(`127.0.0.1:${second.grpcPort}`);
    cleanup.push(() => client.close());
    // An allow's headers are the one place the credential belongs (Envoy sets them upstream); everything
    // else of an answer (its metadata, a deny) is an output like any other.
    const check = async (key: string, model = 'gpt-4o-mini'): Promise<CheckResponseMsg> => {
      const r = await client.check({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, contextExtensions: { protocol: 'openai' }, body: `{"model":"${model}","messages":[]}` });
      outputs.push(['check answer (but the allow headers)', JSON.stringify({ ...r, ok_response: r.ok_response && { ...r.ok_response, headers: [] } })]);
      return r;
    };
    const ownCheck = await check(byokKey);
    expect(okHeaders(ownCheck).authorization).toBe(`Bearer ${SECRET}`);
    expect(ownCheck.ok_response!.headers!.find((h) => h.header.key === 'authorization')!.append?.value ?? false).toBe(false); // OVERWRITE
    expect(ownCheck.ok_response!.headers_to_remove).toEqual(['x-api-key', 'x-goog-api-key']);
    expect(JSON.stringify(ownCheck.dynamic_metadata ?? {})).not.toContain(SECRET);
    expect((await check(restrictedKey, 'gpt-4o')).denied_response?.status?.code).toBe(403);
    const otherCheck = await check(demoKey);
    expect(okHeaders(otherCheck).authorization).toBeUndefined();
    expect(otherCheck.ok_response!.headers_to_remove).toEqual(['authorization', 'x-api-key', 'x-goog-api-key']);

    // 3. A change through the management API (an operator token made with the CLI): the next request carries it, at both sidecars.
    const tok = cli(['tokens', 'create', '--name', 'ops', '--all-accounts', '--json']);
    expect(tok.status, tok.stderr).toBe(0);
    const opToken = (JSON.parse(tok.stdout) as { token: string }).token;
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`http://127.0.0.1:${consolePort}${path}`, { method, headers: { authorization: `Bearer ${opToken}`, ...(body !== undefined && { 'content-type': 'application/json' }) }, ...(body !== undefined && { body: JSON.stringify(body) }) });
      const text = await r.text();
      outputs.push([`api ${method} ${path}`, text]);
      return { status: r.status, body: text === '' ? null : (JSON.parse(text) as unknown) };
    };
    expect(await api('PUT', '/v1/accounts/byok/credentials/openai', { secret: SECRET2 })).toMatchObject({ status: 200, body: { provider: 'openai', hint: SECRET2.slice(-4) } });
    expect((await chat(byokKey)).seen!.headers.authorization).toBe(`Bearer ${SECRET2}`);
    expect(okHeaders(await check(byokKey)).authorization).toBe(`Bearer ${SECRET2}`);
    expect(await api('GET', '/v1/accounts/byok/credentials')).toMatchObject({ status: 200, body: { credentials: [{ provider: 'openai', hint: SECRET2.slice(-4) }] } });

    // Its Anthropic credential from an environment variable: the Anthropic entry carries it in x-api-key
    // (the client's x-api-key replaced), the OpenAI entry still the OpenAI one.
    const fromEnv = cli(['accounts', 'credential', 'set', 'byok', '--provider', 'anthropic', '--from-env', 'BYOK_ANTHROPIC'], undefined, { BYOK_ANTHROPIC: SECRET });
    expect(fromEnv.status, fromEnv.stderr).toBe(0);
    const msg = await fetch(`http://127.0.0.1:${gatewayPort}/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': byokKey, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-3-5-haiku-latest', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    });
    outputs.push([`response ${msg.status}`, await msg.text()]);
    expect(msg.status).toBe(200);
    expect(credentialsSeen(upstream.seen.at(-1)!.headers)).toEqual({ authorization: undefined, 'x-api-key': SECRET, 'x-goog-api-key': undefined });
    expect((await chat(byokKey)).seen!.headers.authorization).toBe(`Bearer ${SECRET2}`);

    // 4. Removed (CLI): gone on the next request at both sidecars.
    const removed = cli(['accounts', 'credential', 'remove', 'byok', '--provider', 'openai']);
    expect(removed.status, removed.stderr).toBe(0);
    const after = await chat(byokKey);
    expect(credentialsSeen(after.seen!.headers)).toEqual({ authorization: `Bearer ${GATEWAY}`, 'x-api-key': undefined, 'x-goog-api-key': undefined });
    const afterCheck = await check(byokKey);
    expect(okHeaders(afterCheck).authorization).toBeUndefined();
    expect(afterCheck.ok_response!.headers_to_remove).toEqual(['authorization', 'x-api-key', 'x-goog-api-key']);
    expect(await api('DELETE', '/v1/accounts/byok/credentials/openai')).toMatchObject({ status: 404 });

    // Audited, without the secret.
    const audit = await api('GET', '/v1/audit?account=byok&limit=20');
    const actions = (audit.body as { events: Array<{ action: string }> }).events.map((e) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['credential_set', 'credential_remove']));

    // Metering still books the account's requests (usage through its own credential is billed).
    await new Promise((r) => setTimeout(r, 1500));
    const usage = cli(['usage', 'export', '--since', '2000-01-01T00:00:00Z', '--account', 'byok']);
    expect(usage.status, usage.stderr).toBe(0);
    expect(usage.stdout.trim().split('\n').filter(Boolean).length).toBeGreaterThanOrEqual(3);

    // Metrics of both sidecars.
    for (const port of [adminPort, second.adminPort]) {
      const m = await fetch(`http://127.0.0.1:${port}/metrics`);
      outputs.push([`metrics ${port}`, await m.text()]);
    }

    // The spans of the second sidecar's Checks (allowed with the credential, denied, after removal).
    const t0 = Date.now();
    while (otlp.spans.length < 4 && Date.now() - t0 < 15_000) await new Promise((r) => setTimeout(r, 100));
    expect(otlp.spans.length).toBeGreaterThanOrEqual(4);

    // Stop dev cleanly (its redis-server writes its append-only file), then read every output.
    dev.kill('SIGINT');
    await devExit;
    await second.stop();
    outputs.push(['dev stdout', devOut], ['dev stderr', devErr], ['second sidecar output', second.output()]);
    outputs.push(['OTLP exports', Buffer.concat(otlp.bodies).toString('latin1')], ['OTLP spans', JSON.stringify(otlp.spans, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))]);
    const files = (d: string): string[] => readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? files(join(d, n)) : [join(d, n)]));
    for (const f of files(dir)) outputs.push([`file ${f}`, readFileSync(f, 'latin1')]);
    // The controls: the outputs are there (debug allow lines, metrics, the AOF with the envelope).
    expect(devErr).toContain('"decision":"allow"');
    expect(outputs.find(([n]) => n.startsWith('metrics'))![1]).toContain('keygate_');
    expect(outputs.filter(([n]) => n.startsWith('file ')).map(([, t]) => t).join('')).toContain('enc1:');
    const leaks = outputs.filter(([, text]) => text.includes(SECRET) || text.includes(SECRET2)).map(([name]) => name);
    expect(leaks).toEqual([]);
  }, 180_000);
});
