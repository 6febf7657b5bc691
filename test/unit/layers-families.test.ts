/**
 * One module per protocol family (src/core/families/): what keygate knows about a family is in its
 * module, and the rest of the code asks the registry (`familyModule(name)`, `findFamily`,
 * `FAMILIES`) instead of comparing family names. Read from the source text, like layers.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FAMILIES, FAMILY_MODULES } from '../../src/core/families/index.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const ROOM = 'src/core/families/';

/**
 * Files outside the room that may compare a family name, each with the reason. Empty: a new entry
 * needs one (a family rule belongs in the family's module; a config list goes through `FAMILIES`).
 */
const ALLOWED: ReadonlyMap<string, string> = new Map();

const NAME = `['"\`](?:${FAMILIES.join('|')})['"\`]`;
/** `x === 'openai'`, `'google' !== x`, `case 'anthropic':`. */
const COMPARISON = new RegExp(`(?:[!=]==?\\s*${NAME})|(?:${NAME}\\s*[!=]==?)|(?:\\bcase\\s+${NAME}\\s*:)`);

function tsFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.includes('node_modules'))
    .map((f) => `${dir}/${f}`);
}

/** `file:line: text` of every family-name comparison in `files`. */
function comparisons(files: readonly string[]): string[] {
  return files.flatMap((f) =>
    readFileSync(join(ROOT, f), 'utf8')
      .split('\n')
      .flatMap((line, i) => (COMPARISON.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
  );
}

describe('protocol families', () => {
  it('the detector finds a comparison (the control)', () => {
    for (const line of [`if (family === 'openai') x();`, `'google' !== f`, `    case "anthropic":`, 'f == `google`']) expect(COMPARISON.test(line), line).toBe(true);
    for (const line of [`endpoint('openai', POST, '/v1/x')`, `{ family: 'google', kind }`, `provider: 'openai';`]) expect(COMPARISON.test(line), line).toBe(false);
  });

  it('no file outside the families room compares against a family name', () => {
    const files = [...tsFiles('src'), ...tsFiles('web/src')].filter((f) => !f.startsWith(ROOM) && !ALLOWED.has(f));
    expect(files.length).toBeGreaterThan(100); // the control: the reader finds the sources
    expect(comparisons(files)).toEqual([]);
  });

  it('the room is the floor of the floor: it imports nothing outside itself', () => {
    const imports = tsFiles('src/core/families').flatMap((f) =>
      [...readFileSync(join(ROOT, f), 'utf8').matchAll(/^(?:import|export) (?:type )?[^;]*?from '([^']+)'/gms)].map((m) => `${f}: ${m[1]}`),
    );
    expect(imports.length).toBeGreaterThan(4);
    expect(imports.filter((l) => !/: \.\/[^/]+$/.test(l))).toEqual([]);
  });

  it('one module per family, each registered under its own name', () => {
    const shared = new Set(['index.ts', 'names.ts', 'types.ts', 'endpoint-rows.ts']);
    const modules = readdirSync(join(ROOT, ROOM)).filter((f) => f.endsWith('.ts') && !shared.has(f) && !f.endsWith('-endpoints.ts'));
    const catalogs = readdirSync(join(ROOT, ROOM)).filter((f) => f.endsWith('-endpoints.ts'));
    expect(catalogs.map((f) => f.slice(0, -'-endpoints.ts'.length)).sort()).toEqual([...FAMILIES].sort());
    expect(modules.map((f) => f.slice(0, -3)).sort()).toEqual([...FAMILIES].sort());
    expect(FAMILY_MODULES.map((m) => m.name)).toEqual([...FAMILIES]);
    expect(FAMILY_MODULES.map((m) => m.catalog.family)).toEqual([...FAMILIES]);
  });

  it("metering has one usage-reader module per family", () => {
    const readers = readdirSync(join(ROOT, 'src/metering/usage')).filter((f) => f.endsWith('.ts') && f !== 'slots.ts');
    expect(readers.map((f) => f.slice(0, -3)).sort()).toEqual([...FAMILIES].sort());
  });
});
