/** Leaked keys can be found: the published gitleaks rule and the checksum filter recognise real keys. */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TOKEN_PREFIX } from '../src/console/management.ts';
import { generateKey } from '../src/core/key-format.ts';

function ruleRegex(): RegExp {
  const toml = readFileSync('deploy/gitleaks/keygate.toml', 'utf8');
  const m = /regex = '''(.+)'''/.exec(toml);
  if (!m) throw new Error('no regex in the gitleaks rule');
  return new RegExp(m[1]!, 'g');
}

describe('secret scanning', () => {
  it('the gitleaks rule matches generated keys in code and config, and not near-misses', () => {
    const re = ruleRegex();
    for (let i = 0; i < 100; i++) {
      const k = generateKey();
      const text = `OPENAI_API_KEY=${k}\nclient = OpenAI(api_key="${k}")`;
      expect([...text.matchAll(re)].map((x) => x[1])).toEqual([k, k]);
    }
    expect('kg_short'.match(re)).toBeNull();
    expect(`xkg_${'a'.repeat(38)}`.match(re)).toBeNull();
  });

  it('management tokens have a rule of their own: each rule finds its kind and not the other', () => {
    const toml = readFileSync('deploy/gitleaks/keygate.toml', 'utf8');
    const rules = [...toml.matchAll(/id = "([^"]+)"[\s\S]*?regex = '''(.+)'''/g)].map((m) => [m[1]!, new RegExp(m[2]!, 'g')] as const);
    const byId = Object.fromEntries(rules);
    expect(Object.keys(byId).sort()).toEqual(['keygate-api-key', 'keygate-management-token']);
    for (let i = 0; i < 50; i++) {
      const token = generateKey(TOKEN_PREFIX);
      const key = generateKey();
      const text = `KEYGATE_TOKEN=${token}\nOPENAI_API_KEY=${key}`;
      expect([...text.matchAll(byId['keygate-management-token']!)].map((x) => x[1])).toEqual([token]);
      expect([...text.matchAll(byId['keygate-api-key']!)].map((x) => x[1])).toEqual([key]);
    }
  });

  it('check-key prints only checksum-valid keys, masked', () => {
    const k = generateKey();
    const fake = `kg_${'A'.repeat(38)}`;
    const r = spawnSync(process.execPath, ['scripts/check-key.ts'], { input: `${fake}\nfound ${k} here\n`, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).toContain(k.slice(-4));
    expect(r.stdout).not.toContain(k);
  });
});
