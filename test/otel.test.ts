/**
 * OpenTelemetry export against a real OTLP/HTTP receiver on loopback: a running sidecar (its own
 * redis-server, Checks over gRPC) sends a span per Check joined to the `traceparent` the request
 * carried, a span per metered response, and the GenAI token-usage histogram, as OTLP protobuf; the
 * receiver decodes them. Never the key. And off (no endpoint): not one OpenTelemetry SDK module is
 * loaded, checked in a child process that records every module it resolves.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { encodePrice } from '../src/schema/prices.ts';
import { schema } from '../src/schema/redis-schema.ts';
import type { MeteredResponse } from '../src/telemetry/metered.ts';
import { CHECK_SPAN, METERED_SPAN, TOKEN_BUCKETS, TOKEN_USAGE } from '../src/telemetry/otel.ts';
import { adminGet, sample, waitFor } from './helpers/admin.ts';
import { ExtProcClient } from './helpers/ext-proc-client.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './helpers/otlp-receiver.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { chatRequest, outcomeOf, startStack, type Stack } from './helpers/sidecars.ts';
import { fixture } from './unit/metering-helpers.ts';

const s = schema();
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const traceparent = (flags = '01', trace = TRACE) => `00-${trace}-${PARENT}-${flags}`;

let otlp: OtlpReceiver;
let stack: Stack;
let key: SeededKey;

const spanOf = async (requestId: string, name = CHECK_SPAN): Promise<ReceivedSpan> => {
  await waitFor(`span ${name} of ${requestId}`, () => otlp.spans.some((sp) => sp.name === name && sp.attributes['keygate.request.id'] === requestId), 15_000);
  return otlp.spans.find((sp) => sp.name === name && sp.attributes['keygate.request.id'] === requestId)!;
};
const withHeaders = (req: ReturnType<typeof chatRequest>, extra: Record<string, string>) => ({ ...req, headers: { ...req.headers, ...extra } });

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  stack = await startStack({ adminHost: '127.0.0.1', otlpEndpoint: otlp.url, otlpMetricsIntervalMs: 200, metricsAccountLabels: true });
  key = await seedKey(stack.db, s, { account: 'acct-otel' });
  await waitFor('ready', async () => (await adminGet(stack.sidecar.adminPort, '/readyz')).status === 200);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await otlp?.close();
});

describe('a span per Check, joined to the proxy trace', () => {
  it('an allowed Check: same trace id, the traceparent span as parent, decision, code, family, account', async () => {
    const before = process.hrtime.bigint();
    const res = await stack.client.check(withHeaders(chatRequest(key.key), { traceparent: traceparent(), tracestate: 'envoy=1', 'x-request-id': 'rid-allow-1' }));
    expect(outcomeOf(res)).toBe('allow');
    const span = await spanOf('rid-allow-1');
    expect(span.traceId).toBe(TRACE);
    expect(span.parentSpanId).toBe(PARENT);
    expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(span.spanId).not.toBe(PARENT);
    expect(span.kind).toBe(2); // SERVER
    expect(span.attributes).toMatchObject({
      'keygate.decision': 'allow',
      'keygate.code': 'OK',
      'keygate.family': 'openai',
      'keygate.account.id': 'acct-otel',
      'keygate.key.id': key.id,
    });
    expect(span.resource['service.name']).toBe('keygate');
    expect(span.endNs).toBeGreaterThanOrEqual(span.startNs);
    expect(span.endNs - span.startNs).toBeLessThan(BigInt(Number(process.hrtime.bigint() - before)) + 1_000_000n);
    expect(otlp.requests.some((r) => r.startsWith('POST /v1/traces application/x-protobuf'))).toBe(true);
  });

  it('a denied Check: the deny code, no account; the key is in no export', async () => {
    const bogus = `${key.key.slice(0, -6)}AAAAAA`;
    await stack.client.check(withHeaders(chatRequest(bogus), { traceparent: traceparent('01', 'aaaabbbbccccddddeeeeffff00001111'), 'x-request-id': 'rid-deny-1' }));
    const span = await spanOf('rid-deny-1');
    expect(span.traceId).toBe('aaaabbbbccccddddeeeeffff00001111');
    expect(span.attributes).toMatchObject({ 'keygate.decision': 'deny', 'keygate.code': 'INVALID_API_KEY', 'keygate.family': 'openai' });
    expect(span.attributes['keygate.account.id']).toBeUndefined();
    for (const body of otlp.bodies) {
      expect(body.includes(Buffer.from(key.key))).toBe(false);
      expect(body.includes(Buffer.from(bogus))).toBe(false);
      expect(body.includes(Buffer.from(key.key.slice(3)))).toBe(false);
    }
  });

  it('no span for a Check without a traceparent, with an invalid one, or with sampling off (the proxy decides)', async () => {
    await stack.client.check(withHeaders(chatRequest(key.key), { 'x-request-id': 'rid-none' }));
    await stack.client.check(withHeaders(chatRequest(key.key), { traceparent: 'garbage', 'x-request-id': 'rid-garbage' }));
    await stack.client.check(withHeaders(chatRequest(key.key), { traceparent: `00-${'0'.repeat(32)}-${PARENT}-01`, 'x-request-id': 'rid-zero' }));
    await stack.client.check(withHeaders(chatRequest(key.key), { traceparent: traceparent('00'), 'x-request-id': 'rid-unsampled' }));
    await stack.client.check(withHeaders(chatRequest(key.key), { traceparent: traceparent(), 'x-request-id': 'rid-after' }));
    await spanOf('rid-after');
    const ids = otlp.spans.map((sp) => sp.attributes['keygate.request.id']);
    for (const rid of ['rid-none', 'rid-garbage', 'rid-zero', 'rid-unsampled']) expect(ids, rid).not.toContain(rid);
  });
});

describe('a metered response: span and GenAI token usage', () => {
  const booked = (over: Partial<MeteredResponse> = {}): MeteredResponse => ({
    requestId: 'rid-metered-1',
    accountId: 'acct-otel',
    keyId: key.id,
    family: 'openai',
    operation: 'chat',
    requestModel: 'gpt-4o-mini',
    responseModel: 'gpt-4o-mini-2024-07-18',
    inputTokens: 120,
    outputTokens: 30,
    costMicros: 4500,
    traceparent: traceparent(),
    startedAtMs: Date.now() - 50,
    endedAtMs: Date.now(),
    ...over,
  });

  it('the metering hook makes a span in the request trace with the GenAI attributes', async () => {
    stack.sidecar.metered.booked(booked());
    const span = await spanOf('rid-metered-1', METERED_SPAN);
    expect(span.traceId).toBe(TRACE);
    expect(span.parentSpanId).toBe(PARENT);
    expect(span.attributes).toMatchObject({
      'keygate.account.id': 'acct-otel',
      'keygate.key.id': key.id,
      'keygate.cost.micro_units': 4500,
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
      'gen_ai.usage.input_tokens': 120,
      'gen_ai.usage.output_tokens': 30,
    });
    expect(Number(span.endNs - span.startNs) / 1e6).toBeGreaterThanOrEqual(40);
  });

  it('gen_ai.client.token.usage: input and output histograms with the conventions\' buckets and attributes', async () => {
    stack.sidecar.metered.booked(booked({ requestId: 'rid-metered-2', family: 'anthropic', operation: 'messages', requestModel: 'claude-x', responseModel: 'claude-x', inputTokens: 1000, outputTokens: 7 }));
    const point = (type: string) =>
      otlp.histogramPoints.findLast((p) => p.metric === TOKEN_USAGE && p.attributes['gen_ai.token.type'] === type && p.attributes['gen_ai.provider.name'] === 'anthropic');
    await waitFor('token usage exported', () => point('input') !== undefined && point('output') !== undefined, 15_000);
    expect(point('input')).toMatchObject({ unit: '{token}', count: 1, sum: 1000, bounds: TOKEN_BUCKETS });
    expect(point('output')).toMatchObject({ count: 1, sum: 7 });
    expect(point('input')!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': 'claude-x',
      'gen_ai.response.model': 'claude-x',
      'gen_ai.token.type': 'input',
    });
    const openai = otlp.histogramPoints.findLast((p) => p.metric === TOKEN_USAGE && p.attributes['gen_ai.token.type'] === 'input' && p.attributes['gen_ai.provider.name'] === 'openai');
    expect(openai).toMatchObject({ count: 1, sum: 120 });
  });

  it('per-account metrics count the decisions and the bookings (opted in)', async () => {
    const text = (await adminGet(stack.sidecar.adminPort, '/metrics')).body;
    expect(sample(text, 'keygate_account_decisions_total', { account: 'acct-otel', result: 'allow', code: 'OK' })).toBeGreaterThanOrEqual(5);
    expect(sample(text, 'keygate_account_decisions_total', { account: '_none', result: 'deny', code: 'INVALID_API_KEY' })).toBe(1);
    expect(sample(text, 'keygate_account_spend_micro_units_total', { account: 'acct-otel' })).toBe(9000);
    expect(sample(text, 'keygate_account_tokens_total', { account: 'acct-otel', direction: 'input' })).toBe(1120);
    expect(sample(text, 'keygate_account_tokens_total', { account: 'acct-otel', direction: 'output' })).toBe(37);
    expect(text).not.toContain(key.key);
    expect(text).not.toContain(key.id);
  });
});

describe('a real metered response (Envoy-faithful ext_proc stream into the sidecar)', () => {
  it('its booking makes the span in the request trace, the token histogram and the account\'s spend', async () => {
    // openai-chat.json at openai/*: 93 × 2.5 + 1024 × 1.25 + 46 × 10 = 1972.5 → 1973 micro-units (as test/metering-service.test.ts).
    await stack.db.hset(s.prices(), 'openai/*', encodePrice({ input: 2_500_000, output: 10_000_000, cachedInput: 1_250_000 }));
    const kc = new KeyConsole({ redis: stack.db, revealKey: `k1:${randomBytes(32).toString('base64')}` });
    const k = await kc.createKey({ account: 'acct-meter', name: 'metered' });
    await kc.creditAccount('acct-meter', 1_000_000, 'c-otel-1');
    const c = new ExtProcClient(`127.0.0.1:${stack.sidecar.grpcPort}`);
    try {
      const r = await c.exchange({
        path: '/v1/chat/completions',
        requestId: 'rid-ext-proc-1',
        requestHeaders: { traceparent: traceparent('01', 'cccccccccccccccccccccccccccccccc') },
        identity: { keyId: k.id, accountId: 'acct-meter' },
        requestBody: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
        responseHeaders: { 'content-type': 'application/json' },
        chunks: [fixture('openai-chat.json')],
      });
      expect(r.code).toBe(0);
    } finally {
      c.close();
    }
    const span = await spanOf('rid-ext-proc-1', METERED_SPAN);
    expect(span.traceId).toBe('cccccccccccccccccccccccccccccccc');
    expect(span.parentSpanId).toBe(PARENT);
    expect(span.attributes).toMatchObject({
      'keygate.account.id': 'acct-meter',
      'keygate.key.id': k.id,
      'keygate.cost.micro_units': 1973,
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.response.model': 'gpt-4o-2024-08-06',
      'gen_ai.usage.input_tokens': 1117,
      'gen_ai.usage.output_tokens': 46,
    });
    const point = () => otlp.histogramPoints.findLast((p) => p.metric === TOKEN_USAGE && p.attributes['gen_ai.response.model'] === 'gpt-4o-2024-08-06' && p.attributes['gen_ai.token.type'] === 'input');
    await waitFor('token usage of the metered response', () => point() !== undefined, 15_000);
    expect(point()).toMatchObject({ count: 1, sum: 1117 });
    const text = (await adminGet(stack.sidecar.adminPort, '/metrics')).body;
    expect(sample(text, 'keygate_account_spend_micro_units_total', { account: 'acct-meter' })).toBe(1973);
    expect(sample(text, 'keygate_account_tokens_total', { account: 'acct-meter', direction: 'output' })).toBe(46);
    for (const body of otlp.bodies) expect(body.includes(Buffer.from(k.key))).toBe(false);
  }, 30_000);
});

describe('off: nothing of OpenTelemetry is loaded', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  /** Starts a sidecar in a child process that records every module it resolves; returns the OpenTelemetry SDK ones. */
  const loaded = (settings: Record<string, unknown>) => {
    const script = `
      import { registerHooks } from 'node:module';
      const seen = [];
      registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); if (/@opentelemetry\\/(?!api\\/)|telemetry\\/otel\\.ts/.test(r.url)) seen.push(r.url); return r; } });
      const { loadConfig } = await import('./src/config.ts');
      const { startSidecar } = await import('./src/main.ts');
      const { createLogger } = await import('./src/telemetry/logger.ts');
      const sc = await startSidecar(loadConfig({ grpcPort: 0, httpPort: 0, adminPort: 0, adminHost: '127.0.0.1', drainDelayMs: 0, redisUrl: 'redis://127.0.0.1:1', ...${JSON.stringify(settings)} }, {}), createLogger('silent'));
      await sc.authorizer.check({ header: (n) => n === 'traceparent' ? '${traceparent()}' : undefined, method: 'POST', path: '/v1/chat/completions', protocol: undefined, body: undefined, bodyTruncated: false, requestId: 'r' });
      await sc.close();
      console.log(JSON.stringify(seen.map((u) => u.replace(/^.*node_modules\\//, '').replace(/^.*\\/src\\//, 'src/'))));
    `;
    const r = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8', timeout: 30_000 });
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout.trim().split('\n').pop()!) as string[];
  };

  it('without an OTLP endpoint no OpenTelemetry SDK module is resolved (a Check with a traceparent included)', () => {
    expect(loaded({})).toEqual([]);
    expect(loaded({ otlpEndpoint: 'http://127.0.0.1:1', otlpTraces: 'none', otlpMetrics: 'none' })).toEqual([]);
  }, 60_000);

  it('with one, the SDK and keygate\'s module are loaded (the check above can fail)', () => {
    const mods = loaded({ otlpEndpoint: 'http://127.0.0.1:1' });
    expect(mods.some((m) => m.startsWith('src/telemetry/otel.ts'))).toBe(true);
    expect(mods.some((m) => m.startsWith('@opentelemetry/sdk-trace/'))).toBe(true);
  }, 60_000);
});
