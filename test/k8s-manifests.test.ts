/**
 * deploy/k8s, without a cluster: every resource (and the ConfigMap kustomize generates) parsed
 * and validated against the Kubernetes OpenAPI schema (kubernetes-models), then checked for what
 * a production sidecar needs: native sidecar, probes, resources, locked-down security context,
 * no Secret, configuration the sidecar accepts, and ports that agree with envoy.yaml.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { ENV, loadConfig } from '../src/config.ts';
import { k8sStrictErrors } from './helpers/k8s-strict.ts';

const dir = new URL('../deploy/k8s/', import.meta.url);
const read = (name: string) => readFileSync(new URL(name, dir), 'utf8');
type Obj = Record<string, any>;

const kustomization: Obj = parse(read('kustomization.yaml'));
const resources: Obj[] = (kustomization.resources as string[]).flatMap((f) =>
  parseAllDocuments(read(f)).map((d) => {
    if (d.errors.length > 0) throw new Error(`${f}: ${d.errors[0]!.message}`);
    return d.toJS() as Obj;
  }),
);
const generated: Obj[] = (kustomization.configMapGenerator as Obj[]).map((g) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: g.name },
  data: Object.fromEntries((g.files as string[]).map((f) => [f, read(f)])),
}));
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
};
const deployment = resources.find((r) => r.kind === 'Deployment')!;
const pod: Obj = deployment.spec.template.spec;
const keygate: Obj = pod.initContainers.find((c: Obj) => c.name === 'keygate');
const envoy: Obj = pod.containers.find((c: Obj) => c.name === 'envoy');
const envOf = (c: Obj): Record<string, string> => Object.fromEntries((c.env ?? []).map((e: Obj) => [e.name, e.value]));
const portOf = (c: Obj, name: string): number => c.ports.find((p: Obj) => p.name === name).containerPort;
const envoyConfig: Obj = parse(readFileSync(new URL('../envoy.yaml', import.meta.url), 'utf8'));

describe('deploy/k8s parses and validates against the Kubernetes schema', () => {
  it('has every kustomize input on disk', () => {
    for (const f of kustomization.resources) expect(existsSync(new URL(f, dir)), f).toBe(true);
    expect(kustomization.configMapGenerator[0].files).toEqual(['envoy.yaml']);
  });

  it.each([...resources, ...generated].map((r) => [`${r.kind}/${r.metadata?.name}`, r] as const))('%s is valid', (_n, r) => {
    const Model = MODELS[`${r.apiVersion}/${r.kind}`];
    expect(Model, `no model for ${r.apiVersion} ${r.kind}`).toBeDefined();
    expect(() => new Model!(r).validate()).not.toThrow();
  });

  it('has no field the Kubernetes schema lacks (validate() alone accepts unknown fields)', () => {
    expect(k8sStrictErrors([...resources, ...generated])).toEqual([]);
  });

  it('the schema validation does catch a broken manifest (negative test)', () => {
    const bad = structuredClone(deployment);
    bad.spec.template.spec.initContainers[0].ports[0].containerPort = 'grpc';
    expect(() => new Deployment(bad).validate()).toThrow(/containerPort/);
  });
});

describe('keygate as a production sidecar of Envoy', () => {
  it('is a native sidecar (init container, restartPolicy Always) and Envoy the main container', () => {
    expect(keygate.restartPolicy).toBe('Always');
    expect(pod.containers.map((c: Obj) => c.name)).toEqual(['envoy']);
    expect(keygate.image).toBe(kustomization.images[0].name);
  });

  it('probes readiness on /readyz and liveness on /healthz at the admin port', () => {
    const admin = Number(envOf(keygate).KEYGATE_ADMIN_PORT);
    expect(portOf(keygate, 'admin')).toBe(admin);
    expect(keygate.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'admin' });
    expect(keygate.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'admin' });
    expect(keygate.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'admin' });
    expect(deployment.spec.template.metadata.annotations['prometheus.io/port']).toBe(String(admin));
  });

  it('has requests and memory limits for every container', () => {
    for (const c of [keygate, envoy]) {
      expect(c.resources.requests.cpu, c.name).toBeDefined();
      expect(c.resources.requests.memory, c.name).toBeDefined();
      expect(c.resources.limits.memory, c.name).toBeDefined();
    }
  });

  it('sizes the sidecar and the console from a committed results file, covering what it measured', () => {
    const RESULTS = 'bench/results/2026-11-28T0617-resources.md';
    const manifests = ['deploy/k8s/deployment.yaml', 'deploy/k8s/console/deployment.yaml', 'deploy/recipes/keygate-service/deployment.yaml'];
    const root = new URL('../', import.meta.url);
    for (const m of manifests) {
      const text = readFileSync(new URL(m, root), 'utf8');
      expect(text, m).toContain(RESULTS);
      for (const [named] of text.matchAll(/bench\/results\/[\w.-]+\.md/g)) expect(existsSync(new URL(named, root)), `${m} names ${named}`).toBe(true);
    }
    const results = readFileSync(new URL(RESULTS, root), 'utf8');
    /** A phase's column (MiB or µs) from the results table of one section. */
    const cell = (section: string, phase: string, col: number) => {
      const part = results.slice(results.indexOf(section));
      const line = part.split('\n').find((l) => l.startsWith(`| ${phase}`));
      expect(line, `${section}: ${phase}`).toBeDefined();
      return Number(line!.split('|')[col + 1]!.trim());
    };
    const mib = (q: string) => (q.endsWith('Gi') ? Number(q.slice(0, -2)) * 1024 : Number(q.replace(/Mi$/, '')));
    // The sidecar's request holds its measured peak under the metered mix; the console's its idle RSS.
    expect(mib(keygate.resources.requests.memory)).toBeGreaterThanOrEqual(cell('## Sidecar', 'the three at once', 4));
    expect(mib(keygate.resources.limits.memory)).toBeGreaterThan(mib(keygate.resources.requests.memory));
    const consoleContainer: Obj = (parseAllDocuments(readFileSync(new URL('deploy/k8s/console/deployment.yaml', root), 'utf8')).map((d) => d.toJS()).find((o: Obj) => o.kind === 'Deployment') as Obj).spec.template.spec.containers[0];
    expect(mib(consoleContainer.resources.requests.memory)).toBeGreaterThanOrEqual(cell('## Console', 'idle (5 s', 4));
    expect(mib(consoleContainer.resources.limits.memory)).toBeGreaterThanOrEqual(cell('## Console', '3000 API calls', 4));
  });

  it('the keygate-service recipe sizes keygate as the sidecar here (its comment says so)', () => {
    const recipe = parseAllDocuments(readFileSync(new URL('../deploy/recipes/keygate-service/deployment.yaml', import.meta.url), 'utf8'))
      .map((d) => d.toJS() as Obj)
      .find((o) => o.kind === 'Deployment')!;
    const container: Obj = recipe.spec.template.spec.containers.find((c: Obj) => c.name === 'keygate');
    expect(container.resources).toEqual(keygate.resources);
  });

  it('locks every container down: non-root, read-only root, no escalation, no capabilities, seccomp', () => {
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.automountServiceAccountToken).toBe(false);
    for (const c of [keygate, envoy]) {
      expect(c.securityContext, c.name).toMatchObject({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(c.securityContext.runAsUser).toBeGreaterThan(0);
      expect(c.securityContext.privileged ?? false).toBe(false);
    }
    // The image's USER is the same non-root uid.
    expect(readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8')).toMatch(
      new RegExp(`^USER ${keygate.securityContext.runAsUser}:${keygate.securityContext.runAsGroup}$`, 'm'),
    );
  });

  it('holds no key-encryption key: its one Secret reference is the optional credential key (docs/credentials.md), never the reveal key', () => {
    const all = JSON.stringify([...resources, ...generated]);
    expect(resources.some((r) => r.kind === 'Secret')).toBe(false);
    expect(all).not.toMatch(/secretRef|"secret":|KEYGATE_REVEAL_KEY/);
    expect(all.match(/secretKeyRef/g)?.length ?? 0).toBe(all.match(/"name":"KEYGATE_CREDENTIAL_KEY","valueFrom":\{"secretKeyRef":\{[^}]*"optional":true/g)?.length ?? 0);
  });

  it('configures keygate by environment only, with settings the sidecar accepts', () => {
    const env = envOf(keygate);
    const known = new Set(Object.values(ENV));
    for (const name of Object.keys(env)) expect(known.has(name), `${name} is not a keygate setting`).toBe(true);
    expect(keygate.envFrom).toBeUndefined();
    const config = loadConfig({}, env);
    expect(config.listenHost).toBe('127.0.0.1');
    expect(config.adminHost).toBe('0.0.0.0');
  });

  it('agrees with envoy.yaml: keygate port, listener port, readiness path', () => {
    const config = loadConfig({}, envOf(keygate));
    const kg = envoyConfig.static_resources.clusters.find((c: Obj) => c.name === 'keygate');
    const addr = kg.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
    expect(addr).toEqual({ address: config.listenHost, port_value: config.grpcPort });
    expect(portOf(keygate, 'grpc')).toBe(config.grpcPort);
    expect(portOf(envoy, 'http')).toBe(envoyConfig.static_resources.listeners[0].address.socket_address.port_value);
    expect(envoy.readinessProbe.httpGet).toEqual({ path: '/ready', port: 'http' });
    expect(envoy.args.slice(0, 2)).toEqual(['-c', '/etc/envoy/envoy.yaml']);
    const mount = envoy.volumeMounts.find((m: Obj) => m.mountPath === '/etc/envoy');
    const volume = pod.volumes.find((v: Obj) => v.name === mount.name);
    expect(volume.configMap.name).toBe(generated[0]!.metadata.name);
    const service = resources.find((r) => r.kind === 'Service')!;
    expect(service.spec.ports[0].targetPort).toBe('http');
    expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
  });

  it('gives the pod time to drain: preStop plus keygate\'s shutdown fit the grace period', () => {
    const config = loadConfig({}, envOf(keygate));
    const preStop = envoy.lifecycle.preStop.sleep.seconds;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(preStop + config.shutdownTimeoutMs / 1000);
  });
});
