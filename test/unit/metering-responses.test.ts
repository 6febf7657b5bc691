/**
 * OpenAI background and stored responses in the metering session (SPEC 15): a response's usage is
 * booked under a booking id of its response id (so once, whichever request carried its terminal
 * state), a queued or in-progress background answer — or one read again before it ended — books
 * and estimates nothing, and the response a `POST /responses` created is named for the owned record.
 */
import { describe, expect, it } from 'vitest';
import type { ProcessingRequest } from '../../src/transport/envoy/ext-proc.ts';
import { MeterSession, responseBookingId, type MeterOutcome } from '../../src/metering/session.ts';
import { meteredEndpoint } from '../../src/metering/usage.ts';
import { ACCOUNT, KEY_ID, meterOptions } from './metering-helpers.ts';

const msg = (m: Partial<ProcessingRequest>): ProcessingRequest => ({ phase: null, headers: null, body: null, endOfStream: false, metadata: null, observabilityMode: false, ...m });
const META = { keyId: KEY_ID, accountId: ACCOUNT, bookingId: `kb:${'a'.repeat(32)}` };

function response(id: string, status: string, o: { background?: boolean; usage?: boolean } = {}): object {
  return {
    id,
    object: 'response',
    status,
    background: o.background ?? false,
    model: 'gpt-4o',
    output: status === 'completed' ? [{ type: 'message', content: [{ type: 'output_text', text: 'done' }] }] : [],
    usage: o.usage === false || status !== 'completed' ? null : { input_tokens: 1200, input_tokens_details: { cached_tokens: 0 }, output_tokens: 1000, output_tokens_details: { reasoning_tokens: 0 } },
  };
}

async function meter(method: string, path: string, body: string, o: { sse?: boolean; cut?: boolean; requestBody?: string } = {}): Promise<MeterOutcome> {
  const s = new MeterSession(meterOptions());
  s.handle(msg({ phase: 'request_headers', headers: [':path', path, ':method', method, 'x-request-id', 'rid'], metadata: META, endOfStream: o.requestBody === undefined }));
  if (o.requestBody !== undefined) s.handle(msg({ phase: 'request_body', body: Buffer.from(o.requestBody), endOfStream: true, metadata: META }));
  s.handle(msg({ phase: 'response_headers', headers: [':status', '200', 'content-type', o.sse ? 'text/event-stream' : 'application/json'], metadata: META }));
  s.handle(msg({ phase: 'response_body', body: Buffer.from(body), endOfStream: o.cut !== true, metadata: META }));
  return s.end();
}

const sse = (...events: object[]) => events.map((e) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`).join('');

describe('background and stored responses', () => {
  it('a background create answered queued: nothing booked or estimated; the response named as the account\'s', async () => {
    const o = await meter('POST', '/v1/responses', JSON.stringify(response('resp_bg1', 'queued', { background: true })), { requestBody: '{"model":"gpt-4o","input":"a long job","background":true}' });
    expect(o).toMatchObject({ kind: 'none', reason: 'not-terminal' });
    expect(o.notes.ownedResponse).toEqual({ id: 'resp_bg1', account: ACCOUNT, keyId: KEY_ID });
  });

  it('a retrieve still in progress: nothing; completed: booked under the response\'s booking id, the same from JSON, a resumed stream or a cancel', async () => {
    expect(await meter('GET', '/v1/responses/resp_bg1', JSON.stringify(response('resp_bg1', 'in_progress', { background: true })))).toMatchObject({ kind: 'none', reason: 'not-terminal', notes: { ownedResponse: null } });
    const want = { booking_id: responseBookingId('resp_bg1'), request_id: 'rid', input_tokens: 1200, output_tokens: 1000, estimated: false };
    expect(await meter('GET', '/v1/responses/resp_bg1', JSON.stringify(response('resp_bg1', 'completed', { background: true })))).toMatchObject({ kind: 'booking', booking: want });
    const resumed = sse({ type: 'response.in_progress', response: response('resp_bg1', 'in_progress', { background: true }) }, { type: 'response.completed', response: response('resp_bg1', 'completed', { background: true }) });
    expect(await meter('GET', '/v1/responses/resp_bg1?stream=true&starting_after=3', resumed, { sse: true })).toMatchObject({ kind: 'booking', booking: want });
    expect(responseBookingId('resp_bg1')).toMatch(/^r:[0-9a-f]{64}$/);
    expect(responseBookingId('resp_bg1')).not.toBe(responseBookingId('resp_bg2'));
  });

  it('a foreground response is booked under its response id too (a later retrieve of the stored response is the same booking)', async () => {
    const o = await meter('POST', '/v1/responses', JSON.stringify(response('resp_fg', 'completed')), { requestBody: '{"model":"gpt-4o","input":"hi"}' });
    expect(o).toMatchObject({ kind: 'booking', booking: { booking_id: responseBookingId('resp_fg') }, notes: { ownedResponse: { id: 'resp_fg' } } });
  });

  it('a foreground stream cut while in progress is still booked, estimated (the work was served); a background one is not', async () => {
    const cut = sse({ type: 'response.created', response: response('resp_cut', 'in_progress') }, { type: 'response.output_text.delta', delta: 'Once upon a time' });
    expect(await meter('POST', '/v1/responses', cut, { sse: true, cut: true, requestBody: '{"model":"gpt-4o","input":"tell a story","stream":true}' })).toMatchObject({ kind: 'booking', booking: { booking_id: responseBookingId('resp_cut'), estimated: true } });
    const bg = sse({ type: 'response.created', response: response('resp_cut2', 'queued', { background: true }) });
    expect(await meter('POST', '/v1/responses', bg, { sse: true, cut: true, requestBody: '{"model":"gpt-4o","input":"x","stream":true,"background":true}' })).toMatchObject({ kind: 'none', reason: 'not-terminal' });
  });

  it('paths: retrieve and cancel carry the id; input_tokens, input_items and other ids are not response reads', () => {
    expect(meteredEndpoint('/v1/responses/resp_1')).toMatchObject({ kind: 'responses', responseId: 'resp_1' });
    expect(meteredEndpoint('/openai/v1/responses/resp_1/cancel?x=1')).toMatchObject({ kind: 'responses', responseId: 'resp_1' });
    expect(meteredEndpoint('/v1/responses/input_tokens')).toBeNull();
    expect(meteredEndpoint('/v1/responses/resp_1/input_items')).toBeNull();
    expect(meteredEndpoint('/v1/responses/a%20b')).toBeNull();
    expect(meteredEndpoint('/v1/responses')).toMatchObject({ kind: 'responses', responseId: null });
  });
});
