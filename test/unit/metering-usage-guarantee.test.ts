/**
 * Usage cannot be switched off by the client (SPEC 15): every streamed OpenAI chat or completions
 * request body that metering gets is answered either with a body that asks for usage whichever JSON
 * reader the upstream uses (the first or the last of a repeated key wins; "true" and 1 taken as
 * true), or with an immediate 400 `USAGE_NOT_GUARANTEED` in OpenAI's error shape naming why — never
 * passed on unchanged while a reader could see a stream without usage. The red-team bodies:
 * `stream_options` twice, `include_usage` twice, `stream` twice, padding past 4 MiB with
 * whitespace, a body in parts, lax booleans, not JSON.
 */
import { describe, expect, it } from 'vitest';
import { encodeAnswer } from '../../src/transport/envoy/ext-proc.ts';
import { continueAnswer, type MeterAnswer, type ProcessingRequest } from '../../src/metering/messages.ts';
import { MeterSession } from '../../src/metering/session.ts';
import { loadEnvoyProtos } from '../../proto/envoy-protos.ts';
import { ACCOUNT, KEY_ID, meterOptions } from './metering-helpers.ts';

const def = loadEnvoyProtos(['envoy/service/ext_proc/v3/external_processor.proto']);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const decode = (a: MeterAnswer): any => (def['envoy.service.ext_proc.v3.ExternalProcessor'] as any).Process.responseDeserialize(encodeAnswer(a));

const msg = (m: Partial<ProcessingRequest>): ProcessingRequest => ({ phase: null, headers: null, body: null, endOfStream: false, metadata: null, observabilityMode: false, ...m });

/** The answer to the request body (sent in `parts`), as Envoy decodes it, and whether the stream may end. */
function answerTo(parts: Buffer[], path = '/v1/chat/completions') {
  const s = new MeterSession(meterOptions());
  s.handle(msg({ phase: 'request_headers', headers: [':path', path, ':method', 'POST', 'x-request-id', 'rid-1', 'x-keygate-key-id', KEY_ID, 'x-keygate-account-id', ACCOUNT] }));
  const steps = parts.map((p, i) => s.handle(msg({ phase: 'request_body', body: p, endOfStream: i === parts.length - 1 })));
  return { steps, last: steps.find((st) => st.reply !== continueAnswer('request_body')) ?? steps[steps.length - 1]!, session: s };
}

/** A JSON reader where the first of a repeated key wins (as some upstreams parse). */
function firstWins(text: string): unknown {
  let i = 0;
  const ws = () => {
    while (/\s/.test(text[i] ?? '')) i++;
  };
  const value = (): unknown => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const o: Record<string, unknown> = {};
      ws();
      if (text[i] === '}') return i++, o;
      for (;;) {
        ws();
        const k = value() as string;
        ws();
        i++; // :
        const v = value();
        if (!Object.hasOwn(o, k)) o[k] = v;
        ws();
        if (text[i++] === '}') return o;
      }
    }
    if (c === '[') {
      i++;
      const a: unknown[] = [];
      ws();
      if (text[i] === ']') return i++, a;
      for (;;) {
        a.push(value());
        ws();
        if (text[i++] === ']') return a;
      }
    }
    const m = /^("(?:[^"\\]|\\.)*"|-?[\d.eE+-]+|true|false|null)/.exec(text.slice(i))!;
    i += m[0].length;
    return JSON.parse(m[0]);
  };
  return value();
}

/** Whether a reader's view of a body is a stream that does not ask for usage (lax booleans). */
const silentStream = (o: unknown): boolean => {
  const r = o as { stream?: unknown; stream_options?: { include_usage?: unknown } };
  const lax = (v: unknown) => v === true || v === 'true' || v === 1 || v === 'True' || v === '1';
  return lax(r.stream) && !(r.stream_options?.include_usage === true);
};

const PAD = ' '.repeat(5 * 1024 * 1024);
const BODIES: Array<[string, string | Buffer]> = [
  ['stream_options twice', '{"model":"o3-mini","stream":true,"stream_options":{"include_usage":false},"stream_options":{"include_usage":false},"messages":[]}'],
  ['stream_options twice, the second asking', '{"model":"o3-mini","stream":true,"stream_options":{"include_usage":false},"stream_options":{"include_usage":true},"messages":[]}'],
  ['include_usage twice, the last true', '{"model":"o3-mini","stream":true,"stream_options":{"include_usage":false,"include_usage":true},"messages":[]}'],
  ['include_usage twice, the first true', '{"model":"o3-mini","stream":true,"stream_options":{"include_usage":true,"include_usage":false},"messages":[]}'],
  ['stream twice, the last false', '{"model":"o3-mini","stream":true,"stream":false,"messages":[]}'],
  ['stream twice, the first false', '{"model":"o3-mini","stream":false,"stream":true,"messages":[]}'],
  ['stream as a string', '{"model":"o3-mini","stream":"true","messages":[]}'],
  ['stream as 1', '{"model":"o3-mini","stream":1,"messages":[]}'],
  ['padding past 4 MiB with whitespace', `{"model":"o3-mini","stream":true,${PAD}"messages":[]}`],
  ['padding past 4 MiB inside stream_options', `{"model":"o3-mini","stream":true,"stream_options":{${PAD}"include_usage":false},"messages":[]}`],
  ['a trailing comma (not JSON)', '{"model":"o3-mini","stream":true,"messages":[],}'],
  ['a byte-order mark', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"model":"o3-mini","stream":true}')])],
  ['nested repeated keys (harmless)', '{"model":"o3-mini","stream":true,"messages":[{"role":"user","role":"user","content":"x"}]}'],
];

describe('whatever the body, the upstream is asked for usage or the request is refused', () => {
  it.each(BODIES)('%s', (_name, body) => {
    const { last } = answerTo([Buffer.from(body)]);
    const a = decode(last.reply!);
    if (a.immediate_response) {
      expect(a.immediate_response.status.code).toBe(400);
      const err = JSON.parse(Buffer.from(a.immediate_response.body).toString()).error;
      expect(err).toMatchObject({ type: 'invalid_request_error', code: 'USAGE_NOT_GUARANTEED' });
      expect(err.message.length).toBeGreaterThan(20);
      const headers = Object.fromEntries(a.immediate_response.headers.set_headers.map((h: { header: { key: string; raw_value: Buffer } }) => [h.header.key, Buffer.from(h.header.raw_value).toString()]));
      expect(headers).toMatchObject({ 'content-type': 'application/json', 'x-should-retry': 'false', 'x-request-id': 'rid-1' });
      expect(last.close).toBe(true);
      return;
    }
    const sent = a.request_body?.response?.body_mutation?.body ? Buffer.from(a.request_body.response.body_mutation.body).toString() : Buffer.from(body).toString();
    expect(silentStream(JSON.parse(sent)), 'last key wins').toBe(false);
    expect(silentStream(firstWins(sent)), 'first key wins').toBe(false);
  });

  it('the refusals say why', () => {
    const why = (b: string | Buffer, parts?: Buffer[]) => {
      const { last } = answerTo(parts ?? [Buffer.from(b)]);
      return JSON.parse(Buffer.from(decode(last.reply!).immediate_response.body).toString()).error.message as string;
    };
    expect(why('{"stream":true,"stream_options":{},"stream_options":{}}')).toMatch(/"stream_options" more than once/);
    expect(why('{"stream":true,"stream":false}')).toMatch(/"stream" more than once/);
    expect(why('{"stream":true,}')).toMatch(/not valid UTF-8 JSON/);
    expect(why(Buffer.alloc(17 * 1024 * 1024, 0x20))).toMatch(/larger than the 16 MiB/);
    expect(why('', [Buffer.from('{"stream":true,'), Buffer.from('"model":"m"}')])).toMatch(/in parts/);
  });

  it('a body in parts is refused at its first part (the completions endpoint too); nothing is booked', async () => {
    const { steps, session } = answerTo([Buffer.from('{"model":"gpt-3.5-turbo-instruct","stream":true,'), Buffer.from('"prompt":"x"}')], '/v1/completions');
    expect(decode(steps[0]!.reply!).immediate_response.status.code).toBe(400);
    expect(steps[0]!.close).toBe(true);
    expect(await session.end()).toMatchObject({ kind: 'none', reason: 'usage-not-guaranteed' });
  });

  it('not streamed, in one piece: left alone (a non-streamed answer always carries its usage)', () => {
    for (const b of ['{"model":"m","messages":[]}', '{"model":"m","stream":false}', '{"model":"m","stream":null}']) {
      expect(answerTo([Buffer.from(b)]).last.reply).toBe(continueAnswer('request_body'));
    }
  });
});
