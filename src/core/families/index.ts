/**
 * The protocol families' registry. Entry family: which protocol the client speaks, and so which
 * error shape a deny takes, where the model is, which endpoints exist and how usage is read.
 * Resolved from, in order: the route's `context_extensions.protocol`, a configured path-prefix
 * table, then the path itself (each family's path rule; a path none claims is the default
 * family's). One module per family (`openai.ts`, `anthropic.ts`, `google.ts`, the shape in
 * `types.ts`); the rest of the code asks `familyModule(name)` and never compares family names.
 */
import { ANTHROPIC } from './anthropic.ts';
import { GOOGLE } from './google.ts';
import { OPENAI } from './openai.ts';
import type { ProtocolFamily } from './types.ts';

export type { ProtocolFamily } from './types.ts';

import { FAMILIES, isFamily, type Family } from './names.ts';

export { FAMILIES, isFamily, type Family } from './names.ts';

/** The family modules by name: a family without a module (or a module without a name) does not compile. */
const MODULES: { readonly [F in Family]: ProtocolFamily<F> } = { openai: OPENAI, anthropic: ANTHROPIC, google: GOOGLE };

/** The family modules, in `FAMILIES` order. */
export const FAMILY_MODULES: readonly ProtocolFamily<Family>[] = FAMILIES.map((f) => MODULES[f]);

/** The family a path none claims belongs to: OpenAI's protocol is the one OpenAI-compatible servers speak. */
export const DEFAULT_FAMILY: Family = 'openai';

/** The families' path rules as one table, in registry order (each family's exact paths, prefixes, model-method rule). */
const EXACT = 0;
const PREFIX = 1;
const MODEL_METHOD = 2;
const RULE_KIND: number[] = [];
const RULE_TEXT: string[] = [];
const RULE_FAMILY: Family[] = [];
for (const f of FAMILY_MODULES) {
  const add = (kind: number, text: string) => {
    RULE_KIND.push(kind);
    RULE_TEXT.push(text);
    RULE_FAMILY.push(f.name);
  };
  for (const p of f.paths.exact) add(EXACT, p);
  for (const p of f.paths.prefixes) add(PREFIX, p);
  if (f.paths.modelMethod) add(MODEL_METHOD, '');
}

function isModelMethodPath(p: string): boolean {
  const m = p.lastIndexOf('/models/');
  return m !== -1 && p.indexOf(':', m + 8) !== -1;
}

/** The module of family `name` (a `Family`: compile-checked). */
export function familyModule<F extends Family>(name: F): ProtocolFamily<F> {
  return MODULES[name] as ProtocolFamily<F>;
}

/** The module of a family named by untrusted text, or null (an unknown family is never taken for another). */
export function findFamily(name: string): ProtocolFamily<Family> | null {
  return isFamily(name) ? MODULES[name] : null;
}

/** One row of the operator's path-prefix table, e.g. `{ prefix: '/anthropic/', family: 'anthropic' }`. */
export interface PrefixRule {
  readonly prefix: string;
  readonly family: Family;
}

/** The path without its query string or fragment. */
export function pathOnly(path: string): string {
  let end = path.length;
  const q = path.indexOf('?');
  if (q !== -1) end = q;
  const h = path.indexOf('#');
  if (h !== -1 && h < end) end = h;
  return end === path.length ? path : path.slice(0, end);
}

/** The family a bare path implies: the first family whose path rules claim it, else the default (`familyOf`). */
export function familyFromPath(path: string): Family {
  const p = pathOnly(path);
  for (let i = 0; i < RULE_KIND.length; i++) {
    const k = RULE_KIND[i];
    if (k === EXACT ? p === RULE_TEXT[i] : k === PREFIX ? p.startsWith(RULE_TEXT[i]!) : isModelMethodPath(p)) return RULE_FAMILY[i]!;
  }
  return DEFAULT_FAMILY;
}

export const familyOf = familyFromPath;

export function resolveFamily(
  contextProtocol: string | undefined,
  path: string,
  prefixes: readonly PrefixRule[],
): Family {
  if (contextProtocol !== undefined) {
    const v = contextProtocol.trim().toLowerCase();
    if (isFamily(v)) return v;
  }
  for (const rule of prefixes) {
    if (path.startsWith(rule.prefix)) return rule.family;
  }
  return familyFromPath(path);
}
