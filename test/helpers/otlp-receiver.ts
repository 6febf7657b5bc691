/**
 * An OTLP/HTTP receiver on loopback for tests: accepts protobuf export requests on `/v1/traces` and
 * `/v1/metrics` (as an OpenTelemetry Collector does), decodes them with protobufjs against the
 * OTLP messages (the fields tests read, with their numbers from opentelemetry-proto), and keeps the
 * spans, the metric data points and the raw bodies (to search them for what must never be sent).
 */
import { createServer, type Server } from 'node:http';
import protobuf from 'protobufjs';

const OTLP = `
syntax = "proto3";
package otlp;
message AnyValue { oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; bytes bytes_value = 7; } }
message KeyValue { string key = 1; AnyValue value = 2; }
message Resource { repeated KeyValue attributes = 1; }
message InstrumentationScope { string name = 1; string version = 2; }
message Status { string message = 2; int32 code = 3; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4; string name = 5; int32 kind = 6;
  fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9; Status status = 15;
}
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message HistogramDataPoint {
  fixed64 start_time_unix_nano = 2; fixed64 time_unix_nano = 3; fixed64 count = 4; double sum = 5;
  repeated fixed64 bucket_counts = 6; repeated double explicit_bounds = 7; repeated KeyValue attributes = 9;
}
message Histogram { repeated HistogramDataPoint data_points = 1; int32 aggregation_temporality = 2; }
message Metric { string name = 1; string description = 2; string unit = 3; Histogram histogram = 9; }
message ScopeMetrics { InstrumentationScope scope = 1; repeated Metric metrics = 2; }
message ResourceMetrics { Resource resource = 1; repeated ScopeMetrics scope_metrics = 2; }
message ExportMetricsServiceRequest { repeated ResourceMetrics resource_metrics = 1; }
`;
const root = protobuf.parse(OTLP, { keepCase: true }).root;
const TraceRequest = root.lookupType('otlp.ExportTraceServiceRequest');
const MetricsRequest = root.lookupType('otlp.ExportMetricsServiceRequest');

export type AttrValue = string | number | boolean;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttrValue>;
  resource: Record<string, AttrValue>;
  status: { code: number; message: string };
}

export interface ReceivedHistogramPoint {
  metric: string;
  unit: string;
  count: number;
  sum: number;
  bounds: number[];
  attributes: Record<string, AttrValue>;
}

export interface OtlpReceiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  readonly histogramPoints: ReceivedHistogramPoint[];
  /** Every request body received, undecoded. */
  readonly bodies: Buffer[];
  /** Requests by path and content type, e.g. `POST /v1/traces application/x-protobuf`. */
  readonly requests: string[];
  close(): Promise<void>;
}

const hex = (b: Uint8Array | undefined) => Buffer.from(b ?? []).toString('hex');
const longNum = (v: unknown): number => (typeof v === 'number' ? v : v && typeof v === 'object' && 'toNumber' in v ? (v as { toNumber(): number }).toNumber() : Number(v ?? 0));
const longBig = (v: unknown): bigint => (v && typeof v === 'object' && 'low' in v ? (BigInt((v as any).high >>> 0) << 32n) | BigInt((v as any).low >>> 0) : BigInt((v as number) ?? 0));

function attrs(list: any[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of list ?? []) {
    const v = kv.value ?? {};
    out[kv.key] = v.string_value ?? v.bool_value ?? (v.int_value !== undefined ? longNum(v.int_value) : undefined) ?? v.double_value ?? '';
  }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const histogramPoints: ReceivedHistogramPoint[] = [];
  const bodies: Buffer[] = [];
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 16 * 1024 * 1024) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      bodies.push(body);
      requests.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
      try {
        if (req.url === '/v1/traces') {
          const msg = TraceRequest.toObject(TraceRequest.decode(body), { longs: Object, bytes: Uint8Array }) as any;
          for (const rs of msg.resource_spans ?? []) {
            const resource = attrs(rs.resource?.attributes);
            for (const ss of rs.scope_spans ?? [])
              for (const s of ss.spans ?? [])
                spans.push({
                  traceId: hex(s.trace_id),
                  spanId: hex(s.span_id),
                  parentSpanId: hex(s.parent_span_id),
                  name: s.name,
                  kind: s.kind ?? 0,
                  startNs: longBig(s.start_time_unix_nano),
                  endNs: longBig(s.end_time_unix_nano),
                  attributes: attrs(s.attributes),
                  resource,
                  status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
                });
          }
        } else if (req.url === '/v1/metrics') {
          const msg = MetricsRequest.toObject(MetricsRequest.decode(body), { longs: Object, bytes: Uint8Array }) as any;
          for (const rm of msg.resource_metrics ?? [])
            for (const sm of rm.scope_metrics ?? [])
              for (const m of sm.metrics ?? [])
                for (const p of m.histogram?.data_points ?? [])
                  histogramPoints.push({ metric: m.name, unit: m.unit, count: longNum(p.count), sum: p.sum ?? 0, bounds: p.explicit_bounds ?? [], attributes: attrs(p.attributes) });
        } else {
          res.writeHead(404).end();
          return;
        }
      } catch {
        res.writeHead(400).end();
        return;
      }
      // An empty Export…ServiceResponse: full success.
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    histogramPoints,
    bodies,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
