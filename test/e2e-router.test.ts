/**
 * End to end with a real router stand-in (test/router-standin/router_standin.py: FastAPI on
 * uvicorn, binding `model` the way LiteLLM's proxy does — path over query over body, comma lists
 * split and all run, version-less Gemini paths): every request goes through the Envoy-style gRPC
 * test proxy to keygate and, when allowed, to the stand-in, which answers with the models it would
 * run. Whatever keygate allows for a restricted key, the stand-in must run only allowed models, and
 * the model in Envoy's dynamic metadata must be the one it runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { qualifyModel } from '../src/core/model/index.ts';
import type { Family } from '../src/core/families/index.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { startGrpcProxy, type GrpcProxy } from './helpers/grpc-proxy.ts';
import { freePort } from './helpers/redis-server.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { startStack, waitFor, type Stack } from './helpers/sidecars.ts';

const APP_DIR = fileURLToPath(new URL('./router-standin/', import.meta.url));
const PYTHON = '/usr/bin/python3';
/** The names the stand-in may run for the restricted key (its allowed models, as each entry sends them). */
const ALLOWED = ['openai/gpt-4o-mini', 'gpt-4o-mini', 'google/gemini-2.0-flash', 'anthropic/claude-3-5-haiku-latest'];
const RUNNABLE = new Set(['openai/gpt-4o-mini', 'gpt-4o-mini', 'gemini-2.0-flash', 'claude-3-5-haiku-latest']);

let stack: Stack | undefined;
let router: ChildProcess | undefined;
let routerLog = '';
let proxy: GrpcProxy | undefined;
let key: SeededKey;
let routerPort = 0;

function stopRouter(): Promise<void> {
  const p = router;
  if (p === undefined || p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => p.kill('SIGKILL'), 5000);
    p.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    p.kill('SIGTERM');
  });
}

beforeAll(async () => {
  try {
    stack = await startStack();
    key = await seedKey(stack.db, schema(), { account: 'acct-router', models: ALLOWED });
    routerPort = await freePort();
    router = spawn(PYTHON, ['-m', 'uvicorn', '--app-dir', APP_DIR, 'router_standin:app', '--host', '127.0.0.1', '--port', String(routerPort)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (d: Buffer) => void (routerLog = (routerLog + d.toString('utf8')).slice(-10_000));
    router.stdout!.on('data', keep);
    router.stderr!.on('data', keep);
    await waitFor(async () => {
      if (router!.exitCode !== null) throw new Error(`the router stand-in exited:\n${routerLog}`);
      return fetch(`http://127.0.0.1:${routerPort}/health`).then((r) => r.ok, () => false);
    }, 'the router stand-in to listen', 30_000);
    proxy = await startGrpcProxy({
      checkTarget: `127.0.0.1:${stack.sidecar.grpcPort}`,
      upstreamPort: routerPort,
      withRequestBody: { maxRequestBytes: 8 * 1024 * 1024, allowPartialMessage: true },
    });
  } catch (err) {
    await proxy?.close();
    await stopRouter();
    await stack?.close();
    throw err;
  }
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await stopRouter();
  await stack?.close();
});

interface Case {
  readonly name: string;
  readonly path: string;
  readonly body?: unknown;
  /** What today's routers run here, to show the attack is real: the stand-in called directly. */
  readonly runsDirectly?: string[];
  readonly allowed?: boolean;
  /** The refusal's code when not the model rule's (the endpoint rule, row 8, refuses first). */
  readonly code?: string;
}

const ATTACKS: Case[] = [
  { name: 'query model overrides the body', path: '/v1/chat/completions?model=openai/gpt-4.5', body: { model: 'gpt-4o-mini' }, runsDirectly: ['openai/gpt-4.5'] },
  { name: 'Azure-style deployment path wins', path: '/openai/deployments/gpt-4.5/chat/completions?api-version=2024-06-01', body: { model: 'gpt-4o-mini' }, runsDirectly: ['gpt-4.5'] },
  { name: 'legacy engines path wins', path: '/engines/gpt-4.5/chat/completions', body: { model: 'gpt-4o-mini' }, runsDirectly: ['gpt-4.5'] },
  { name: 'version-less Gemini path', path: '/models/gemini-2.5-pro:generateContent', body: { model: 'gpt-4o-mini' }, runsDirectly: ['gemini-2.5-pro'], code: 'ENDPOINT_NOT_ALLOWED' },
  { name: 'comma-separated model', path: '/v1/chat/completions', body: { model: 'gpt-4o-mini,openai/gpt-4.5' }, runsDirectly: ['gpt-4o-mini', 'openai/gpt-4.5'] },
  { name: 'decoy model on a batch endpoint', path: '/v1/batches', body: { model: 'gpt-4o-mini', input_file_id: 'file-1' }, runsDirectly: ['<batch>'], code: 'ENDPOINT_NOT_ALLOWED' },
];

const FINE: Case[] = [
  { name: 'plain chat', path: '/v1/chat/completions', body: { model: 'gpt-4o-mini' }, allowed: true },
  { name: 'Azure-style deployment, no body model', path: '/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-06-01', body: { messages: [] }, allowed: true },
  { name: 'engines with the same body model', path: '/engines/gpt-4o-mini/embeddings', body: { model: 'gpt-4o-mini', input: 'x' }, allowed: true },
  { name: 'query model identical to the body', path: '/v1/chat/completions?model=gpt-4o-mini', body: { model: 'gpt-4o-mini' }, allowed: true },
  { name: 'Gemini with its version', path: '/v1beta/models/gemini-2.0-flash:generateContent', body: { contents: [] }, allowed: true },
  { name: 'Anthropic messages', path: '/v1/messages', body: { model: 'claude-3-5-haiku-latest', max_tokens: 1 }, allowed: true },
];

const post = (port: number, c: Case) =>
  fetch(`http://127.0.0.1:${port}${c.path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key.key}` },
    body: JSON.stringify(c.body ?? {}),
  });

const familyOf = (path: string): Family => (path.includes(':generateContent') ? 'google' : path.startsWith('/v1/messages') ? 'anthropic' : 'openai');

describe('a restricted key through keygate to a router that binds model its own way', () => {
  it.each(ATTACKS)('attack: $name — the router would run another model; keygate refuses', async (c) => {
    const direct = (await (await post(routerPort, c)).json()) as { ran: string[] };
    expect(direct.ran).toEqual(c.runsDirectly);
    const res = await post(proxy!.port, c);
    const text = await res.text();
    expect(res.status, text).toBe(403);
    expect(text).toContain(c.code ?? 'MODEL_NOT_ALLOWED');
  });

  it.each(FINE)('allowed: $name — the router runs an allowed model, and the metadata names it', async (c) => {
    const res = await post(proxy!.port, c);
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const ran = (JSON.parse(text) as { ran: string[] }).ran;
    expect(ran).toHaveLength(1);
    expect(RUNNABLE.has(ran[0]!), ran[0]).toBe(true);
    const check = await stack!.client.check({ method: 'POST', path: c.path, headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' }, body: JSON.stringify(c.body ?? {}) });
    expect(check.dynamic_metadata?.fields?.model?.stringValue).toBe(qualifyModel(ran[0]!, familyOf(c.path)));
  });

  it('whatever keygate allows, the router runs only allowed models (all cases)', async () => {
    for (const c of [...ATTACKS, ...FINE]) {
      const res = await post(proxy!.port, c);
      const text = await res.text();
      if (res.status !== 200) continue;
      for (const m of (JSON.parse(text) as { ran: string[] }).ran) expect(RUNNABLE.has(m), `${c.name}: ran ${m}`).toBe(true);
    }
  });
});
