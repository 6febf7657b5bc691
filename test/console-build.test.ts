/**
 * The library as a package: `tsconfig.build.json` emits JavaScript and declarations, and the result
 * imports from inside a node_modules folder (where Node refuses to strip types) and works against
 * a real Redis.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
let dir: string;
let redis: RedisServer;

function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: { ...process.env, ...env }, timeout: 240_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, out: `${stdout}${stderr}` }),
    );
  });
}

beforeAll(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'keygate-pkg-'));
}, 60_000);

afterAll(async () => {
  await destroyRedis(redis);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('builds dist/ and the built library imports and works from node_modules', async () => {
  const pkgJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  expect(pkgJson.exports['.']).toEqual({ types: './dist/console/index.d.ts', default: './dist/console/index.js' });
  expect(pkgJson.scripts.prepare).toContain('tsconfig.build.json');

  // install layout: <dir>/node_modules/keygate/{package.json,dist}, dependencies beside it
  const pkg = join(dir, 'node_modules', 'keygate');
  mkdirSync(pkg, { recursive: true });
  const tsc = join(ROOT, 'node_modules', '.bin', 'tsc');
  const build = await run(tsc, ['-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(pkg, 'dist')], ROOT);
  expect(build.out).toBe('');
  expect(build.code).toBe(0);
  cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
  expect(existsSync(join(pkg, 'dist', 'console', 'index.js'))).toBe(true);
  expect(existsSync(join(pkg, 'dist', 'console', 'index.d.ts'))).toBe(true);
  for (const f of ['service.js', 'keys.js']) expect(readFileSync(join(pkg, 'dist', 'console', f), 'utf8')).not.toMatch(/from '\.[^']*\.ts'/);
  for (const dep of Object.keys(pkgJson.dependencies)) {
    mkdirSync(join(dir, 'node_modules', dep, '..'), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules', dep), join(dir, 'node_modules', dep));
  }
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  writeFileSync(
    join(dir, 'use.mjs'),
    `import { KeyConsole, SCHEMA_VERSION } from 'keygate';
const kc = new KeyConsole({ redis: process.env.REDIS_URL });
const { id, key } = await kc.createKey({ account: 'pkg-test', name: 'from the package', models: ['openai/*'] });
const again = await kc.revealKey(id);
const list = await kc.listKeys('pkg-test');
await kc.close();
console.log(JSON.stringify({ v: SCHEMA_VERSION, same: again.key === key, n: list.length, models: list[0].models }));
`,
  );
  const r = await run(process.execPath, ['use.mjs'], dir, {
    REDIS_URL: redis.url,
    KEYGATE_REVEAL_KEY: `base64:${randomBytes(32).toString('base64')}`,
  });
  expect(r.code, r.out).toBe(0);
  expect(JSON.parse(r.out)).toEqual({ v: '1', same: true, n: 1, models: ['openai/*'] });
}, 300_000);
