/** Writes the endpoint catalog's table into docs/endpoints.md (the section between its markers). */
import { readFileSync, writeFileSync } from 'node:fs';
import { withCatalogTable } from '../src/core/endpoints/table.ts';

const path = new URL('../docs/endpoints.md', import.meta.url);
writeFileSync(path, withCatalogTable(readFileSync(path, 'utf8')));
