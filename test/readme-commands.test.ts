/**
 * Every command the README and docs show is one that works after scripts/install: each
 * `bin/keygate …` example in a shell block parses with the CLI's own parser (actions replaced by
 * no-ops, so nothing runs), each `scripts/node <file>` and `npm run <script>` names something that
 * exists, no block runs a bare `keygate` or a bare `node <file>.ts` (the system Node may be older
 * than 24), and the README's first two commands are the documented ones.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli/main.ts';

const ROOT = new URL('../', import.meta.url);
const DOCS = ['README.md', ...readdirSync(new URL('docs/', ROOT)).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** Lines of fenced shell blocks, with their file and line number. */
function shellLines(): { file: string; line: number; text: string }[] {
  const out: { file: string; line: number; text: string }[] = [];
  for (const file of DOCS) {
    let inShell = false;
    readFileSync(new URL(file, ROOT), 'utf8')
      .split('\n')
      .forEach((text, i) => {
        const fence = /^```(\w*)/.exec(text);
        if (fence) {
          inShell = !inShell && (fence[1] === 'sh' || fence[1] === 'bash' || fence[1] === 'shell');
          return;
        }
        if (inShell) out.push({ file, line: i + 1, text: text.replace(/^\$ /, '') });
      });
  }
  return out;
}

/** Shell words of one command (quotes, backslash escapes), up to an unquoted `#`, `|`, `;` or `&` (also `&&`). */
export function shellWords(s: string): string[] {
  const words: string[] = [];
  let cur: string | null = null;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "'" || c === '"') {
      const end = s.indexOf(c, i + 1);
      cur = (cur ?? '') + s.slice(i + 1, end === -1 ? s.length : end);
      i = end === -1 ? s.length : end;
    } else if (c === '\\' && i + 1 < s.length) {
      cur = (cur ?? '') + s[++i];
    } else if (/\s/.test(c)) {
      if (cur !== null) words.push(cur);
      cur = null;
    } else if ((c === '#' && cur === null) || c === '|' || c === ';' || c === '&') {
      break;
    } else cur = (cur ?? '') + c;
  }
  if (cur !== null) words.push(cur);
  return words;
}

function silence(cmd: Command): void {
  cmd.action(() => {});
  cmd.configureOutput({ writeErr: () => {}, writeOut: () => {} });
  cmd.commands.forEach(silence);
}

async function parses(argv: string[]): Promise<string | null> {
  const program = buildProgram();
  silence(program);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

const lines = shellLines();
/** Commands of a line (split at `&&`) that run bin/keygate, after any VAR=value assignments. */
const examples = lines.flatMap((l) =>
  l.text.split('&&').flatMap((part) => {
    const words = shellWords(part);
    while (words.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(words[0]!)) words.shift();
    return words[0] === 'bin/keygate' ? [{ ...l, argv: words.slice(1) }] : [];
  }),
);

/**
 * Commands shown inline in prose with their options (`keygate tokens create --name owner --account ID`,
 * `bin/keygate …`), not bare command names (`keygate usage record`), `--help`/`--version`, or usage
 * synopses with `[optional]` parts.
 */
const inline = DOCS.flatMap((file) =>
  readFileSync(new URL(file, ROOT), 'utf8')
    .split('\n')
    .flatMap((text, i) =>
      [...text.matchAll(/`(?:bin\/)?keygate ([^`]+)`/g)]
        .filter((m) => !/[[|]/.test(m[1]!) && /(^|\s)--(?!help\b|version\b)[a-z]/.test(m[1]!))
        .map((m) => ({ file, line: i + 1, argv: shellWords(m[1]!) })),
    ),
);

describe('README and docs commands', () => {
  it('starts with the two first-hour commands', () => {
    const readme = readFileSync(new URL('README.md', ROOT), 'utf8');
    const first = /```sh\n([^\n]*)\n([^\n]*)\n```/.exec(readme)!;
    expect(first[1]).toMatch(/^scripts\/install && bin\/keygate dev\s/);
    expect(first[2]).toMatch(/^scripts\/install && scripts\/test\s/);
  });

  it('has bin/keygate examples to check', () => {
    expect(examples.length).toBeGreaterThanOrEqual(10);
  });

  it.each(examples.map((e) => [`${e.file}:${e.line}`, e.argv] as const))('%s parses with the CLI parser', async (_where, argv) => {
    expect(await parses([...argv])).toBeNull();
  });

  it('has inline commands to check', () => {
    expect(inline.length).toBeGreaterThanOrEqual(3);
  });

  it.each(inline.map((e) => [`${e.file}:${e.line} ${e.argv.join(' ')}`, e.argv] as const))('inline %s parses with the CLI parser', async (_where, argv) => {
    expect(await parses([...argv])).toBeNull();
  });

  it('the parser check catches a wrong example', async () => {
    expect(await parses(['keys', 'list', '--account', 'x', '--acount'])).toMatch(/unknown option/);
    expect(await parses(['keys', 'create', '--account', 'x'])).toMatch(/--name/);
  });

  it('runs no bare keygate and no bare node on a .ts file', () => {
    for (const l of lines) {
      const words = shellWords(l.text);
      expect(words[0], `${l.file}:${l.line}`).not.toBe('keygate');
      expect(words[0] === 'node' && /\.ts$/.test(words[1] ?? ''), `${l.file}:${l.line}`).toBe(false);
    }
    for (const file of DOCS) {
      const text = readFileSync(new URL(file, ROOT), 'utf8');
      expect(text, file).not.toMatch(/`node [\w/.-]+\.ts/);
      expect(text, file).not.toMatch(/(^|\s)\$ keygate /m);
    }
  });

  it('names only scripts and files that exist', () => {
    const scripts = (JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { scripts: Record<string, string> }).scripts;
    for (const file of DOCS) {
      const text = readFileSync(new URL(file, ROOT), 'utf8');
      for (const m of text.matchAll(/scripts\/node ([\w/.-]+\.ts)/g)) expect(existsSync(new URL(m[1]!, ROOT)), `${file}: ${m[1]}`).toBe(true);
      for (const m of text.matchAll(/npm run (\w[\w:-]*)/g)) expect(scripts[m[1]!], `${file}: npm run ${m[1]}`).toBeDefined();
    }
  });
});
