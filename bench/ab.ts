/**
 * Two keygate trees side by side on one case, in one run (before/after a change):
 *
 *   scripts/node bench/ab.ts --baseline DIR [--case valid|malformed|unknown|rated] [--baseline-case CASE] [--shape 4x16] [--rounds N] [--duration S] [--out FILE]
 *
 * DIR is another checkout of keygate with its node_modules (e.g. `git worktree add ../keygate-before
 * <commit>` and a symlink to this tree's node_modules). Both sidecars run as child processes on one
 * redis-server and one seeded key; h2load drives each in turn, a warm-up round first, then rounds
 * in alternating order. Prints (and with --out writes) a markdown table: the median requests/s and
 * the target's CPU µs per request, with every round's figure, so the noise is visible.
 *
 * `rated`: a key with a request rate too large to be reached (`1000000000/d`), so every request is
 * counted by the limiter and allowed (a tree without rate limits ignores the field: a plain allow).
 * `--baseline-case` drives the baseline with another case: `--baseline . --case rated
 * --baseline-case valid` is what a rate costs one tree, side by side. `--staleness-bound MS` sets
 * KEYGATE_STALENESS_BOUND_MS for both sidecars (a loaded machine's late heartbeat answers drop the
 * cache at the production 250 ms; the store reads per round show when).
 *
 * `credential`: a key of an account with its own OpenAI credential (docs/credentials.md): both
 * sidecars hold the credential key, and every allow sets that credential upstream. `--baseline .
 * --case credential --baseline-case valid` is what the injection costs one tree, side by side.
 */
import { treeCommit } from './lib/common.ts';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_KEY_PREFIX, keyDigest } from '../src/core/key-format.ts';
import { RateField } from '../src/schema/rates.ts';
import { AccountField, CredentialField, encodeKeyRecord, schema } from '../src/schema/redis-schema.ts';
import { parseCredentialKeyring, sealCredential } from '../src/keys/credential-crypto.ts';
import { randomBytes } from 'node:crypto';
import { encodeCheck, fastKeys, malformedKey } from './lib/bodies.ts';
import { ensureH2load, runH2load } from './lib/h2load.ts';
import { loadAverage, startTarget, type Target } from './lib/procs.ts';
import { startRedis } from './lib/redis.ts';
import { commandCalls } from './lib/seed.ts';

const { values: opt } = parseArgs({
  options: {
    baseline: { type: 'string' },
    case: { type: 'string', default: 'valid' },
    'baseline-case': { type: 'string' },
    /** KEYGATE_STALENESS_BOUND_MS for both sidecars (default: the production 250 ms). */
    'staleness-bound': { type: 'string' },
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
const CASES = ['valid', 'malformed', 'unknown', 'rated', 'credential'];
const baseCase = opt['baseline-case'] ?? opt.case!;
if (!shape || !CASES.includes(opt.case!) || !CASES.includes(baseCase)) {
  process.stderr.write('bench/ab.ts: --case and --baseline-case valid|malformed|unknown|rated|credential, --shape <connections>x<streams>\n');
  process.exit(2);
}
const [connections, streams] = [Number(shape[1]), Number(shape[2])];
const rounds = Number(opt.rounds);
const duration = Number(opt.duration);
const HERE = resolve(import.meta.dirname, '..');
const trees = [
  { name: 'this tree', dir: HERE, case: opt.case! },
  { name: 'baseline', dir: resolve(opt.baseline), case: baseCase },
];

ensureH2load();
// One redis-server per tree: its command counts are that sidecar's alone. A round in which a
// sidecar read records from the store (its cache dropped: on a loaded machine a heartbeat answer
// can come later than the staleness bound allows) is not the cached path; the reads are shown.
const redises = [await startRedis(), await startRedis()];
const tmp = mkdtempSync(join(tmpdir(), 'keygate-ab-'));
const figures = new Map<string, { rps: number[]; cpu: number[]; reads: number[]; requests: number[] }>();
const started: Target[] = [];
const loadAtStart = loadAverage();
const READS = ['hmget', 'hget', 'hgetall'];
const storeReads = async (i: number) => {
  const c = await commandCalls(redises[i]!.client());
  return READS.reduce((n, k) => n + (c[k] ?? 0), 0);
};
try {
  // the same two keys in both stores
  const [valid, rated, credentialed] = fastKeys(DEFAULT_KEY_PREFIX, 3) as [string, string, string];
  // the credential key both sidecars hold (a tree without credentials ignores it, and the account's fields)
  const credentialKey = `c1:${randomBytes(32).toString('base64')}`;
  for (const redis of redises) {
    const db = redis.client();
    const s = schema();
    await db.hset(s.keyRecord(keyDigest(credentialed)), ...encodeKeyRecord({ id: `key_abcred${'0'.repeat(16)}`, account: 'acct-ab-cred', name: 'bench', models: null, expiresAt: null }));
    await db.hset(s.credentials('acct-ab-cred'), CredentialField.envelope('openai'), sealCredential(parseCredentialKeyring(credentialKey), 'acct-ab-cred', 'openai', `sk-bench-${'x'.repeat(40)}`));
    await db.hset(s.account('acct-ab-cred'), AccountField.credentials, 'openai');
    await db.hset(s.keyRecord(keyDigest(valid)), ...encodeKeyRecord({ id: `key_ab${'0'.repeat(16)}`, account: 'acct-ab', name: 'bench', models: null, expiresAt: null }));
    await db.hset(s.keyRecord(keyDigest(rated)), ...encodeKeyRecord({ id: `key_abrated${'0'.repeat(16)}`, account: 'acct-ab-rated', name: 'bench', models: null, expiresAt: null }), RateField.rate, '1000000000/d');
  }
  const keyOf = (c: string) => (c === 'valid' ? valid : c === 'rated' ? rated : c === 'credential' ? credentialed : c === 'malformed' ? malformedKey(valid) : fastKeys(DEFAULT_KEY_PREFIX, 1)[0]!);
  const bodies = new Map<string, string>();
  for (const c of new Set([opt.case!, baseCase])) {
    bodies.set(c, join(tmp, `${c}.bin`));
    writeFileSync(bodies.get(c)!, encodeCheck({ key: keyOf(c) }));
  }
  for (const [i, t] of trees.entries()) {
    const bound: Record<string, string> = opt['staleness-bound'] ? { KEYGATE_STALENESS_BOUND_MS: opt['staleness-bound'] } : {};
    started.push(await startTarget(t.name, 'keygate', { REDIS_URL: redises[i]!.url, KEYGATE_GRPC_TRANSPORT: 'h2', KEYGATE_CREDENTIAL_KEY: credentialKey, ...bound }, [], join(t.dir, 'bench/lib/target.ts')));
    figures.set(t.name, { rps: [], cpu: [], reads: [], requests: [] });
  }
  for (let r = 0; r <= rounds; r++) {
    const order = r % 2 ? [...started].reverse() : started;
    for (const target of order) {
      const ti = trees.findIndex((t) => t.name === target.name);
      const body = bodies.get(trees[ti]!.case)!;
      const reads0 = await storeReads(ti);
      const c0 = target.cpuMs();
      const res = await runH2load({ port: target.port, bodyFile: body, connections, streams, durationSec: duration, warmupSec: 1, logFile: join(tmp, 'h2load.log'), headers: { 'grpc-timeout': '250m', 'user-agent': 'envoy/1.34.1' } });
      const cpu = ((target.cpuMs() - c0) * 1000) / Math.max(1, res.allRequests);
      const reads = (await storeReads(ti)) - reads0;
      if (r === 0) continue; // the warm-up round
      figures.get(target.name)!.rps.push(res.rps);
      figures.get(target.name)!.cpu.push(cpu);
      figures.get(target.name)!.reads.push(reads);
      figures.get(target.name)!.requests.push(res.allRequests);
    }
  }
} finally {
  for (const t of started) await t.stop();
  for (const r of redises) await r.stop();
}

/** The rounds in which the sidecar answered from its cache. */
function cachedRounds(f: { rps: number[]; cpu: number[]; reads: number[]; requests: number[] }): { rps: number[]; cpu: number[] } {
  const keep = f.reads.map((r, i) => r < 0.01 * f.requests[i]!);
  return { rps: f.rps.filter((_, i) => keep[i]), cpu: f.cpu.filter((_, i) => keep[i]) };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const out = [
  `# keygate A/B: ${opt.case} key${baseCase !== opt.case ? ` (baseline: ${baseCase} key)` : ''}, ${connections}x${streams}`,
  '',
  `- date: ${new Date().toISOString()}; load average at start ${loadAtStart}, at end ${loadAverage()}`,
  // commits, not directories: a result file must not carry this machine's paths
  `- this tree: ${treeCommit(HERE)}; baseline: ${treeCommit(trees[1]!.dir)}`,
  `- command: \`scripts/node bench/ab.ts --baseline <dir> --case ${opt.case}${baseCase !== opt.case ? ` --baseline-case ${baseCase}` : ''} --shape ${opt.shape} --rounds ${rounds} --duration ${duration}${opt['staleness-bound'] ? ` --staleness-bound ${opt['staleness-bound']}` : ''}\``,
  '',
  '| tree | req/s (median) | CPU µs/req (median) | req/s per round | CPU µs/req per round | store reads per round |',
  '|---|---:|---:|---|---|---|',
  ...[...figures].map(([name, f]) => `| ${name} | ${median(f.rps).toFixed(0)} | ${median(f.cpu).toFixed(1)} | ${f.rps.map((x) => x.toFixed(0)).join(' ')} | ${f.cpu.map((x) => x.toFixed(0)).join(' ')} | ${f.reads.join(' ')} |`),
  '',
  ...(() => {
    const [a, b] = [cachedRounds(figures.get('this tree')!), cachedRounds(figures.get('baseline')!)];
    const lines = [
      `- cached rounds (store reads under 1% of requests; a few reads a second are background work): this tree ${a.cpu.length} of ${rounds}, baseline ${b.cpu.length} of ${rounds}` +
        (a.cpu.length && b.cpu.length ? `; medians over them: req/s ${median(a.rps).toFixed(0)} vs ${median(b.rps).toFixed(0)}, CPU µs/req ${median(a.cpu).toFixed(1)} vs ${median(b.cpu).toFixed(1)}` : ''),
    ];
    // the ratio over cached rounds when both trees have some (the hot path is the cached path), else over all
    const [x, y] = a.cpu.length && b.cpu.length ? [a, b] : [figures.get('this tree')!, figures.get('baseline')!];
    const [rr, rc] = [median(x.rps) / median(y.rps), median(y.cpu) / median(x.cpu)];
    const what = baseCase === opt.case ? `${opt.case} key vs the tree before` : `${opt.case} key vs the ${baseCase} key`;
    // not slower: within 5% of the baseline by requests/s and by CPU per request
    lines.push('', `TARGET| ${what} (bench/ab.ts; ≥ 1 = faster) | ${opt.shape} | ${rr.toFixed(2)} | ${rc.toFixed(2)} | ${rr >= 0.95 && rc >= 0.95 ? 'yes' : rr >= 0.95 || rc >= 0.95 ? 'partly' : 'no'} |`, '');
    return lines;
  })(),
].join('\n');
process.stdout.write(out);
if (opt.out) writeFileSync(opt.out, out);
