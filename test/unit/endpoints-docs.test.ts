/** docs/endpoints.md carries the whole catalog, generated from the family modules: the table equals the code. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BUILTIN_CATALOGS } from '../../src/core/endpoints/catalog.ts';
import { withCatalogTable } from '../../src/core/endpoints/table.ts';

const doc = readFileSync(new URL('../../docs/endpoints.md', import.meta.url), 'utf8');

describe('docs/endpoints.md', () => {
  it('has the catalog table of the code (regenerate: scripts/node scripts/endpoints-table.ts)', () => {
    expect(doc).toBe(withCatalogTable(doc));
  });

  it('lists every row (the control: the table is not empty)', () => {
    const rows = BUILTIN_CATALOGS.reduce((n, c) => n + c.rows.length, 0);
    expect(doc.split('\n').filter((l) => /^\| (GET|POST|PUT|PATCH|DELETE) \| `/.test(l))).toHaveLength(rows);
  });
});
