/**
 * The shipped envoy.yaml against the endpoint catalog (docs/endpoints.md, "What Envoy sends where"):
 * every route that forwards upstream is checked by keygate with its family named, reaches catalog
 * endpoints (a route whose paths the catalog refuses is a mistake: it forwards nothing keygate opens),
 * hands the upstream the bare provider path the catalog knows, and sends the body to the Check where
 * the endpoint rule reads it. No Envoy binary: the YAML is read as Envoy's loader reads it.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { EndpointCatalog, BUILTIN_CATALOGS } from '../src/core/endpoints/catalog.ts';
import { isFamily } from '../src/core/families/index.ts';

type Obj = Record<string, any>;
const text = readFileSync(new URL('../envoy.yaml', import.meta.url), 'utf8');
const catalog = new EndpointCatalog();
const hcmOf = (doc: Obj): Obj => doc.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
const routesOf = (doc: Obj): Obj[] => hcmOf(doc).route_config.virtual_hosts.flatMap((v: Obj) => v.routes);

function sample(template: string): string {
  return template.replace(/\{id\}/g, 'obj_123').replace(/\{model\}/g, 'gemini-2.5-flash').replace(/\{version\}/g, 'v1beta').replace(/\{\*\*\}/g, 'a/b');
}

/** What the route's match accepts, and the path it sends upstream (Envoy's prefix_rewrite / regex_rewrite). */
function matcher(r: Obj): { accepts: (p: string) => boolean; rewrite: (p: string) => string } {
  const m = r.match;
  const accepts = m.prefix !== undefined ? (p: string) => p.startsWith(m.prefix) : m.safe_regex ? (p: string) => new RegExp(m.safe_regex.regex).test(p) : () => false;
  const rw = r.route;
  const rewrite = rw.prefix_rewrite !== undefined ? (p: string) => rw.prefix_rewrite + p.slice(m.prefix.length) : rw.regex_rewrite ? (p: string) => p.replace(new RegExp(rw.regex_rewrite.pattern.regex), rw.regex_rewrite.substitution) : (p: string) => p;
  return { accepts, rewrite };
}

/** What is wrong with the routes of `doc` against the catalog ([] when nothing). */
function routeProblems(doc: Obj): string[] {
  const out: string[] = [];
  const authz = hcmOf(doc).http_filters.find((f: Obj) => f.name === 'envoy.filters.http.ext_authz')?.typed_config;
  if (!authz) return ['no ext_authz filter: nothing is checked'];
  const body = authz.with_request_body;
  if (!body || !(body.max_request_bytes > 0)) out.push('ext_authz sends no request body: the endpoint rule cannot read references');
  const claimed = new Set<string>(); // `${method} ${path}` of sample paths an earlier route took (Envoy: first match wins)
  for (const r of routesOf(doc)) {
    if (!r.route) continue; // a direct response (the 404 catch-all) forwards nothing
    const per = r.typed_per_filter_config?.['envoy.filters.http.ext_authz'] ?? {};
    if (per.disabled === true) {
      out.push(`${r.name}: forwards without the Check (ext_authz disabled)`);
      continue;
    }
    const family = per.check_settings?.context_extensions?.protocol;
    if (!isFamily(family)) {
      out.push(`${r.name}: names no family for the Check (context_extensions.protocol)`);
      continue;
    }
    if (per.check_settings?.disable_request_body_buffering === true) out.push(`${r.name}: sends no body to the Check`);
    const { accepts, rewrite } = matcher(r);
    let reached = 0;
    for (const c of BUILTIN_CATALOGS.filter((x) => x.family === family)) {
      for (const row of c.rows) {
        const bare = sample(row.path);
        const entry = `/${family}${bare}`;
        const id = `${row.method} ${entry}`;
        if (!accepts(entry) || claimed.has(id)) continue;
        claimed.add(id);
        reached++;
        const hit = catalog.classify(family, row.method, entry);
        if (hit?.entry.row !== row) out.push(`${r.name}: ${row.method} ${entry} is not classified as its row`);
        if (rewrite(entry) !== bare) out.push(`${r.name}: ${row.method} ${entry} goes upstream as ${rewrite(entry)}, not the provider path ${bare}`);
      }
    }
    if (reached === 0) out.push(`${r.name}: forwards only paths the catalog refuses (${JSON.stringify(r.match)})`);
  }
  return out;
}

describe('envoy.yaml routes against the endpoint catalog', () => {
  it('every forwarding route is checked with its family, reaches catalog endpoints and sends them upstream as provider paths', () => {
    expect(routeProblems(parse(text))).toEqual([]);
  });

  it('every endpoint of each family is reachable through the entries (the catch-all entry of each family forwards the rest)', () => {
    const doc = parse(text);
    const routes = routesOf(doc).filter((r) => r.route);
    for (const c of BUILTIN_CATALOGS) {
      const missed = c.rows.filter((row) => !routes.some((r) => matcher(r).accepts(`/${c.family}${sample(row.path)}`)));
      expect(missed.map((r) => `${r.method} ${r.path}`), c.family).toEqual([]);
    }
  });

  it.each<[string, (doc: Obj) => void, RegExp]>([
    ['a route forwarding a path the catalog refuses', (d) => hcmOf(d).route_config.virtual_hosts[0].routes.unshift({ name: 'bad', match: { prefix: '/openai/v1/made-up' }, route: { cluster: 'llm_upstream', prefix_rewrite: '/v1/made-up' }, typed_per_filter_config: { 'envoy.filters.http.ext_authz': { check_settings: { context_extensions: { protocol: 'openai' } } } } }), /bad: forwards only paths the catalog refuses/],
    ['a route without the Check', (d) => (routesOf(d)[0]!.typed_per_filter_config['envoy.filters.http.ext_authz'] = { disabled: true }), /forwards without the Check/],
    ['a route without its family', (d) => (routesOf(d)[0]!.typed_per_filter_config['envoy.filters.http.ext_authz'] = { check_settings: {} }), /names no family/],
    ['a route that keeps its entry prefix upstream', (d) => (routesOf(d).find((r) => r.name === "openai")!.route.prefix_rewrite = '/openai/'), /goes upstream as \/openai\//],
    ['no body for the Check', (d) => delete hcmOf(d).http_filters.find((f: Obj) => f.name === 'envoy.filters.http.ext_authz').typed_config.with_request_body, /sends no request body/],
    ['a route that turns the body off', (d) => (routesOf(d)[0]!.typed_per_filter_config['envoy.filters.http.ext_authz'].check_settings = { context_extensions: { protocol: 'openai' }, disable_request_body_buffering: true }), /sends no body to the Check/],
  ])('fails for %s (the check can fail)', (_name, mutate, want) => {
    const doc = parse(text);
    mutate(doc);
    expect(routeProblems(doc).join('\n')).toMatch(want);
  });
});
