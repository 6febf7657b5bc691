/**
 * OpenTelemetry export over OTLP/HTTP (protobuf): a span per Check and per metered response, joined
 * to the proxy's trace through the W3C `traceparent` it forwards, and the GenAI token-usage
 * histogram (`gen_ai.client.token.usage`) fed from bookings.
 *
 * Loaded only when export is configured (`main.ts` imports this module dynamically): without
 * `OTEL_EXPORTER_OTLP_ENDPOINT`, no OpenTelemetry SDK module is loaded and nothing here is on the
 * decision path. When on, a Check's span is made after its answer is decided, from the observer
 * (the decision never waits for it); spans leave in batches (BatchSpanProcessor: bounded queue,
 * spans past it dropped, never blocking), metrics every `OTEL_METRIC_EXPORT_INTERVAL`.
 *
 * What a span carries: decision, code, family, request id, account id and key id when known, the
 * model when read; never a key. A Check with no valid `traceparent` gets a span only with a
 * probability of `KEYGATE_TRACE_UNPARENTED_RATIO` (default 0: the proxy's sampling decides, and a
 * proxy that does not trace costs one header lookup per Check). A `traceparent` whose sampled flag
 * is off gives a non-recording span (not exported).
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Histogram } from '@opentelemetry/api';
import { parseTraceParent, TraceState } from '@opentelemetry/core';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import type { CheckOutcome, DecisionObserver, CheckInput } from '../authorizer.ts';
import { familyModule } from '../core/families/index.ts';
import type { MeteredObserver, MeteredOperation, MeteredResponse } from './metered.ts';

export interface OtelOptions {
  /** OTLP/HTTP base URL; traces go to `<endpoint>/v1/traces`, metrics to `<endpoint>/v1/metrics`. */
  readonly endpoint: string;
  readonly traces: boolean;
  readonly metrics: boolean;
  readonly serviceName: string;
  readonly version: string;
  /** Probability of a span for a Check without a valid traceparent. */
  readonly unparentedRatio: number;
  readonly metricsIntervalMs: number;
}

export interface Otel {
  /** The span per Check (null when traces are off). */
  readonly decisionObserver: DecisionObserver | null;
  /** The span per metered response and the GenAI token histogram. */
  readonly meteredObserver: MeteredObserver;
  /** Flushes what is pending and stops; bounded by `timeoutMs`. */
  shutdown(timeoutMs?: number): Promise<void>;
}

export const CHECK_SPAN = 'keygate.check';
export const METERED_SPAN = 'keygate.metered_response';
export const TOKEN_USAGE = 'gen_ai.client.token.usage';
/** The bucket boundaries the GenAI conventions give for token usage. */
export const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
/** Distinct model names kept as attribute values of the token histogram; later ones are `_other`. */
export const MAX_MODELS = 200;

/** `gen_ai.operation.name` of a metered endpoint. */
const OPERATION: Record<MeteredOperation, string> = {
  chat: 'chat',
  responses: 'chat',
  messages: 'chat',
  completions: 'text_completion',
  embeddings: 'embeddings',
  generate: 'generate_content',
  'stream-generate': 'generate_content',
  // no predefined GenAI operation for these: the generic multimodal one
  images: 'generate_content',
  audio: 'generate_content',
};

/** The parent context of a `traceparent` (and `tracestate`) header, or null when absent or invalid. */
export function parentContext(traceparent: unknown, tracestate: unknown): Context | null {
  if (typeof traceparent !== 'string' || traceparent.length > 128) return null;
  const sc = parseTraceParent(traceparent);
  if (sc === null) return null;
  sc.isRemote = true; // from the proxy's process, as the W3C propagator marks an extracted context
  if (typeof tracestate === 'string' && tracestate.length > 0 && tracestate.length <= 512) sc.traceState = new TraceState(tracestate);
  return trace.setSpanContext(ROOT_CONTEXT, sc);
}

/** Wall-clock milliseconds now, with sub-millisecond precision. */
const nowMs = () => performance.timeOrigin + performance.now();

export function startOtel(o: OtelOptions, log: Logger): Otel {
  const base = o.endpoint.replace(/\/+$/, '');
  const resource = detectResources({ detectors: [envDetector] }).merge(resourceFromAttributes({ 'service.name': o.serviceName, 'service.version': o.version }));

  let tracerProvider: TracerProvider | null = null;
  let decisionObserver: DecisionObserver | null = null;
  let meteredSpan: MeteredObserver = () => {};
  if (o.traces) {
    tracerProvider = new TracerProvider({
      resource,
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(o.unparentedRatio) }),
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${base}/v1/traces` }), maxQueueSize: 8192, maxExportBatchSize: 512, scheduledDelayMillis: 1000 })],
    });
    const tracer = tracerProvider.getTracer('keygate', o.version);
    const unparented = o.unparentedRatio > 0;

    const checkSpan = (outcome: CheckOutcome, input: CheckInput, startedAt: bigint) => {
      let parent = parentContext(input.header('traceparent'), input.header('tracestate'));
      if (parent === null) {
        if (!unparented) return;
        parent = ROOT_CONTEXT;
      }
      const end = nowMs();
      const start = end - Number(process.hrtime.bigint() - startedAt) / 1e6;
      const d = outcome.decision;
      const attributes: Attributes = {
        'keygate.decision': d.allow ? 'allow' : 'deny',
        'keygate.code': d.allow ? 'OK' : d.code,
        'keygate.family': outcome.family,
        'keygate.request.id': outcome.requestId,
      };
      if (outcome.accountId !== undefined) attributes['keygate.account.id'] = outcome.accountId;
      const keyId = d.keyId;
      if (keyId !== undefined) attributes['keygate.key.id'] = keyId;
      if (d.allow && d.model !== null) attributes['keygate.model'] = d.model;
      const span = tracer.startSpan(CHECK_SPAN, { kind: SpanKind.SERVER, startTime: start, attributes }, parent);
      if (!d.allow && d.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: d.code });
      span.end(end);
    };
    decisionObserver = (outcome, input, startedAt) => {
      try {
        checkSpan(outcome, input, startedAt);
      } catch (err) {
        log.warn({ err: { message: (err as Error)?.message } }, 'OpenTelemetry: a Check span was not recorded');
      }
    };

    meteredSpan = (m: MeteredResponse) => {
      const parent = parentContext(m.traceparent, m.tracestate);
      if (parent === null && !unparented) return;
      const attributes: Attributes = {
        'keygate.request.id': m.requestId,
        'keygate.account.id': m.accountId,
        'keygate.key.id': m.keyId,
        'keygate.family': m.family,
        'keygate.cost.micro_units': m.costMicros,
        'gen_ai.operation.name': OPERATION[m.operation],
        'gen_ai.provider.name': familyModule(m.family).providerName,
        'gen_ai.usage.input_tokens': m.inputTokens,
        'gen_ai.usage.output_tokens': m.outputTokens,
      };
      if (m.requestModel !== null) attributes['gen_ai.request.model'] = m.requestModel;
      if (m.responseModel !== null) attributes['gen_ai.response.model'] = m.responseModel;
      tracer.startSpan(METERED_SPAN, { kind: SpanKind.SERVER, startTime: m.startedAtMs, attributes }, parent ?? ROOT_CONTEXT).end(m.endedAtMs);
    };
  }

  let meterProvider: MeterProvider | null = null;
  let tokenUsage: MeteredObserver = () => {};
  if (o.metrics) {
    meterProvider = new MeterProvider({
      resource,
      readers: [new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter({ url: `${base}/v1/metrics` }), exportIntervalMillis: o.metricsIntervalMs, exportTimeoutMillis: Math.min(30_000, o.metricsIntervalMs) })],
    });
    const histogram: Histogram = meterProvider.getMeter('keygate', o.version).createHistogram(TOKEN_USAGE, {
      unit: '{token}',
      description: 'Number of input and output tokens used, per metered response.',
      advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
    });
    const models = new Set<string>();
    const model = (name: string | null): string | undefined => {
      if (name === null) return undefined;
      if (models.has(name)) return name;
      if (models.size >= MAX_MODELS) return '_other';
      models.add(name);
      return name;
    };
    tokenUsage = (m: MeteredResponse) => {
      const attributes: Attributes = { 'gen_ai.operation.name': OPERATION[m.operation], 'gen_ai.provider.name': familyModule(m.family).providerName };
      const req = model(m.requestModel);
      const res = model(m.responseModel);
      if (req !== undefined) attributes['gen_ai.request.model'] = req;
      if (res !== undefined) attributes['gen_ai.response.model'] = res;
      histogram.record(m.inputTokens, { ...attributes, 'gen_ai.token.type': 'input' });
      histogram.record(m.outputTokens, { ...attributes, 'gen_ai.token.type': 'output' });
    };
  }

  log.info({ traces: o.traces, metrics: o.metrics }, 'OpenTelemetry export over OTLP/HTTP on');
  return {
    decisionObserver,
    meteredObserver: (m) => {
      try {
        meteredSpan(m);
        tokenUsage(m);
      } catch (err) {
        log.warn({ err: { message: (err as Error)?.message } }, 'OpenTelemetry: a metered response was not recorded');
      }
    },
    async shutdown(timeoutMs = 2000) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)));
      const done = Promise.allSettled([tracerProvider?.shutdown(), meterProvider?.shutdown()]).then(() => undefined);
      await Promise.race([done, bound]);
      clearTimeout(timer);
    },
  };
}
