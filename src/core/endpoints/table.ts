/**
 * The catalog as the Markdown table docs/endpoints.md carries (between `<!-- catalog:start -->` and
 * `<!-- catalog:end -->`): generated from the family modules, so the docs cannot drift from the code
 * (`test/unit/endpoints-docs.test.ts`; regenerate with `scripts/node scripts/endpoints-table.ts`).
 */
import { BUILTIN_CATALOGS } from './catalog.ts';

export const TABLE_START = '<!-- catalog:start -->';
export const TABLE_END = '<!-- catalog:end -->';

export function catalogTable(): string {
  const out: string[] = [];
  for (const c of BUILTIN_CATALOGS) {
    out.push(`### ${c.family}`, '', `Sources: ${c.sources.map((s) => (s.startsWith('http') ? `<${s.split(' ')[0]}>${s.includes(' ') ? ` ${s.slice(s.indexOf(' ') + 1)}` : ''}` : `\`${s}\``)).join('; ')}.`, '');
    out.push('| method | path | class | model | usage reader | body references |', '|---|---|---|---|---|---|');
    for (const r of c.rows) {
      const owner = r.class === 'owned' ? ` (${r.owner ?? c.family} records)` : '';
      out.push(`| ${r.method} | \`${r.path}\` | ${r.class}${owner} | ${r.model} | ${r.usage ?? '—'} | ${r.refs ?? '—'} |`);
    }
    out.push('');
  }
  return out.join('\n');
}

/** `doc` with its catalog section replaced by the generated table. */
export function withCatalogTable(doc: string): string {
  const a = doc.indexOf(TABLE_START);
  const b = doc.indexOf(TABLE_END);
  if (a === -1 || b < a) throw new Error(`the document has no ${TABLE_START} … ${TABLE_END} section`);
  return `${doc.slice(0, a + TABLE_START.length)}\n\n${catalogTable()}\n${doc.slice(b)}`;
}
