/**
 * Allowed-model patterns, their syntax alone (no family: the page's bundle takes it) (docs/models.md): `provider/model`, `provider/*` or `*`, compared
 * case-insensitively against the provider-qualified model. A bare name (`gpt-4o`) is accepted
 * too and matches only that exact unqualified name, i.e. a bare name sent to an OpenAI entry
 * (bare Anthropic and Google names are qualified first, so they need `anthropic/…`, `google/…`). The console validates patterns with
 * `modelPatternError` before writing them; the sidecar ignores any pattern that fails it (it can
 * never widen a key).
 */
import { isValidModelName, MAX_MODEL_LENGTH } from './names.ts';

const PROVIDER = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Why `pattern` is not a valid allowed-model pattern (a phrase completing "The pattern …"), or null. */
export function modelPatternError(pattern: string): string | null {
  if (pattern === '*') return null;
  if (pattern.length === 0) return 'is empty';
  if (pattern.length > MAX_MODEL_LENGTH) return `is longer than ${MAX_MODEL_LENGTH} characters`;
  const slash = pattern.indexOf('/');
  if (slash === -1) {
    // A bare name: matches exactly that unqualified name (as sent to an OpenAI entry).
    if (pattern.includes('*')) return 'may use "*" only as the whole model part ("provider/*") or alone ("*")';
    return isValidModelName(pattern) ? null : 'must be "provider/model", "provider/*", "*" or a bare model name';
  }
  if (!PROVIDER.test(pattern.slice(0, slash))) {
    return 'must start with a provider of letters, digits, ".", "_" or "-" followed by "/"';
  }
  const rest = pattern.slice(slash + 1);
  if (rest === '*') return null;
  if (rest.includes('*')) return 'may use "*" only as the whole model part ("provider/*") or alone ("*")';
  if (!isValidModelName(pattern)) {
    return 'must be a model name of letters, digits and . _ : @ / - (no empty, "." or ".." parts)';
  }
  return null;
}

export function isValidModelPattern(pattern: string): boolean {
  return modelPatternError(pattern) === null;
}

/**
 * True when the patterns allow every named model (`*`). For the console: such a list is better
 * stored as "all models" (absent), because the sidecar still requires a restricted key's request
 * to name a model with certainty, even when `*` would allow it.
 */
export function allowsEveryModel(patterns: readonly string[]): boolean {
  return patterns.includes('*');
}
