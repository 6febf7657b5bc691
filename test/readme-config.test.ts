/** README "Configuration" lists every setting of src/config.ts with its env var, flag and default. */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ENV, loadConfig, type Config } from '../src/config.ts';
import { CONSOLE_ENV, loadConsoleApiConfig } from '../src/console-api/config.ts';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('<!-- section: security -->'));
const rows = new Map(
  section
    .split('\n')
    .filter((l) => /^\| [a-zA-Z]+ \| `/.test(l))
    .map((l) => {
      const [setting, env, flag, def] = l.split('|').slice(1, 5).map((c) => c.trim());
      return [setting!, { env: env!, flag: flag!, def: def! }] as const;
    }),
);

describe('README Configuration table', () => {
  it('has exactly one row per setting, with its environment variable', () => {
    expect([...rows.keys()].sort()).toEqual(Object.keys(ENV).sort());
    for (const [k, env] of Object.entries(ENV)) expect(rows.get(k)!.env, k).toBe(`\`${env}\``);
  });

  it('shows the real defaults', () => {
    const defaults = loadConfig({}, {});
    for (const k of Object.keys(ENV) as (keyof Config)[]) {
      const v = defaults[k];
      const shown = (Array.isArray(v) && v.length === 0) || (v instanceof Map && v.size === 0) || v === '' ? '(none)' : `\`${String(v)}\``;
      expect(rows.get(k)!.def, k).toBe(shown);
    }
  });

  it('names the flag where serve has one', () => {
    const bin = fileURLToPath(new URL('../bin/keygate', import.meta.url));
    const help = spawnSync(bin, ['serve', '--help'], { env: { ...process.env, KEYGATE_NODE: process.execPath }, encoding: 'utf8' });
    const flags = new Set([...help.stdout.matchAll(/^\s+(?:-\w, )?(--[a-z-]+)/gm)].map((m) => m[1]!).filter((f) => f !== '--help'));
    expect(flags.size).toBeGreaterThan(0);
    for (const [k, row] of rows) {
      if (row.flag === '') continue;
      expect(flags.has(row.flag.replace(/`/g, '')), `${k}: ${row.flag}`).toBe(true);
    }
    expect([...rows.values()].filter((r) => r.flag !== '').length).toBe(flags.size);
  });
});

describe('README console settings table (keygate console)', () => {
  const at = readme.indexOf('**Running it.** `keygate console');
  const table = readme.slice(at, readme.indexOf('\n\n', readme.indexOf('| env |', at)));
  const consoleRows = new Map(
    table
      .split('\n')
      .filter((l) => /^\| `KEYGATE_(CONSOLE_|CURRENCY`|OIDC_)/.test(l))
      .map((l) => {
        const [env, def] = l.split('|').slice(1, 3).map((c) => c.trim());
        return [/`(KEYGATE_(?:CONSOLE_\w+|CURRENCY|OIDC_\w+))`/.exec(env!)![1]!, def!] as const;
      }),
  );

  it('has exactly one row per console setting', () => {
    expect(at).toBeGreaterThan(0);
    expect([...consoleRows.keys()].sort()).toEqual(Object.values(CONSOLE_ENV).sort());
  });

  it('shows the real defaults', () => {
    const defaults = loadConsoleApiConfig({}, {});
    for (const [k, env] of Object.entries(CONSOLE_ENV)) {
      const v = defaults[k as keyof typeof defaults];
      if (v === undefined) expect(consoleRows.get(env), env).toMatch(/^\(/);
      else expect(consoleRows.get(env), env).toBe(`\`${String(v)}\``);
    }
  });
});
