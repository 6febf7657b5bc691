/**
 * deploy/kustomize, rendered by the real kustomize (`kubectl kustomize`) for each overlay and every
 * rendered object validated against the Kubernetes OpenAPI schema (kubernetes-models, and strictly:
 * no unknown field, through the models' closed TypeScript interfaces); then what
 * each overlay promises: the whole base (gateway pod with keygate as a native sidecar, the console,
 * Services, PodDisruptionBudgets, NetworkPolicies), every secret referenced and none inlined, the
 * Redis egress of the console for its topology.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { findOnPath } from '../src/dev/index.ts';
import { k8sStrictErrors } from './helpers/k8s-strict.ts';

type Obj = Record<string, any>;
const kubectl = findOnPath('kubectl');
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
};

function render(overlay: string): Obj[] {
  const dir = fileURLToPath(new URL(`../deploy/kustomize/overlays/${overlay}`, import.meta.url));
  const out = execFileSync(kubectl!, ['kustomize', dir], { encoding: 'utf8' });
  return parseAllDocuments(out).map((d) => {
    if (d.errors.length > 0) throw new Error(d.errors[0]!.message);
    return d.toJS() as Obj;
  });
}

/** keygate's container in the base manifest the overlays build on (deploy/k8s/deployment.yaml). */
const baseKeygate: Obj = (parseAllDocuments(readFileSync(new URL('../deploy/k8s/deployment.yaml', import.meta.url), 'utf8'))
  .map((d) => d.toJS() as Obj)
  .find((o) => o.kind === 'Deployment') as Obj).spec.template.spec.initContainers.find((c: Obj) => c.name === 'keygate');

const OVERLAYS = { 'standalone-redis': [6379], sentinel: [26379, 6379] } as const;

// Without kubectl the overlays are not rendered and the block below is skipped; in CI that is a
// broken setup (scripts/install says where to get kubectl), not a skip.
it.runIf(!kubectl && process.env.CI === 'true')('CI has kubectl (scripts/install says where to get it)', () => {
  expect(kubectl, 'kubectl not on PATH in CI: deploy/kustomize would go unrendered').toBeTruthy();
});

describe.skipIf(!kubectl)('deploy/kustomize overlays (kubectl kustomize; skipped only without kubectl)', () => {
  describe.each(Object.entries(OVERLAYS))('%s', (overlay, redisPorts) => {
    const objs = kubectl ? render(overlay) : [];
    const named = (kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name)!;

    it('renders the whole base, every object valid against the Kubernetes schema', () => {
      expect(objs.map((o) => `${o.kind}/${o.metadata.name}`).filter((n) => !n.startsWith('ConfigMap/')).sort()).toEqual(
        [
          'Deployment/keygate-console',
          'Deployment/llm-gateway',
          'NetworkPolicy/keygate-console',
          'NetworkPolicy/keygate-console-egress',
          'NetworkPolicy/llm-gateway',
          'PodDisruptionBudget/keygate-console',
          'PodDisruptionBudget/llm-gateway',
          'Service/keygate-console',
          'Service/llm-gateway',
        ].sort(),
      );
      for (const o of objs) {
        const Model = MODELS[`${o.apiVersion}/${o.kind}`];
        expect(Model, `no model for ${o.apiVersion} ${o.kind}`).toBeDefined();
        expect(() => new Model!(o).validate(), `${o.kind}/${o.metadata.name}`).not.toThrow();
      }
      // validate() accepts unknown fields; the models' closed TypeScript interfaces do not.
      expect(k8sStrictErrors(objs)).toEqual([]);
    });

    it('an unknown field is caught, at any depth (negative test)', () => {
      const gw = structuredClone(named('Deployment', 'llm-gateway'));
      gw.spec.template.spec.initContainers[0].readinesProbe = gw.spec.template.spec.initContainers[0].readinessProbe;
      const pdb = structuredClone(named('PodDisruptionBudget', 'keygate-console'));
      pdb.spec.minAvailabel = 1;
      expect(() => new Deployment(gw).validate()).not.toThrow(); // what kubernetes-models alone lets through
      const errors = k8sStrictErrors([gw, pdb]);
      expect(errors).toHaveLength(2);
      expect(errors[0]).toMatch(/^Deployment\/llm-gateway: .*'"readinesProbe"' does not exist in type 'IContainer'/);
      expect(errors[1]).toMatch(/^PodDisruptionBudget\/keygate-console: .*'"minAvailabel"' does not exist/);
    });

    it('the schema check catches a broken object (negative test)', () => {
      const bad = structuredClone(named('NetworkPolicy', 'llm-gateway'));
      bad.spec.policyTypes = 'Ingress';
      expect(() => new NetworkPolicy(bad).validate()).toThrow(/policyTypes/);
    });

    it('keygate is a native sidecar with probes, requests and a locked-down container; the console its own Deployment', () => {
      const pod = named('Deployment', 'llm-gateway').spec.template.spec;
      const keygate = pod.initContainers.find((c: Obj) => c.name === 'keygate');
      expect(keygate.restartPolicy).toBe('Always');
      expect(keygate.readinessProbe.httpGet.path).toBe('/readyz');
      expect(keygate.livenessProbe.httpGet.path).toBe('/healthz');
      expect(keygate.resources).toEqual(baseKeygate.resources);
      expect(keygate.image).toBe('registry.example.com/keygate:0.1.0');
      const console = named('Deployment', 'keygate-console').spec.template.spec.containers[0];
      expect(console.readinessProbe.httpGet.path).toBe('/readyz');
      expect(console.livenessProbe.httpGet.path).toBe('/healthz');
      for (const c of [keygate, console]) {
        expect(c.securityContext, c.name).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
      }
    });

    it('references every secret and inlines none: the Redis URL of both from Secrets', () => {
      expect(objs.some((o) => o.kind === 'Secret')).toBe(false);
      const keygate = named('Deployment', 'llm-gateway').spec.template.spec.initContainers.find((c: Obj) => c.name === 'keygate');
      const console = named('Deployment', 'keygate-console').spec.template.spec.containers[0];
      const redisUrl = (c: Obj) => c.env.find((e: Obj) => e.name === 'REDIS_URL');
      expect(redisUrl(keygate)).toEqual({ name: 'REDIS_URL', valueFrom: { secretKeyRef: { name: 'keygate-redis', key: 'url' } } });
      expect(redisUrl(console).value).toBeUndefined();
      expect(redisUrl(console).valueFrom.secretKeyRef.name).toBe('keygate-console');
      expect(JSON.stringify(objs)).not.toMatch(/redis:\/\/[^"]*@|rediss:\/\/[^"]*@|redis-sentinel:\/\/|base64:/);
    });

    it('lets the console reach only DNS and its Redis topology', () => {
      const egress = named('NetworkPolicy', 'keygate-console-egress').spec;
      expect(egress.policyTypes).toEqual(['Egress']);
      const tcp = egress.egress.flatMap((r: Obj) => r.ports).filter((p: Obj) => p.protocol === 'TCP' && p.port !== 53).map((p: Obj) => p.port);
      expect(tcp).toEqual([...redisPorts]);
    });
  });
});
