/**
 * The one Envoy-side ext_proc encoder (src/transport/envoy/ext-proc-envoy.ts), which the dev
 * gateway, the benches and the tests' client share, checked against Envoy's own protos: what it
 * sends decodes with protobufjs as the ext_proc filter's messages, and what it reads of a
 * ProcessingResponse is what Envoy applies.
 */
import { describe, expect, it } from 'vitest';
import { loadEnvoyProtos } from '../../proto/envoy-protos.ts';
import { exchangeMessages, immediateOf, requestBodyMutation } from '../../src/transport/envoy/ext-proc-envoy.ts';
import { encodeAnswer } from '../../src/transport/envoy/ext-proc.ts';

const def = loadEnvoyProtos(['envoy/service/ext_proc/v3/external_processor.proto']);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const Process = (def['envoy.service.ext_proc.v3.ExternalProcessor'] as any).Process;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const decode = (b: Buffer): any => Process.requestDeserialize(b);
const headers = (m: { headers: { headers: { key: string; raw_value: Buffer }[] } }) => Object.fromEntries(m.headers.headers.map((h) => [h.key, Buffer.from(h.raw_value).toString()]));

describe('the Envoy-side ext_proc encoder', () => {
  it('an exchange decodes with Envoy\'s protos: phases in order, end_of_stream, the forwarded ext_authz metadata on each, observability_mode', () => {
    const identity = { keyId: 'key_a', accountId: 'acct-1', model: 'gpt-4o', bookingId: 'b-1' };
    const msgs = exchangeMessages({
      identity,
      requestHeaders: { ':path': '/v1/chat/completions', ':method': 'POST' },
      requestBody: Buffer.from('{"model":"gpt-4o"}'),
      responseHeaders: { ':status': '200', 'content-type': 'application/json' },
      chunks: [Buffer.from('{"a":'), Buffer.from('1}')],
      observability: true,
    }).map(decode);
    expect(msgs.map((m) => Object.keys(m).find((k) => k.endsWith('_headers') || k.endsWith('_body')))).toEqual(['request_headers', 'request_body', 'response_headers', 'response_body', 'response_body']);
    expect(headers(msgs[0].request_headers)).toEqual({ ':path': '/v1/chat/completions', ':method': 'POST' });
    expect(msgs[0].request_headers.end_of_stream ?? false).toBe(false);
    expect(Buffer.from(msgs[1].request_body.body).toString()).toBe('{"model":"gpt-4o"}');
    expect(msgs[1].request_body.end_of_stream).toBe(true);
    expect(headers(msgs[2].response_headers)).toEqual({ ':status': '200', 'content-type': 'application/json' });
    expect(msgs.map((m) => m.response_body?.end_of_stream ?? false)).toEqual([false, false, false, false, true]);
    for (const m of msgs) {
      expect(m.observability_mode).toBe(true);
      const fields = m.metadata_context.filter_metadata['envoy.filters.http.ext_authz'].fields;
      expect(Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, (v as { stringValue: string }).stringValue]))).toEqual({ key_id: 'key_a', account_id: 'acct-1', model: 'gpt-4o', booking_id: 'b-1' });
    }
  });

  it('without an identity no metadata; a request without a body ends at its headers; an unsent body and a held response carry no end_of_stream', () => {
    const bare = exchangeMessages({ requestHeaders: { ':path': '/v1/models' }, responseHeaders: { ':status': '200' }, chunks: [] }).map(decode);
    expect(bare.map((m) => [m.metadata_context, m.request_headers?.end_of_stream ?? m.response_headers?.end_of_stream])).toEqual([[undefined, true], [undefined, true]]);
    const held = exchangeMessages({ requestHeaders: { ':path': '/v1/chat/completions' }, requestBody: 'unsent', responseHeaders: { ':status': '200' }, chunks: [Buffer.from('x')], complete: false }).map(decode);
    expect(held.map((m) => m.request_headers?.end_of_stream ?? m.response_headers?.end_of_stream ?? m.response_body?.end_of_stream ?? false)).toEqual([false, false, false]);
  });

  it('reads a ProcessingResponse as Envoy applies it: a body mutation, an immediate response, nothing for a continue', () => {
    const changed = encodeAnswer({ kind: 'replace-request-body', body: Buffer.from('{"x":1}'), removeContentLength: false });
    expect(requestBodyMutation(changed)?.toString()).toBe('{"x":1}');
    expect(immediateOf(changed)).toBeNull();
    const refused = encodeAnswer({ kind: 'immediate', status: 400, headers: [['content-type', 'application/json']], body: '{"error":{}}', details: 'why' });
    expect(immediateOf(refused)).toEqual({ status: 400, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"error":{}}') });
    const cont = encodeAnswer({ kind: 'continue', phase: 'request_body' });
    expect([requestBodyMutation(cont), immediateOf(cont)]).toEqual([null, null]);
  });
});
