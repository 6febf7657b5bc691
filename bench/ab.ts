/**
 * Two keygate trees side by side on one case, in one run (before/after a change):
 *
 *   scripts/node bench/ab.ts --baseline DIR [--case valid|malformed|unknown] [--shape 4x16] [--rounds N] [--duration S] [--out FILE]
 *
 * DIR is another checkout of keygate with its node_modules (e.g. `git worktree add /tmp/before
 * <commit>` and a symlink to this tree's node_modules). Both sidecars run as child processes on one
 * redis-server and one seeded key; h2load drives each in turn, a warm-up round first, then rounds
 * in alternating order. Prints (and with --out writes) a markdown table: the median requests/s and
 * the target's CPU µs per request, with every round's figure, so the noise is visible.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_KEY_PREFIX } from '../src/keys/format.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { encodeCheck, fastKeys, malformedKey } from './lib/bodies.ts';
import { ensureH2load, runH2load } from './lib/h2load.ts';
import { loadAverage, startTarget, type Target } from './lib/procs.ts';
import { startRedis } from './lib/redis.ts';
import { seedKeys } from './lib/seed.ts';

const { values: opt } = parseArgs({
  options: {
    baseline: { type: 'string' },
    case: { type: 'string', default: 'valid' },
    shape: { type: 'string', default: '4x16' },
    rounds: { type: 'string', default: '6' },
    duration: { type: 'string', default: '2' },
    out: { type: 'string' },
  },
});
if (!opt.baseline) {
  process.stderr.write('bench/ab.ts: --baseline DIR (another keygate checkout with its node_modules) is required\n');
  process.exit(2);
}
const shape = /^(\d+)x(\d+)$/.exec(opt.shape!);
if (!shape || !['valid', 'malformed', 'unknown'].includes(opt.case!)) {
  process.stderr.write('bench/ab.ts: --case valid|malformed|unknown, --shape <connections>x<streams>\n');
  process.exit(2);
}
const [connections, streams] = [Number(shape[1]), Number(shape[2])];
const rounds = Number(opt.rounds);
const duration = Number(opt.duration);
const HERE = resolve(import.meta.dirname, '..');
const trees = [
  { name: 'this tree', dir: HERE },
  { name: 'baseline', dir: resolve(opt.baseline) },
];

ensureH2load();
const redis = await startRedis();
const tmp = mkdtempSync(join(tmpdir(), 'keygate-ab-'));
const figures = new Map<string, { rps: number[]; cpu: number[] }>();
const started: Target[] = [];
const loadAtStart = loadAverage();
try {
  const [valid] = await seedKeys(redis.client(), schema(), { prefix: DEFAULT_KEY_PREFIX, count: 1, accounts: 1, tag: 'ab' });
  const key = opt.case === 'valid' ? valid! : opt.case === 'malformed' ? malformedKey(valid!) : fastKeys(DEFAULT_KEY_PREFIX, 1)[0]!;
  const body = join(tmp, 'body.bin');
  writeFileSync(body, encodeCheck({ key }));
  for (const t of trees) {
    started.push(await startTarget(t.name, 'keygate', { REDIS_URL: redis.url, KEYGATE_GRPC_TRANSPORT: 'h2' }, [], join(t.dir, 'bench/lib/target.ts')));
    figures.set(t.name, { rps: [], cpu: [] });
  }
  for (let r = 0; r <= rounds; r++) {
    const order = r % 2 ? [...started].reverse() : started;
    for (const target of order) {
      const c0 = target.cpuMs();
      const res = await runH2load({ port: target.port, bodyFile: body, connections, streams, durationSec: duration, warmupSec: 1, logFile: join(tmp, 'h2load.log'), headers: { 'grpc-timeout': '250m', 'user-agent': 'envoy/1.34.1' } });
      const cpu = ((target.cpuMs() - c0) * 1000) / Math.max(1, res.allRequests);
      if (r === 0) continue; // the warm-up round
      figures.get(target.name)!.rps.push(res.rps);
      figures.get(target.name)!.cpu.push(cpu);
    }
  }
} finally {
  for (const t of started) await t.stop();
  await redis.stop();
}

/** The tree's commit (and "+changes" when its work tree differs), or "a tree without git". */
function treeCommit(dir: string): string {
  try {
    const head = execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', dir, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
    return dirty ? `${head}+changes` : head;
  } catch {
    return 'a tree without git';
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const out = [
  `# keygate A/B: ${opt.case} key, ${connections}x${streams}`,
  '',
  `- date: ${new Date().toISOString()}; load average at start ${loadAtStart}, at end ${loadAverage()}`,
  // commits, not directories: a result file must not carry this machine's paths
  `- this tree: ${treeCommit(HERE)}; baseline: ${treeCommit(trees[1]!.dir)}`,
  `- command: \`scripts/node bench/ab.ts --baseline <dir> --case ${opt.case} --shape ${opt.shape} --rounds ${rounds} --duration ${duration}\``,
  '',
  '| tree | req/s (median) | CPU µs/req (median) | req/s per round | CPU µs/req per round |',
  '|---|---:|---:|---|---|',
  ...(() => {
    const [a, b] = [figures.get('this tree')!, figures.get('baseline')!];
    const [rr, rc] = [median(a.rps) / median(b.rps), median(b.cpu) / median(a.cpu)];
    // not slower: within 5% of the baseline by requests/s and by CPU per request
    return [`TARGET| ${opt.case} key vs the tree before (bench/ab.ts; ≥ 1 = faster) | ${opt.shape} | ${rr.toFixed(2)} | ${rc.toFixed(2)} | ${rr >= 0.95 && rc >= 0.95 ? 'yes' : rr >= 0.95 || rc >= 0.95 ? 'partly' : 'no'} |`, ''];
  })(),
  ...[...figures].map(([name, f]) => `| ${name} | ${median(f.rps).toFixed(0)} | ${median(f.cpu).toFixed(1)} | ${f.rps.map((x) => x.toFixed(0)).join(' ')} | ${f.cpu.map((x) => x.toFixed(0)).join(' ')} |`),
  '',
].join('\n');
process.stdout.write(out);
if (opt.out) writeFileSync(opt.out, out);
