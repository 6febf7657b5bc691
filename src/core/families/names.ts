/**
 * The family names alone (no module, no catalog): what a reader of a name needs — config, the
 * credential envelope, the page's bundle — without loading the families' modules and catalogs.
 */

/** The family names, in the registry's order (the docs' and the catalog's order). */
export const FAMILIES = ['openai', 'anthropic', 'google'] as const;
export type Family = (typeof FAMILIES)[number];

export function isFamily(value: unknown): value is Family {
  return typeof value === 'string' && (FAMILIES as readonly string[]).includes(value);
}
