/**
 * The metering readers' own work, in process, without sockets or sessions: what the sidecar spends
 * reading a response body for its usage. Two cases, each read by a new reader per response as a
 * stream does:
 * - `sse`: the recorded 300-event streamed chat completion (test/fixtures/metering), through the
 *   SSE reader into the JSON reader, as one write per event (as ext_proc delivers them); µs per event;
 * - `json`: the 2 KiB chat completion the ext_proc bench sends (bench/lib/ext-proc.ts `json2k`); µs
 *   per response.
 *
 *   scripts/node bench/metering-parts.ts [--baseline DIR] [--rounds 5] [--out FILE]
 *
 * With `--baseline DIR` (another checkout) the same loops run on that tree's modules; every round
 * runs each tree in its own child process (a fresh JIT each), the order alternating, and each
 * figure is the median over the rounds with its min and max. Writes markdown to --out (default
 * bench/results/<date>-metering-parts.md).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { treeCommit } from './lib/common.ts';
import { json2k } from './lib/ext-proc.ts';

const { values: opt } = parseArgs({
  options: {
    baseline: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    out: { type: 'string' },
    /** Internal: run one tree's loops in this process and print JSON. */
    child: { type: 'string' },
  },
});

const FIX = join(import.meta.dirname, '..', 'test', 'fixtures', 'metering', 'openai-chat-stream-300.sse');

interface Figures {
  sseEvent: number;
  json2k: number;
}

async function measure(tree: string): Promise<Figures> {
  const { JsonReader } = await import(join(tree, 'src/metering/json-reader.ts'));
  const { SseReader } = await import(join(tree, 'src/metering/sse.ts'));
  const { responseSchema } = await import(join(tree, 'src/metering/usage.ts'));
  const sse = readFileSync(FIX);
  const events: Buffer[] = [];
  for (let i = 0; i < sse.length; ) {
    const j = sse.indexOf('\n\n', i);
    if (j === -1) break;
    events.push(Buffer.from(sse.subarray(i, j + 2)));
    i = j + 2;
  }
  const body = json2k();
  let records = 0;
  const onRecord = () => void records++;
  const stream = () => {
    const reader = new JsonReader(responseSchema('chat'), onRecord);
    const s = new SseReader({ begin: () => reader.reset(), data: (b: Uint8Array, a: number, e: number) => reader.write(b, a, e), end: () => {}, oversized: () => reader.reset() }, 1 << 20);
    for (const e of events) s.write(e);
  };
  const json = () => new JsonReader(responseSchema('chat'), onRecord).write(body);
  const time = (f: () => void, n: number): number => {
    const t0 = process.cpuUsage();
    for (let k = 0; k < n; k++) f();
    const d = process.cpuUsage(t0);
    return (d.user + d.system) / n;
  };
  // warm-up: the JIT's tiers settle before timing
  time(stream, 400);
  time(json, 20_000);
  records = 0;
  const perStream = time(stream, 2_000);
  if (records < 2_000) throw new Error(`the stream read ${records} records for 2000 streams: the reader failed`);
  return { sseEvent: perStream / events.length, json2k: time(json, 60_000) };
}

if (opt.child !== undefined) {
  process.stdout.write(JSON.stringify(await measure(resolve(opt.child))));
  process.exit(0);
}

const here = resolve(import.meta.dirname, '..');
const trees: [string, string][] = [['this tree', here]];
if (opt.baseline) trees.push(['the tree before', resolve(opt.baseline)]);
const rounds = Number(opt.rounds);
const figs = new Map<string, Figures[]>(trees.map(([n]) => [n, []]));
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? trees : [...trees].reverse();
  for (const [name, dir] of order) {
    const out = execFileSync(process.execPath, [join(here, 'bench/metering-parts.ts'), '--child', dir], { encoding: 'utf8' });
    figs.get(name)!.push(JSON.parse(out) as Figures);
    process.stderr.write(`bench/metering-parts: round ${r + 1}/${rounds} ${name}\n`);
  }
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cell = (xs: number[], d: number) => `${med(xs).toFixed(d)} [${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}]`;
const date = new Date().toISOString();
const lines = [
  '# keygate, the metering readers in process (bench/metering-parts.ts)',
  '',
  `- date: ${date}; machine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}; Node ${process.version}`,
  `- this tree: ${treeCommit(here)}${opt.baseline ? `; the tree before: ${treeCommit(resolve(opt.baseline))}` : ''}`,
  `- command: \`scripts/node bench/metering-parts.ts${opt.baseline ? ' --baseline <dir>' : ''} --rounds ${rounds}\`; each tree in its own process per round, the order alternating; CPU time (process.cpuUsage) over 2,000 streams and 60,000 responses after a warm-up`,
  '',
  '| tree | SSE + JSON readers, µs per event (300-event chat stream): median [min–max] | JSON reader, µs per 2 KiB chat response: median [min–max] |',
  '|---|---:|---:|',
  ...trees.map(([n]) => `| ${n} | ${cell(figs.get(n)!.map((f) => f.sseEvent), 3)} | ${cell(figs.get(n)!.map((f) => f.json2k), 2)} |`),
];
if (opt.baseline) {
  const a = figs.get('this tree')!;
  const b = figs.get('the tree before')!;
  lines.push('', `this tree / the tree before (medians): SSE event ${(med(a.map((f) => f.sseEvent)) / med(b.map((f) => f.sseEvent))).toFixed(2)}x, 2 KiB JSON ${(med(a.map((f) => f.json2k)) / med(b.map((f) => f.json2k))).toFixed(2)}x`);
}
const out = opt.out ?? join(here, 'bench', 'results', `${date.slice(0, 16).replace(/:/g, '')}-metering-parts.md`);
writeFileSync(out, lines.join('\n') + '\n');
process.stdout.write(lines.join('\n') + '\n');
process.stderr.write(`bench/metering-parts: written to ${out}\n`);
