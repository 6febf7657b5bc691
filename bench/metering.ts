/**
 * CPU of metering one response through the ext_proc codec and a MeterSession (the pure core: no
 * gRPC transport, no Redis): a 2 KiB JSON chat completion (one body message), and a streamed chat
 * completion of 300 SSE events sent as 300 body messages (as Envoy streams an upstream that flushes
 * every event), each plain and gzip-encoded. Every message is decoded from its protobuf bytes and
 * answered with its encoded ProcessingResponse, as the service will. Prints a markdown table: CPU
 * µs per metered response (process.cpuUsage, user + system, median of rounds).
 *
 *   scripts/node bench/metering.ts            about 15 s
 *   scripts/node bench/metering.ts --quick    a few seconds, indicative only
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as zlib from 'node:zlib';
import { DEFAULT_METER_OPTIONS, MeterSession } from '../src/metering/session.ts';
import { decodeProcessingRequest, encodeAnswer } from '../src/transport/envoy/ext-proc.ts';
import { exchangeMessages } from '../src/transport/envoy/ext-proc-envoy.ts';

const { values: opt } = parseArgs({ options: { quick: { type: 'boolean', default: false } } });
const FIX = join(import.meta.dirname, '..', 'test', 'fixtures', 'metering');

const identity = { keyId: 'key_0123456789abcdefABCD', accountId: 'acct-demo', model: 'gpt-4o-mini' };

function messages(type: string, chunks: Buffer[], encoding?: string): Buffer[] {
  const reqHeaders = { ':path': '/v1/chat/completions', ':method': 'POST', 'x-request-id': '6b6f1ac8-2f0e-4c6e-9a51-2d1a8c3f0b7e', 'content-type': 'application/json', 'x-keygate-key-id': 'key_0123456789abcdefABCD', 'x-keygate-account-id': 'acct-demo' };
  const resHeaders: Record<string, string> = { ':status': '200', 'content-type': type, date: 'Tue, 24 Nov 2026 23:00:00 GMT', 'x-request-id': 'abc' };
  if (encoding) resHeaders['content-encoding'] = encoding;
  return exchangeMessages({ identity, requestHeaders: reqHeaders, requestBody: 'unsent', responseHeaders: resHeaders, chunks });
}

// a 2 KiB chat completion: the recorded one with a longer answer
const chat = JSON.parse(readFileSync(join(FIX, 'openai-chat.json'), 'utf8'));
const base = Buffer.byteLength(JSON.stringify(chat, null, 2));
chat.choices[0].message.content += ' Lorem ipsum dolor sit amet, consectetur.'.repeat(Math.ceil((2048 - base) / 42)).slice(0, 2048 - base);
const json2k = Buffer.from(JSON.stringify(chat, null, 2));

const sse = readFileSync(join(FIX, 'openai-chat-stream-300.sse'));
const events: Buffer[] = [];
for (let i = 0; i < sse.length; ) {
  const j = sse.indexOf('\n\n', i);
  events.push(sse.subarray(i, j + 2));
  i = j + 2;
}

/** The stream gzip-compressed once, cut into as many body messages as there were events. */
function gzipChunks(chunks: Buffer[]): Buffer[] {
  const whole = zlib.gzipSync(Buffer.concat(chunks));
  const per = Math.ceil(whole.length / chunks.length);
  const parts: Buffer[] = [];
  for (let i = 0; i < whole.length; i += per) parts.push(whole.subarray(i, i + per));
  return parts;
}

const CASES: Array<[string, Buffer[], number]> = [
  [`2 KiB JSON (${json2k.length} B, 1 body message)`, messages('application/json', [json2k]), 1],
  [`300 SSE events (${sse.length} B, ${events.length} body messages)`, messages('text/event-stream', events), events.length],
  ['2 KiB JSON, gzip', messages('application/json', [zlib.gzipSync(json2k)], 'gzip'), 1],
  [`300 SSE events, gzip (${events.length} body messages)`, messages('text/event-stream', gzipChunks(events), 'gzip'), events.length],
];

let n = 0;
async function once(msgs: Buffer[]): Promise<number> {
  const s = new MeterSession({ ...DEFAULT_METER_OPTIONS, newRequestId: () => `m:${++n}` });
  let bytes = 0;
  for (const m of msgs) {
    const step = s.handle(decodeProcessingRequest(m, { metadata: s.wantsMetadata }));
    bytes += step.reply === null ? 0 : encodeAnswer(step.reply).length;
  }
  const o = await s.end();
  if (o.kind !== 'booking' || o.booking.estimated) throw new Error('benchmark response not metered exactly');
  return bytes;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const rounds = opt.quick ? 3 : 7;
const perRound = opt.quick ? 300 : 1500;
const rows = ['| response | CPU µs per metered response | µs per body message |', '|---|---|---|'];
for (const [name, msgs, bodyMessages] of CASES) {
  for (let i = 0; i < 200; i++) await once(msgs); // warm-up
  const results: number[] = [];
  const reps = name.startsWith('300') ? Math.max(30, perRound / 10) : perRound;
  for (let r = 0; r < rounds; r++) {
    const t = process.cpuUsage();
    for (let i = 0; i < reps; i++) await once(msgs);
    const d = process.cpuUsage(t);
    results.push((d.user + d.system) / reps);
  }
  const us = median(results);
  rows.push(`| ${name} | ${us.toFixed(1)} | ${(us / (bodyMessages + 2)).toFixed(2)} |`);
}
console.log(`Metering CPU (codec + MeterSession, no transport), Node ${process.version}, median of ${rounds} rounds:\n`);
console.log(rows.join('\n'));
