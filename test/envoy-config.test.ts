/**
 * envoy.yaml, checked without an Envoy binary: strictly against Envoy's own
 * envoy.config.bootstrap.v3.Bootstrap proto (typed configs resolved by @type, unknown fields and
 * wrong types rejected at every level), then for what keygate relies on.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../src/config.ts';
import { HEALTH_SERVICES } from '../src/transport/envoy/grpc.ts';
import { envoyProtoDirs } from '../proto/envoy-protos.ts';
import { StrictProto } from './helpers/strict-proto.ts';
import { pathOnly } from '../src/core/families/index.ts';
import { meteredEndpoint } from '../src/metering/usage.ts';
import { ENTRIES, sendsBodyToMetering } from '../src/dev/gateway.ts';

const BOOTSTRAP = 'envoy.config.bootstrap.v3.Bootstrap';
const text = readFileSync(new URL('../envoy.yaml', import.meta.url), 'utf8');
const proto = new StrictProto(envoyProtoDirs(), ['envoy/config/bootstrap/v3/bootstrap.proto']);
const defaults = loadConfig({}, {});

type Obj = Record<string, any>;
const load = (): Obj => parse(text);
const hcmOf = (doc: Obj): Obj => doc.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
const filter = (doc: Obj, name: string): Obj => {
  const f = hcmOf(doc).http_filters.find((x: Obj) => x.name === name);
  if (!f) throw new Error(`no http filter ${name}`);
  return f.typed_config;
};
const routes = (doc: Obj): Obj[] => hcmOf(doc).route_config.virtual_hosts.flatMap((v: Obj) => v.routes);
const cluster = (doc: Obj, name: string): Obj => {
  const c = doc.static_resources.clusters.find((x: Obj) => x.name === name);
  if (!c) throw new Error(`no cluster ${name}`);
  return c;
};
const seconds = (d: string) => Number(d.replace(/s$/, ''));

describe('envoy.yaml against envoy.config.bootstrap.v3.Bootstrap', () => {
  it('is valid, strictly, with every typed_config resolved', () => {
    expect(proto.validate(BOOTSTRAP, load())).toEqual([]);
  });

  it('has a byte-for-byte copy in deploy/k8s for the ConfigMap', () => {
    const copy = readFileSync(new URL('../deploy/k8s/envoy.yaml', import.meta.url), 'utf8');
    expect(copy, 'run: cp envoy.yaml deploy/k8s/envoy.yaml').toBe(text);
  });

  describe('the validator catches mistakes (negative tests)', () => {
    const broken = (mutate: (doc: Obj) => void): string[] => {
      const doc = load();
      mutate(doc);
      return proto.validate(BOOTSTRAP, doc);
    };

    it.each<[string, (doc: Obj) => void, RegExp]>([
      ['an unknown top-level field', (d) => (d.static_resource = {}), /\$\.static_resource: unknown field of envoy\.config\.bootstrap\.v3\.Bootstrap/],
      [
        'an unknown field deep inside a typed_config',
        (d) => (filter(d, 'envoy.filters.http.ext_authz').with_request_body.max_bytes = 1),
        /with_request_body\.max_bytes: unknown field of envoy\.extensions\.filters\.http\.ext_authz\.v3\.BufferSettings/,
      ],
      [
        'an unknown field in a per-route typed config',
        (d) => (routes(d)[0]!.typed_per_filter_config['envoy.filters.http.ext_authz'].context_extensions = { protocol: 'openai' }),
        /context_extensions: unknown field of envoy\.extensions\.filters\.http\.ext_authz\.v3\.ExtAuthzPerRoute/,
      ],
      ['a string for a bool', (d) => (filter(d, 'envoy.filters.http.ext_authz').failure_mode_allow = 'false'), /failure_mode_allow: expected true or false/],
      ['a number for a string', (d) => (cluster(d, 'keygate').name = 9001), /clusters\[0\]\.name: expected a string/],
      ['an object for a list', (d) => (d.static_resources.clusters = {}), /clusters: expected a list/],
      ['a malformed duration', (d) => (filter(d, 'envoy.filters.http.ext_authz').grpc_service.timeout = '1 second'), /grpc_service\.timeout: expected a duration/],
      ['an unknown enum value', (d) => (filter(d, 'envoy.filters.http.ext_authz').transport_api_version = 'V4'), /transport_api_version: "V4" is not a value/],
      ['an out-of-range integer', (d) => (d.static_resources.listeners[0].address.socket_address.port_value = 70000), /port_value: 70000 breaks lte 65535/],
      ['a bound from protoc-gen-validate', (d) => (filter(d, 'envoy.filters.http.ext_authz').with_request_body.max_request_bytes = 0), /max_request_bytes: 0 breaks gt 0/],
      ['an unknown @type', (d) => (filter(d, 'envoy.filters.http.router')['@type'] = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Routr'), /names no known message/],
      ['two members of one oneof', (d) => (routes(d)[0]!.direct_response = { status: 404 }), /oneof action already set by route/],
      ['a missing required oneof', (d) => delete routes(d)[0]!.route, /needs one of route, redirect, direct_response/],
      [
        'an unknown field in the ext_proc filter',
        (d) => (filter(d, 'envoy.filters.http.ext_proc').processing_mode.response_body = 'STREAMED'),
        /processing_mode\.response_body: unknown field of envoy\.extensions\.filters\.http\.ext_proc\.v3\.ProcessingMode/,
      ],
      ['an ext_proc body mode that does not exist', (d) => (filter(d, 'envoy.filters.http.ext_proc').processing_mode.response_body_mode = 'STREAM'), /response_body_mode: "STREAM" is not a value/],
      ['a deprecated field', (d) => (cluster(d, 'keygate').http2_protocol_options = {}), /http2_protocol_options: deprecated field/],
    ])('%s', (_name, mutate, expected) => {
      const errors = broken(mutate);
      expect(errors.join('\n')).toMatch(expected);
    });
  });
});

describe('envoy.yaml wires keygate as the product expects', () => {
  const doc = load();
  const authz = filter(doc, 'envoy.filters.http.ext_authz');

  it('calls keygate over gRPC (ext_authz v3) with a timeout, failing closed', () => {
    expect(authz.grpc_service.envoy_grpc.cluster_name).toBe('keygate');
    expect(authz.transport_api_version).toBe('V3');
    expect(authz.failure_mode_allow).toBe(false);
    expect(authz.status_on_error.code).toBe('ServiceUnavailable');
    expect(authz.include_peer_certificate).toBe(false);
    // Above a cold key's two Redis round trips at keygate's Redis timeout.
    expect(seconds(authz.grpc_service.timeout) * 1000).toBeGreaterThan(2 * defaults.redisTimeoutMs);
  });

  it('sends up to 8 MiB of raw body, partial beyond, within both sides\' limits', () => {
    expect(authz.with_request_body).toEqual({ max_request_bytes: 8388608, allow_partial_message: true, pack_as_bytes: true });
    const listener = doc.static_resources.listeners[0];
    expect(listener.per_connection_buffer_limit_bytes).toBeGreaterThan(authz.with_request_body.max_request_bytes);
    // The CheckRequest (body + headers) fits what keygate's gRPC server accepts.
    expect(defaults.grpcMaxReceiveBytes).toBeGreaterThanOrEqual(authz.with_request_body.max_request_bytes + 1024 * 1024);
  });

  it('runs the filters in order: health check, ext_authz, ext_proc (metering), router last', () => {
    expect(hcmOf(doc).http_filters.map((f: Obj) => f.name)).toEqual([
      'envoy.filters.http.health_check',
      'envoy.filters.http.ext_authz',
      'envoy.filters.http.ext_proc',
      'envoy.filters.http.router',
    ]);
    const hc = filter(doc, 'envoy.filters.http.health_check');
    expect(hc.pass_through_mode).toBe(false);
    expect(hc.cluster_min_healthy_percentages.keygate.value).toBe(100);
  });

  it('meters through keygate: headers sent, response body streamed, trailers skipped, ext_authz metadata forwarded, never failing a request', () => {
    const p = filter(doc, 'envoy.filters.http.ext_proc');
    expect(p.grpc_service.envoy_grpc.cluster_name).toBe('keygate');
    expect(p.failure_mode_allow).toBe(true);
    expect(p.processing_mode).toEqual({
      request_header_mode: 'SEND',
      response_header_mode: 'SEND',
      request_body_mode: 'NONE',
      response_body_mode: 'STREAMED',
      request_trailer_mode: 'SKIP',
      response_trailer_mode: 'SKIP',
    });
    expect(p.metadata_options.forwarding_namespaces.untyped).toEqual(['envoy.filters.http.ext_authz']);
    expect(seconds(p.message_timeout)).toBeGreaterThan(0);
    expect(p.observability_mode).toBe(false);
    // usage cannot be switched off: keygate refuses (400 USAGE_NOT_GUARANTEED) with an immediate response
    expect(p.disable_immediate_response).toBe(false);
  });

  // Each path as a client sends it to the gateway; metered: whether keygate meters what it reaches;
  // body: whether its route sends metering the request body (default: metered). Images and audio
  // too: their answers name no model, so metering reads the requested one from the body (JSON, or
  // the multipart form's model field).
  const PATHS: ReadonlyArray<readonly [url: string, metered: boolean, body?: boolean]> = [
    ['/openai/v1/chat/completions', true],
    ['/openai/v1/completions', true],
    ['/openai/v1/embeddings', true],
    ['/openai/v1/responses', true],
    ['/anthropic/v1/messages', true],
    ['/google/v1beta/models/gemini-2.5-flash:generateContent', true],
    ['/google/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse', true],
    ['/google/v1/models/gemini-2.0-flash:generateContent', true],
    ['/openai/v1/models', false],
    ['/openai/v1/files', false],
    ['/openai/v1/audio/transcriptions', true],
    ['/openai/v1/audio/translations', true],
    ['/openai/v1/images/generations', true],
    ['/openai/v1/images/edits', true],
    ['/openai/v1/images/variations', false],
    ['/openai/v1/audio/speech', false],
    ['/anthropic/v1/models', false],
    ['/google/v1beta/models', false],
    ['/google/v1beta/models/gemini-2.5-flash:countTokens', false],
    ['/google/upload/v1beta/files', false],
  ];
  /** The first route Envoy would take for `url` (prefix or safe_regex on the path without its query) and the path it sends upstream. */
  const routeFor = (url: string): { route: Obj; upstreamPath: string } => {
    const path = pathOnly(url);
    for (const r of routes(doc)) {
      if (r.match.prefix !== undefined && path.startsWith(r.match.prefix)) {
        return { route: r, upstreamPath: r.route ? r.route.prefix_rewrite + path.slice(r.match.prefix.length) : path };
      }
      if (r.match.safe_regex !== undefined && new RegExp(r.match.safe_regex.regex).test(path)) {
        const rw = r.route.regex_rewrite;
        return { route: r, upstreamPath: path.replace(new RegExp(rw.pattern.regex), rw.substitution) };
      }
    }
    throw new Error(`no route for ${url}`);
  };
  const sendsBody = (r: Obj): boolean => r.typed_per_filter_config?.['envoy.filters.http.ext_proc'] !== undefined;

  it('sends the request body of every metered endpoint to metering (input estimated for a cut stream; OpenAI streams asked for usage), buffered, and only there', () => {
    const prefixes = ENTRIES.map(([p]) => p);
    for (const [url, metered, body] of PATHS) {
      const { route, upstreamPath } = routeFor(url);
      const prefix = prefixes.find((p) => url.startsWith(`${p}/`))!;
      expect(upstreamPath, url).toBe(pathOnly(url).slice(prefix.length));
      expect(meteredEndpoint(upstreamPath) !== null, url).toBe(metered);
      expect(sendsBody(route), url).toBe(body ?? metered);
      expect(route.typed_per_filter_config['envoy.filters.http.ext_authz'].check_settings.context_extensions.protocol, url).toBe(prefix.slice(1));
    }
    for (const r of routes(doc).filter(sendsBody)) {
      const mode = r.typed_per_filter_config['envoy.filters.http.ext_proc'].overrides.processing_mode;
      expect(mode).toEqual({ ...filter(doc, 'envoy.filters.http.ext_proc').processing_mode, request_body_mode: 'BUFFERED_PARTIAL' });
    }
  });

  it('the dev gateway sends metering the request body on the same paths as envoy.yaml', () => {
    for (const [url] of PATHS) {
      const [prefix, family] = ENTRIES.find(([p]) => url.startsWith(`${p}/`))!;
      expect(sendsBodyToMetering(family, url.slice(prefix.length)), url).toBe(sendsBody(routeFor(url).route));
    }
  });

  it('has an OpenAI, an Anthropic and a Google entry, each naming its family for keygate', () => {
    const byProtocol = new Map<string, Obj>();
    for (const r of routes(doc)) {
      const p = r.typed_per_filter_config?.['envoy.filters.http.ext_authz']?.check_settings?.context_extensions?.protocol;
      if (p) byProtocol.set(p, r);
    }
    expect([...byProtocol.keys()].sort()).toEqual(['anthropic', 'google', 'openai']);
    for (const [family, r] of byProtocol) {
      expect(r.match.prefix).toBe(`/${family}/`);
      expect(r.route.cluster).toBe('llm_upstream');
    }
    // No route turns the check off.
    for (const r of routes(doc)) expect(r.typed_per_filter_config?.['envoy.filters.http.ext_authz']?.disabled).toBeUndefined();
  });

  it("writes each family's Check settings and the metering override once (YAML anchors), which the loader resolves onto every route", () => {
    expect(text.match(/ExtAuthzPerRoute$/gm)).toHaveLength(3);
    expect(text.match(/ExtProcPerRoute$/gm)).toHaveLength(1);
    // the aliases come out as the settings in full: every route but the 404 carries its family's
    const proxied = routes(doc).filter((r) => r.route);
    expect(proxied.length).toBeGreaterThan(3);
    for (const r of proxied) {
      expect(r.typed_per_filter_config['envoy.filters.http.ext_authz'], r.name).toEqual({
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute',
        check_settings: { context_extensions: { protocol: r.name.split('_')[0] } },
      });
    }
  });

  it('routes only to clusters that exist', () => {
    const names = new Set(doc.static_resources.clusters.map((c: Obj) => c.name));
    for (const r of routes(doc)) if (r.route) expect(names.has(r.route.cluster)).toBe(true);
    expect(names.has(authz.grpc_service.envoy_grpc.cluster_name)).toBe(true);
  });

  it('reaches keygate on its default gRPC port over HTTP/2, health-checked with grpc.health.v1', () => {
    const kg = cluster(doc, 'keygate');
    const addr = kg.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
    expect(addr).toEqual({ address: defaults.listenHost, port_value: defaults.grpcPort });
    expect(kg.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config).toHaveProperty(
      'http2_protocol_options',
    );
    expect(kg.health_checks[0].grpc_health_check.service_name).toBe(HEALTH_SERVICES[1]);
  });

  it('logs the identity headers keygate sets, and never a query string', () => {
    const log = hcmOf(doc).access_log[0].typed_config.log_format.json_format;
    expect(log.account_id).toBe(`%REQ(${defaults.accountHeader.toUpperCase()})%`);
    expect(log.key_id).toBe(`%REQ(${defaults.keyIdHeader.toUpperCase()})%`);
    expect(log.path).toMatch(/^%REQ_WITHOUT_QUERY\(/);
    for (const v of Object.values(log) as string[]) expect(v).not.toMatch(/AUTHORIZATION|API-KEY/i);
  });

  it('keeps the Envoy admin API on loopback', () => {
    expect(doc.admin.address.socket_address.address).toBe('127.0.0.1');
  });
});
