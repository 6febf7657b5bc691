/**
 * What a model name may look like, which field names a lenient parser could take for `model`, and
 * what a body reader answers. Shared by the JSON, multipart and path readers (docs/models.md,
 * "Certainty").
 */

/** What a body reader (JSON, multipart) found: one model, no model, or a refusal to say. */
export type BodyScan<Refusal extends string> =
  | { readonly kind: 'model'; readonly model: string }
  | { readonly kind: 'absent' }
  | { readonly kind: 'refused'; readonly refusal: Refusal };

/** Longest model name keygate accepts (the schema's longest allowed-model pattern). */
export const MAX_MODEL_LENGTH = 256;

/** One model-name character: ASCII letters, digits and `. _ : @ / -`. */
const MODEL_CHAR = /^[A-Za-z0-9._:@/-]+$/;

/** The name rule in words, for deny messages and pattern errors. */
export const MODEL_NAME_RULE = '1-256 characters of letters, digits and . _ : @ / -';

/**
 * A model name keygate will vouch for: 1-256 characters of a plain ASCII set, and when it has `/`
 * parts, none empty, `.` or `..`. Anything else (a comma a router splits on, whitespace, control or
 * non-ASCII characters, `%`, `+`, `=`, `~`, `?`, `#`, `\`, `*`) could be read differently by the
 * upstream, so it is refused.
 */
export function isValidModelName(name: string): boolean {
  if (name.length === 0 || name.length > MAX_MODEL_LENGTH || !MODEL_CHAR.test(name)) return false;
  if (!name.includes('/') && name !== '.' && name !== '..') return true;
  for (const part of name.split('/')) {
    if (part === '' || part === '.' || part === '..') return false;
  }
  return true;
}

/**
 * True when a field name other than exactly `model` could still be read as `model` by some
 * parser: case-insensitive matching (Go's encoding/json), Unicode case folding, compatibility
 * forms (NFKC), a NUL that C-string code stops at, surrounding whitespace.
 */
export function couldBeReadAsModel(name: string): boolean {
  if (name === 'model') return false;
  const nul = name.indexOf('\0');
  const k = nul === -1 ? name : name.slice(0, nul);
  if (k.length > 64) return false;
  for (const v of [k, k.normalize('NFKC')]) {
    for (const f of [v.toLowerCase(), v.toUpperCase().toLowerCase()]) {
      if (f === 'model' || f.trim() === 'model') return true;
    }
  }
  return false;
}
