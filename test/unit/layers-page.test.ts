/**
 * The "API keys" page (web/src/) in modules: `main.ts` only boots; the state, the API client and the
 * conversions import no view; no two modules import each other in a circle; and no module grows back
 * into one file for the whole page.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const WEB = join(import.meta.dirname, '..', '..', 'web', 'src');
const MODULES = readdirSync(WEB, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
const text = (f: string) => readFileSync(join(WEB, f), 'utf8');

/** The page's own modules a module imports (type-only included), as paths under web/src/. */
function importsOf(f: string): string[] {
  return [...text(f).matchAll(/^(?:import|export) (?:type )?[^;]*?from '(\.[^']+)'/gms)]
    .map((m) => relative(WEB, normalize(join(WEB, dirname(f), m[1]!))))
    .filter((t) => !t.startsWith('..'));
}

const GRAPH = new Map(MODULES.map((f) => [f, importsOf(f)]));

describe('the page in modules', () => {
  it('reads the modules and their imports (the control)', () => {
    expect(MODULES).toEqual(expect.arrayContaining(['main.ts', 'state.ts', 'session.ts', 'api.ts', join('views', 'page.ts')]));
    expect(GRAPH.get('main.ts')).toEqual(expect.arrayContaining(['state.ts', join('views', 'page.ts')]));
  });

  it('main.ts only boots: nothing imports it, and it declares no function of its own', () => {
    expect([...GRAPH].filter(([, deps]) => deps.includes('main.ts')).map(([f]) => f)).toEqual([]);
    expect(text('main.ts')).not.toMatch(/^(?:async )?function |^const \w+ = \(/m);
  });

  it('the state, the API client and the conversions import no view', () => {
    for (const f of ['state.ts', 'api.ts', 'format.ts']) expect(GRAPH.get(f)!.filter((d) => d.startsWith('views')), f).toEqual([]);
  });

  it('no import circle between the modules', () => {
    const circles: string[] = [];
    const walk = (f: string, path: string[]): void => {
      if (path.includes(f)) {
        circles.push([...path.slice(path.indexOf(f)), f].join(' → '));
        return;
      }
      for (const d of GRAPH.get(f) ?? []) walk(d, [...path, f]);
    };
    for (const f of MODULES) walk(f, []);
    expect(circles).toEqual([]);
  });

  it('no module over 350 lines', () => {
    const long = MODULES.map((f) => [f, text(f).split('\n').length] as const).filter(([, n]) => n > 350);
    expect(long).toEqual([]);
  });
});
