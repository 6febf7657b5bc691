/**
 * deploy/recipes, without a cluster: every object of every recipe checked against the schema of
 * the release it names. Kubernetes' own kinds with kubernetes-models (and no unknown field, through
 * its closed TypeScript interfaces); each custom resource with ajv
 * against its CRD's openAPIV3Schema (test/fixtures/crds, copied from the projects' release tags),
 * made strict the way the API server is (an unknown field is an error, as `kubectl --validate=strict`
 * reports it, not silently pruned). Not checked here: the CRDs' CEL rules
 * (x-kubernetes-validations) and formats, and anything a controller decides at run time.
 * Then what each recipe must say: keygate over gRPC on 9001, fail closed for authorization and open
 * for metering, the rate limit read from keygate's `total_limit` in the ext_authz filter's
 * metadata namespace, and the Istio provider named as the AuthorizationPolicy uses it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import AjvModule, { type ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Service } from 'kubernetes-models/v1/Service';
import { ENV, loadConfig } from '../src/config.ts';
import { totalLimitMetadata } from '../src/core/rate.ts';
import { envoyProtoDirs } from '../proto/envoy-protos.ts';
import { StrictProto } from './helpers/strict-proto.ts';
import { k8sStrictErrors } from './helpers/k8s-strict.ts';

type Obj = Record<string, any>;
const RECIPES = new URL('../deploy/recipes/', import.meta.url);
const CRDS = new URL('./fixtures/crds/', import.meta.url);

/** Each recipe and the CRD directories of the releases it names. */
const RECIPE_RELEASES: Record<string, string[]> = {
  'keygate-service': [],
  'envoy-gateway': ['envoy-gateway-v1.9.0'],
  'envoy-ai-gateway': ['ai-gateway-v1.1.0', 'envoy-gateway-v1.9.0'],
  istio: ['istio-1.30.3'],
};
const CORE: Record<string, new (data: any) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
};

/** Unknown fields are errors wherever Kubernetes would not keep them. */
function strict(schema: Obj): Obj {
  const s: Obj = { ...schema };
  if (s.properties) {
    s.properties = Object.fromEntries(Object.entries(s.properties as Obj).map(([k, v]) => [k, strict(v as Obj)]));
    if (s.additionalProperties === undefined && !s['x-kubernetes-preserve-unknown-fields']) s.additionalProperties = false;
  }
  if (s.items) s.items = strict(s.items);
  if (s.additionalProperties && typeof s.additionalProperties === 'object') s.additionalProperties = strict(s.additionalProperties);
  for (const k of ['allOf', 'anyOf', 'oneOf'] as const) if (s[k]) s[k] = (s[k] as Obj[]).map(strict);
  return s;
}

const ajv = new AjvModule.default({ strict: false, allErrors: true, validateFormats: false });
/** `group/version/Kind` → validator, for every served version of every fixture CRD. */
const validators = new Map<string, ValidateFunction>();
for (const release of readdirSync(CRDS, { withFileTypes: true }).filter((d) => d.isDirectory())) {
  for (const file of readdirSync(new URL(`${release.name}/`, CRDS)).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(readFileSync(new URL(`${release.name}/${file}`, CRDS), 'utf8'))) {
      const crd = doc.toJS() as Obj | null;
      if (crd?.kind !== 'CustomResourceDefinition') continue;
      for (const v of crd.spec.versions as Obj[]) {
        if (!v.served) continue;
        // The API server supplies apiVersion, kind and metadata to every object whether the schema lists them or not.
        const root: Obj = v.schema.openAPIV3Schema;
        const withMeta = { ...root, properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: { type: 'object' }, ...root.properties } };
        validators.set(`${release.name}:${crd.spec.group}/${v.name}/${crd.spec.names.kind}`, ajv.compile(strict(withMeta)));
      }
    }
  }
}

function objects(recipe: string): Obj[] {
  const dir = new URL(`${recipe}/`, RECIPES);
  const k: Obj = parse(readFileSync(new URL('kustomization.yaml', dir), 'utf8'));
  return (k.resources as string[]).flatMap((f) => parseAllDocuments(readFileSync(new URL(f, dir), 'utf8')).map((d) => d.toJS() as Obj));
}

/** The errors of `o` against its schema in the releases given ([] when valid). */
function check(o: Obj, releases: string[]): string[] {
  const core = CORE[`${o.apiVersion}/${o.kind}`];
  if (core) {
    try {
      new core(o).validate();
      return k8sStrictErrors([o]); // validate() accepts unknown fields; the closed interfaces do not
    } catch (err) {
      return [(err as Error).message];
    }
  }
  const found = releases.map((r) => validators.get(`${r}:${o.apiVersion}/${o.kind}`)).find(Boolean);
  if (!found) return [`no schema for ${o.apiVersion} ${o.kind} in ${releases.join(', ') || '(none)'}`];
  return found(o) ? [] : found.errors!.map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
}

const find = (objs: Obj[], kind: string) => objs.filter((o) => o.kind === kind);

describe.each(Object.entries(RECIPE_RELEASES))('deploy/recipes/%s', (recipe, releases) => {
  const objs = objects(recipe);
  it.each(objs.map((o) => [`${o.kind}/${o.metadata.name}`, o] as const))('%s is valid against its release schema', (_n, o) => {
    expect(check(o, releases)).toEqual([]);
  });
});

describe('the schema check rejects what the API server would (negative tests)', () => {
  const eg = objects('envoy-gateway');
  it('an unknown field', () => {
    const bad = structuredClone(find(eg, 'SecurityPolicy')[0]!);
    bad.spec.extAuth.grpc.backendRefs[0].prot = 9001;
    expect(check(bad, ['envoy-gateway-v1.9.0']).join()).toMatch(/additional properties.*prot/);
  });
  it('an unknown field in a Kubernetes kind', () => {
    const bad = structuredClone(find(objects('keygate-service'), 'Deployment')[0]!);
    bad.spec.template.spec.containers[0].resources.requets = { cpu: '1' };
    expect(check(bad, []).join()).toMatch(/'"requets"' does not exist/);
  });
  it('a value outside an enum, and a wrong type', () => {
    const bad = structuredClone(find(eg, 'EnvoyExtensionPolicy')[0]!);
    bad.spec.extProc[0].processingMode.response.body = 'Streaming';
    expect(check(bad, ['envoy-gateway-v1.9.0']).join()).toMatch(/allowed values/);
    const bad2 = structuredClone(find(eg, 'BackendTrafficPolicy')[0]!);
    bad2.spec.rateLimit.global.rules[0].limit.requests = '600';
    expect(check(bad2, ['envoy-gateway-v1.9.0']).join()).toMatch(/must be integer/);
  });
  it('a kind of another release', () => {
    expect(check(find(eg, 'SecurityPolicy')[0]!, ['istio-1.30.3'])[0]).toMatch(/no schema/);
  });
});

describe('what the recipes say', () => {
  const svc = objects('keygate-service');
  const keygate = find(svc, 'Deployment')[0]!.spec.template.spec.containers[0];
  const env = Object.fromEntries((keygate.env as Obj[]).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));
  const grpcPort = loadConfig({}, env).grpcPort;

  it('the keygate Service: settings keygate accepts, gRPC on the pod network, probes, no inline secret', () => {
    const known = new Set(Object.values(ENV));
    for (const e of keygate.env as Obj[]) expect(known.has(e.name), e.name).toBe(true);
    expect(loadConfig({ redisUrl: 'redis://x:6379' }, env).listenHost).toBe('0.0.0.0');
    expect(find(svc, 'Service')[0]!.spec.ports[0].port).toBe(grpcPort);
    expect(keygate.readinessProbe.httpGet.path).toBe('/readyz');
    expect(keygate.env.find((e: Obj) => e.name === 'REDIS_URL').valueFrom.secretKeyRef.name).toBe('keygate-redis');
    expect(keygate.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true });
  });

  it.each(['envoy-gateway', 'envoy-ai-gateway'])('%s: ext_authz to keygate fails closed, metering to the same port fails open', (recipe) => {
    const objs = objects(recipe);
    const sp = find(objs, 'SecurityPolicy')[0]!;
    expect(sp.spec.extAuth.grpc.backendRefs).toEqual([{ name: 'keygate', namespace: 'keygate', port: grpcPort }]);
    expect(sp.spec.extAuth.failOpen).toBe(false);
    const ep = find(objs, 'EnvoyExtensionPolicy')[0]!;
    expect(ep.spec.extProc[0].backendRefs).toEqual(sp.spec.extAuth.grpc.backendRefs);
    expect(ep.spec.extProc[0].failOpen).toBe(true);
    expect(ep.spec.targetRefs).toEqual(sp.spec.targetRefs);
    // The ReferenceGrant lets exactly these policies' namespace reach the Service.
    const grant = find(objs, 'ReferenceGrant')[0]!;
    expect(grant.spec.from.map((f: Obj) => f.namespace)).toEqual([sp.metadata.namespace, ep.metadata.namespace]);
  });

  it('every metering recipe sends the request body to metering, partial beyond the buffer (a stream cut before its usage is estimated from it)', () => {
    for (const recipe of ['envoy-gateway', 'envoy-ai-gateway']) {
      const mode = find(objects(recipe), 'EnvoyExtensionPolicy')[0]!.spec.extProc[0].processingMode;
      expect(mode, recipe).toEqual({ request: { body: 'BufferedPartial' }, response: { body: 'Streamed' } });
    }
    const istio = find(objects('istio'), 'EnvoyFilter')[0]!.spec.configPatches[0].patch.value.typed_config.processing_mode;
    expect(istio).toMatchObject({ request_header_mode: 'SEND', request_body_mode: 'BUFFERED_PARTIAL', response_body_mode: 'STREAMED' });
  });

  it('envoy-gateway: the limit comes from keygate\'s total_limit in the ext_authz filter\'s namespace, counted per key as keygate sets it', () => {
    const objs = objects('envoy-gateway');
    const sp = find(objs, 'SecurityPolicy')[0]!;
    const rule = find(objs, 'BackendTrafficPolicy')[0]!.spec.rateLimit.global.rules[0];
    const [key] = Object.keys(totalLimitMetadata({ count: 5, per: 'second' }));
    expect(rule.limit.fromMetadata).toEqual({ namespace: `envoy.filters.http.ext_authz/securitypolicy/${sp.metadata.namespace}/${sp.metadata.name}`, key });
    // total_limit is the key's rate (else its account's), so the bucket is the key's: counted per
    // account, one key's small limit would be compared with every key's requests of the account.
    expect(rule.clientSelectors).toEqual([{ headers: [{ name: loadConfig({}, {}).keyIdHeader, type: 'Distinct' }] }]);
  });

  it('envoy-ai-gateway: keygate guards the HTTPRoute the AIGatewayRoute becomes', () => {
    const objs = objects('envoy-ai-gateway');
    const route = find(objs, 'AIGatewayRoute')[0]!;
    expect(find(objs, 'SecurityPolicy')[0]!.spec.targetRefs).toEqual([{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: route.metadata.name }]);
  });

  it('istio: CUSTOM action through the provider the mesh config defines, with fields istiod reads', () => {
    const objs = objects('istio');
    const ap = find(objs, 'AuthorizationPolicy')[0]!;
    expect(ap.spec.action).toBe('CUSTOM');
    const mesh: Obj = parse(readFileSync(new URL('istio/mesh-config.yaml', RECIPES), 'utf8'));
    const provider = mesh.meshConfig.extensionProviders.find((p: Obj) => p.name === ap.spec.provider.name);
    expect(provider).toBeDefined();
    // The fields of EnvoyExternalAuthorizationGrpcProvider (istio.io/api mesh/v1alpha1, as istiod 1.30.3 reads them).
    const GRPC_FIELDS = ['service', 'port', 'timeout', 'failOpen', 'clearRouteCache', 'statusOnError', 'includeRequestBodyInCheck'];
    for (const k of Object.keys(provider.envoyExtAuthzGrpc)) expect(GRPC_FIELDS, k).toContain(k);
    expect(Object.keys(provider.envoyExtAuthzGrpc.includeRequestBodyInCheck).sort()).toEqual(['allowPartialMessage', 'maxRequestBytes', 'packAsBytes']);
    expect(provider.envoyExtAuthzGrpc).toMatchObject({ service: 'keygate.keygate.svc.cluster.local', port: grpcPort, failOpen: false });
    const ef = find(objs, 'EnvoyFilter')[0]!;
    const filter = ef.spec.configPatches[0].patch.value;
    expect(filter.typed_config.grpc_service.envoy_grpc.cluster_name).toBe(`outbound|${grpcPort}||keygate.keygate.svc.cluster.local`);
    expect(filter.typed_config.failure_mode_allow).toBe(true);
    expect(ef.spec.workloadSelector.labels).toEqual(ap.spec.selector.matchLabels);
  });

  // The EnvoyFilter's CRD leaves `patch.value` free (preserve-unknown-fields): it is Envoy's own
  // configuration, here an HTTP_FILTER patch, so an envoy.extensions.filters.network.
  // http_connection_manager.v3.HttpFilter, checked against Envoy's protos as envoy.yaml is.
  const HTTP_FILTER = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter';
  const envoyProto = new StrictProto(envoyProtoDirs(), ['envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto']);
  const meteringPatch = () => {
    const patches = find(objects('istio'), 'EnvoyFilter')[0]!.spec.configPatches as Obj[];
    expect(patches.map((p) => [p.applyTo, p.patch.operation])).toEqual([['HTTP_FILTER', 'INSERT_BEFORE']]);
    return structuredClone(patches[0]!.patch.value) as Obj;
  };

  it('istio: the EnvoyFilter patch is a valid Envoy HttpFilter, strictly, its ext_proc typed_config resolved', () => {
    const value = meteringPatch();
    expect(envoyProto.validate(HTTP_FILTER, value)).toEqual([]);
    expect(value.typed_config['@type']).toBe('type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor');
    // Streamed response bodies (keygate reads usage as it passes); the request body, partial past
    // the buffer, for the input estimate of a stream cut before its usage.
    expect(value.typed_config.processing_mode).toMatchObject({ response_header_mode: 'SEND', response_body_mode: 'STREAMED', request_body_mode: 'BUFFERED_PARTIAL' });
  });

  it('istio: the EnvoyFilter check catches a broken ext_proc config (negative test)', () => {
    const cases: [string, (v: Obj) => void, RegExp][] = [
      ['a misspelt field', (v) => (v.typed_config.failure_mode_alow = true), /failure_mode_alow/],
      ['an enum value Envoy lacks', (v) => (v.typed_config.processing_mode.response_body_mode = 'STREAMING'), /response_body_mode/],
      ['a bad duration', (v) => (v.typed_config.message_timeout = '1000ms'), /message_timeout/],
      ['a typed_config of an unknown type', (v) => (v.typed_config['@type'] = 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcesor'), /ExternalProcesor/],
      ['no gRPC target', (v) => delete v.typed_config.grpc_service.envoy_grpc, /grpc_service/],
    ];
    for (const [what, spoil, error] of cases) {
      const value = meteringPatch();
      spoil(value);
      const errors = envoyProto.validate(HTTP_FILTER, value);
      expect(errors.join('\n'), what).toMatch(error);
    }
  });
});
