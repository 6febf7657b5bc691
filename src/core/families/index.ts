/**
 * Entry family: which protocol the client speaks, and so which error shape a deny takes.
 * Resolved from, in order: the route's `context_extensions.protocol`, a configured
 * path-prefix table, then the path itself.
 */
export const FAMILIES = ['openai', 'anthropic', 'google'] as const;
export type Family = (typeof FAMILIES)[number];

export function isFamily(value: unknown): value is Family {
  return value === 'openai' || value === 'anthropic' || value === 'google';
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

/** The family a bare path implies: `/v1/messages…`, `/v1/complete` are Anthropic; Gemini/Vertex shapes are Google. */
export function familyFromPath(path: string): Family {
  const p = pathOnly(path);
  if (p === '/v1/complete' || p === '/v1/messages' || p.startsWith('/v1/messages/') || p.startsWith('/v1/messages?')) {
    return 'anthropic';
  }
  if (p.startsWith('/v1beta/') || p === '/v1beta') return 'google';
  // …/models/{model}:{method} (Gemini API, Vertex publishers/google/models/…)
  const m = p.lastIndexOf('/models/');
  if (m !== -1 && p.indexOf(':', m + 8) !== -1) return 'google';
  return 'openai';
}

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
