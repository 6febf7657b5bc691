/** The parent of a Check's span from hostile `traceparent` / `tracestate` values: valid ones join the trace, anything else is no parent. */
import { trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { parentContext } from '../../src/telemetry/otel.ts';

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('parentContext', () => {
  it('joins a valid traceparent: trace id, parent span id, sampled flag, tracestate', () => {
    const sc = trace.getSpanContext(parentContext(TP, 'envoy=abc,vendor=1')!)!;
    expect(sc).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: true });
    expect(sc.traceState?.get('envoy')).toBe('abc');
    expect(trace.getSpanContext(parentContext(TP.replace(/01$/, '00'), undefined)!)!.traceFlags).toBe(0);
  });

  it.each([
    ['absent', undefined],
    ['repeated (an array)', [TP, TP]],
    ['joined repeats', `${TP},${TP}`],
    ['garbage', 'not-a-traceparent'],
    ['all-zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`],
    ['all-zero span id', `00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`],
    ['version ff', TP.replace(/^00/, 'ff')],
    ['upper-case hex', TP.toUpperCase()],
    ['very long', `${TP}-${'a'.repeat(100_000)}`],
    ['a number', 42],
  ])('%s → no parent', (_what, value) => {
    expect(parentContext(value, 'x=1')).toBeNull();
  });

  it('ignores an oversized or malformed tracestate but keeps the parent', () => {
    const big = parentContext(TP, `a=${'b'.repeat(10_000)}`)!;
    expect(trace.getSpanContext(big)!.traceState).toBeUndefined();
    const odd = parentContext(TP, '===,,,=;')!;
    expect(trace.getSpanContext(odd)!.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  });
});
