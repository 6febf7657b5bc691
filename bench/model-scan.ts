/**
 * The top-level `model` scanner (src/core/model/json-scan.ts) against `JSON.parse` (with the UTF-8
 * decode it needs), on 1 KiB, 64 KiB, 1 MiB and 8 MiB bodies with `model` first and last, in two
 * shapes: one long string (a chat message or base64 image data) and many small structured
 * messages (escapes, numbers, nesting). Prints a markdown table (median of repeated runs).
 *
 *   scripts/node bench/model-scan.ts            about 20 s
 *   scripts/node bench/model-scan.ts --quick    a few seconds, indicative only
 */
import { parseArgs } from 'node:util';
import { scanJsonModel } from '../src/core/model/json-scan.ts';
import { chatBody } from './lib/bodies.ts';

const { values: opt } = parseArgs({ options: { quick: { type: 'boolean', default: false } } });
const MODEL = 'openai/gpt-4o-mini';
const SIZES: Array<[string, number]> = [
  ['1 KiB', 1024],
  ['64 KiB', 64 * 1024],
  ['1 MiB', 1024 * 1024],
  ['8 MiB', 8 * 1024 * 1024],
];

/** Many small messages: escapes, non-ASCII, numbers, nested objects. */
function structuredBody(size: number, where: 'first' | 'last'): Buffer {
  const msg = JSON.stringify({ role: 'user', content: [{ type: 'text', text: 'Line one\nline "two" é 😀\ttab' }], meta: { n: [1, -2.5e3, true, null] } });
  const head = where === 'first' ? `{"model":"${MODEL}","messages":[` : '{"messages":[';
  const tail = where === 'first' ? '],"stream":true}' : `],"stream":true,"model":"${MODEL}"}`;
  const count = Math.max(1, Math.floor((size - head.length - tail.length) / (msg.length + 1)));
  return Buffer.from(head + Array(count).fill(msg).join(',') + tail);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Median milliseconds of `fn` over runs lasting about `budgetMs` in total (at least 5 runs). */
function time(fn: () => unknown, budgetMs: number): number {
  for (let k = 0; k < 3; k++) fn(); // warm up
  const runs: number[] = [];
  const start = performance.now();
  while (runs.length < 5 || (performance.now() - start < budgetMs && runs.length < 10_000)) {
    const t = performance.now();
    fn();
    runs.push(performance.now() - t);
  }
  return median(runs);
}

const fmt = (ms: number) => (ms < 0.1 ? `${(ms * 1000).toFixed(1)} µs` : `${ms.toFixed(2)} ms`);
const budget = opt.quick ? 60 : 400;

const rows: string[] = [
  '| shape | size | model | scanner | scanner MB/s | JSON.parse | parse / scanner |',
  '|---|---|---|---|---|---|---|',
];
for (const [shape, build] of [
  ['one long string', (n: number, w: 'first' | 'last') => chatBody(n, MODEL, w)],
  ['structured', structuredBody],
] as const) {
  for (const [label, size] of SIZES) {
    for (const where of ['first', 'last'] as const) {
      const body = build(size, where);
      const r = scanJsonModel(body);
      if (r.kind !== 'model' || r.model !== MODEL || JSON.parse(body.toString('utf8')).model !== MODEL) {
        throw new Error(`bench body ${shape} ${label} ${where} did not read: ${JSON.stringify(r)}`);
      }
      const scan = time(() => scanJsonModel(body), budget);
      const parse = time(() => JSON.parse(body.toString('utf8')).model, budget);
      rows.push(
        `| ${shape} | ${label} | ${where} | ${fmt(scan)} | ${(body.length / 1e6 / (scan / 1000)).toFixed(0)} | ${fmt(parse)} | ${(parse / scan).toFixed(1)}x |`,
      );
    }
  }
}
console.log(rows.join('\n'));
console.log(
  '\nThe scanner validates the whole body either way (a later duplicate or a syntax error must refuse), so `first` and `last` cost the same; it allocates nothing for nested values.',
);
