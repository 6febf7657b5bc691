/**
 * Allowed-model patterns (docs/models.md): `provider/model`, `provider/*` or `*`, compared
 * case-insensitively against the provider-qualified model. A bare name (`gpt-4o`) is accepted
 * too and matches only that exact unqualified name, i.e. a bare name sent to an OpenAI entry
 * (bare Anthropic and Google names are qualified first, so they need `anthropic/…`, `google/…`). The console validates patterns with
 * `modelPatternError` before writing them; the sidecar ignores any pattern that fails it (it can
 * never widen a key).
 */
import { familyModule, type Family } from '../families/index.ts';
import { isValidModelName } from './names.ts';
import { isValidModelPattern } from './pattern-rules.ts';

export { allowsEveryModel, isValidModelPattern, modelPatternError } from './pattern-rules.ts';

/**
 * The lower-cased, provider-qualified form a pattern is compared against. A bare name at an
 * Anthropic or Google entry gets that provider; Google's resource form `models/{m}` is `google/{m}`.
 * A bare name at an OpenAI entry stays bare (the gateway's OpenAI entry takes `provider/model`), so
 * only `*` matches it.
 */
export function qualifyModel(model: string, family: Family): string {
  const f = familyModule(family).model;
  let m = model.toLowerCase();
  if (f.resourcePrefix !== null && m.startsWith(f.resourcePrefix)) m = m.slice(f.resourcePrefix.length);
  if (m.includes('/')) return m;
  return f.bareProvider === null ? m : `${f.bareProvider}/${m}`;
}

/** Whether `model`, read at an entry of `family`, is allowed by any valid pattern in `allowed`. */
export function modelAllowed(allowed: readonly string[], model: string, family: Family): boolean {
  if (!isValidModelName(model)) return false;
  const q = qualifyModel(model, family);
  for (const raw of allowed) {
    if (!isValidModelPattern(raw)) continue;
    const p = raw.toLowerCase();
    if (p === '*' || p === q) return true;
    if (p.endsWith('/*') && q.length > p.length - 1 && q.startsWith(p.slice(0, -1))) return true;
  }
  return false;
}
