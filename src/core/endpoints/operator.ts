/**
 * The operator's endpoint file (`KEYGATE_ENDPOINTS`, docs/endpoints.md "The operator's file"): YAML,
 * a list of rows that add paths to the catalog or reclassify builtin ones, checked whole at start.
 *
 * ```yaml
 * endpoints:
 *   - { family: openai, method: POST, path: /v1/custom/run, class: metered, model: body, usage: chat }
 *   - { family: openai, method: GET, path: /v1/files, class: free, model: none }
 * ```
 *
 * Pure: the caller reads the file. A bad file is an Error with one line naming the row and the field.
 */
import { parse } from 'yaml';
import { z } from 'zod';
import { FAMILIES, type Family } from '../families/index.ts';
import { templateError } from './catalog.ts';
import { ENDPOINT_CLASSES, ENDPOINT_METHODS, MODEL_PLACES, USAGE_READERS, type EndpointRow } from '../families/endpoint-rows.ts';

export type OperatorRow = EndpointRow & { readonly family: Family };

const Row = z.strictObject({
  family: z.enum(FAMILIES),
  method: z.enum(ENDPOINT_METHODS),
  path: z.string().max(500).superRefine((p, ctx) => {
    const e = templateError(p);
    if (e !== undefined) ctx.addIssue({ code: 'custom', message: e });
  }),
  class: z.enum(ENDPOINT_CLASSES),
  model: z.enum(MODEL_PLACES).default('none'),
  usage: z.enum(USAGE_READERS).nullable().default(null),
  /** `owned` rows: whose owned records hold the id (default: the family). */
  owner: z.string().regex(/^[a-z0-9-]{1,32}$/).optional(),
  /** Check the body's references (a row whose body may name provider objects). */
  refs: z.enum(FAMILIES).optional(),
});

const File = z.strictObject({ endpoints: z.array(Row).max(10_000) });

/** The rows of the operator's file `text`; throws Error with a one-line reason. */
export function parseOperatorEndpoints(text: string): OperatorRow[] {
  let doc: unknown;
  try {
    doc = parse(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new Error(`not YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) return [];
  const r = File.safeParse(doc);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.join('.') : 'the file';
    throw new Error(`${where}: ${issue.message}`.replace(/\s+/g, ' '));
  }
  const seen = new Set<string>();
  const out: OperatorRow[] = [];
  r.data.endpoints.forEach((e, i) => {
    const id = `${e.family} ${e.method} ${e.path}`;
    if (seen.has(id)) throw new Error(`endpoints.${i}: ${id} is listed twice`);
    seen.add(id);
    if (e.class === 'owned' && !/\{id\}/.test(e.path)) throw new Error(`endpoints.${i}: an owned row names the object by {id} in its path`);
    if (e.class === 'metered' && e.usage === null) throw new Error(`endpoints.${i}: a metered row names its usage reader (usage: ${USAGE_READERS.join('|')})`);
    out.push(Object.freeze({ family: e.family, method: e.method, path: e.path, class: e.class, model: e.model, usage: e.usage, ...(e.owner ? { owner: e.owner } : {}), ...(e.refs ? { refs: e.refs } : {}) }));
  });
  return out;
}
