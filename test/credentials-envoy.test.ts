/**
 * deploy/envoy/gateway-credential-routes.yaml, checked without an Envoy binary: strictly against
 * envoy.config.route.v3.RouteConfiguration, and for what per-account credentials rely on (the
 * gateway's credential in each entry's header, added only where the Check set none).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEFAULT_CREDENTIAL_HEADERS } from '../src/core/upstream-credential.ts';
import { isFamily } from '../src/core/families/index.ts';
import { envoyProtoDirs } from '../proto/envoy-protos.ts';
import { StrictProto } from './helpers/strict-proto.ts';

const ROUTES = 'envoy.config.route.v3.RouteConfiguration';
const text = readFileSync(new URL('../deploy/envoy/gateway-credential-routes.yaml', import.meta.url), 'utf8');
const proto = new StrictProto(envoyProtoDirs(), ['envoy/config/route/v3/route.proto', 'envoy/extensions/filters/http/ext_authz/v3/ext_authz.proto']);

type Obj = Record<string, any>;

describe('the gateway credential routes', () => {
  it('are a valid RouteConfiguration, strictly (and the validator sees a mistake: the control)', () => {
    const doc: Obj = parse(text);
    expect(proto.validate(ROUTES, doc)).toEqual([]);
    doc.virtual_hosts[0].routes[0].request_headers_to_add[0].append_action = 'ADD_IF_MISSING';
    expect(proto.validate(ROUTES, doc).length).toBeGreaterThan(0);
  });

  it("put the gateway's credential in each entry's header (the sidecar's defaults), ADD_IF_ABSENT, so the Check's header wins", () => {
    const doc: Obj = parse(text);
    const routes: Obj[] = doc.virtual_hosts[0].routes;
    expect(routes.map((r) => r.name).sort()).toEqual(['anthropic', 'google', 'openai']);
    for (const r of routes) {
      const family = r.typed_per_filter_config['envoy.filters.http.ext_authz'].check_settings.context_extensions.protocol;
      expect(isFamily(family) && family).toBe(r.name);
      expect(r.request_headers_to_add).toEqual([{ header: { key: DEFAULT_CREDENTIAL_HEADERS[family as 'openai'], value: expect.stringContaining('%ENVIRONMENT(') }, append_action: 'ADD_IF_ABSENT' }]);
    }
    expect(routes.find((r) => r.name === 'openai')!.request_headers_to_add[0].header.value).toMatch(/^Bearer /);
  });
});

describe('the Istio recipe for the gateway credential', () => {
  it("merges ADD_IF_ABSENT into the gateway's virtual host: a valid VirtualHost fragment, kept out of the default kustomization", () => {
    const doc: Obj = parse(readFileSync(new URL('../deploy/recipes/istio/envoyfilter-gateway-credential.yaml', import.meta.url), 'utf8'));
    expect(doc.kind).toBe('EnvoyFilter');
    const patch = doc.spec.configPatches[0];
    expect([patch.applyTo, patch.patch.operation]).toEqual(['VIRTUAL_HOST', 'MERGE']);
    expect(proto.validate('envoy.config.route.v3.VirtualHost', { name: 'llm', domains: ['*'], ...patch.patch.value })).toEqual([]);
    expect(patch.patch.value.request_headers_to_add).toEqual([{ header: { key: 'authorization', value: expect.stringMatching(/^Bearer %ENVIRONMENT\(/) }, append_action: 'ADD_IF_ABSENT' }]);
    const k: Obj = parse(readFileSync(new URL('../deploy/recipes/istio/kustomization.yaml', import.meta.url), 'utf8'));
    expect(k.resources).not.toContain('envoyfilter-gateway-credential.yaml');
  });
});
