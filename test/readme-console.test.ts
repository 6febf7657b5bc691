/**
 * The README's `curl` session of the management API runs as written: extracted from README.md and
 * run with bash against a real redis-server and `bin/keygate` (on a free port instead of 9004).
 * Likewise its wallet walk-through ("From a credit to the 402"), against a real sidecar's HTTP authz
 * port instead of 9002.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { destroyRedis, freePort, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { startTestSidecar } from './helpers/sidecars.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  if (redis) await destroyRedis(redis);
});

/** The first sh block after `marker` in the README. */
function block(marker: string): string {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const at = readme.indexOf(marker);
  expect(at).toBeGreaterThan(0);
  const m = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!m) throw new Error(`no sh block after "${marker}"`);
  return m[1]!;
}
const session = () => block('**A session in `curl`**');

/** Runs `script` with bash in the checkout, bin/ on PATH, against `redisUrl`. */
function runBash(script: string, redisUrl: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const bin = fileURLToPath(new URL('../bin', import.meta.url));
  return new Promise((resolve) =>
    execFile('bash', ['-c', script], { cwd: fileURLToPath(new URL('..', import.meta.url)), env: { PATH: `${bin}:${process.env.PATH}`, HOME: process.env.HOME, KEYGATE_NODE: process.execPath, REDIS_URL: redisUrl, KEYGATE_LOG_LEVEL: 'warn' }, timeout: 90_000 }, (err, so, se) =>
      resolve({ code: err ? Number(err.code ?? 99) : 0, stdout: so, stderr: se }),
    ),
  );
}

it('the README curl session runs: create, list, reveal, restrict, roll, revoke, disable, enable, audit, credit, usage, limit, export', async () => {
  // The console listens on a port picked free beforehand: on a loaded machine another process can
  // take it first (a CI run failed with EADDRINUSE). The session is then run again on a new port,
  // from an empty Redis (a console that never listened wrote nothing, but the run starts clean).
  let run = { code: -1 as number | null, stdout: '', stderr: '' };
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    run = await runBash(session().replaceAll('9004', String(port)), redis.url);
    if (run.code === 0 || !run.stderr.includes('EADDRINUSE')) break;
    await redis.client().flushall();
  }
  const { code, stdout, stderr } = run;
  expect(code, stderr).toBe(0);
  const lines = stdout.trim().split('\n');
  expect(lines[0]).toMatch(/^\{"id":"key_\w+","key":"kg_\w+","models":\["openai\/\*"\]/);
  expect(stdout).toContain('"models":["openai/gpt-4o-mini"]');
  expect(stdout).toMatch(/"status":"revoked","rolled_to":"key_\w+"/);
  expect(stdout).toMatch(/\{"id":"acct-42","status":"disabled","wallet":\{"enforced":false,"balance_micros":0,"exists":false,"rule":"unreported"\}[^\n]*"currency":"USD"/);
  expect(stdout).toMatch(/"action":"enable","actor":"ops"/);
  expect(stdout).toContain('{"error":{"code":"INVALID_INPUT","message":"body: unknown field \\"nmae\\""}}');
  // The wallet steps: a credit, a usage record and its repeat, the account, a raised limit, the export.
  expect(stdout).toContain('{"account":"acct-42","reference":"inv-001","amount_micros":10000000,"credited":true,"balance_micros":10000000}');
  expect(stdout).toContain('{"booked":true,"balance_micros":9250000}\n{"booked":false,"balance_micros":null}');
  expect(stdout).toMatch(/\{"id":"acct-42","status":"active","wallet":\{"enforced":true,"balance_micros":9250000,"exists":true,"rule":"credited"\}[^\n]*"currency":"USD"/);
  expect(stdout).toContain('{"limit":{"amount_micros":20000000,"period":"week"},"spend":{"period":"week","period_micros":750000,"total_micros":750000}}');
  expect(stdout).toContain('{"request_id":"req-1","amount_micros":750000,"model":"openai/gpt-4o"}');
}, 120_000);

it('the README wallet walk-through runs: credit, 200, usage, 402 INSUFFICIENT_BALANCE, credit, 402 KEY_LIMIT_EXCEEDED, raise, show, export', async () => {
  // A Redis of its own: the session above already credited acct-42 with the same reference.
  const own = await startRedis();
  let sc: Awaited<ReturnType<typeof startTestSidecar>> | undefined;
  try {
    sc = await startTestSidecar(own.url);
    // The `$ ` lines are the commands; the others are their output, compared below.
    const text = block('From a credit to the 402');
    const commands = text.split('\n').filter((l) => l.startsWith('$ ')).map((l) => l.slice(2));
    expect(commands.length).toBeGreaterThanOrEqual(10);
    const script = ['set -e', ...commands].join('\n').replaceAll('9002', String(sc.sidecar.httpPort));
    const { code, stdout, stderr } = await runBash(script, own.url);
    expect(code, stderr).toBe(0);
    const shown = text.split('\n').filter((l) => !l.startsWith('$ ') && l.trim() !== '' && l !== '…');
    // Every output line the README shows appears, with ids, keys, times and request ids as placeholders.
    const placeholders: [RegExp, string][] = [
      [/^key_\w+…$/, 'key_\\w+'],
      [/^kg_…\w{4}$/, 'kg_…\\w{4}'],
      [/^\d{4}-\d\d-\d\dT[\d:.]+Z$/, '[\\dT:.Z-]+'],
      [/^"id":"[\d-]+"$/, '"id":"[\\d-]+"'],
      [/^"request_id":"…"$/, '"request_id":"[\\w-]+"'],
    ];
    const any = /key_\w+…|kg_…\w{4}|\d{4}-\d\d-\d\dT[\d:.]+Z|"id":"[\d-]+"|"request_id":"…"/g;
    const esc = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const pattern = (l: string) => {
      let re = '';
      let last = 0;
      for (const m of l.matchAll(any)) {
        re += esc(l.slice(last, m.index)) + placeholders.find(([p]) => p.test(m[0]))![1];
        last = m.index + m[0].length;
      }
      return new RegExp(`^${re}${esc(l.slice(last))}$`, 'm');
    };
    for (const l of shown) expect(stdout, l).toMatch(pattern(l));
  } finally {
    await sc?.close();
    await destroyRedis(own);
  }
}, 120_000);
