/**
 * Phase: which model a request asks for (SPEC §1 row 6, §4). PLACEHOLDER — replaced by the
 * model-reading work (issue 4): body scanner, path forms, multipart.
 */
import type { Family } from '../family.ts';

export interface ModelRequest {
  readonly family: Family;
  readonly method: string;
  /** Path with query, as the proxy saw it. */
  readonly path: string;
  readonly contentType: string | undefined;
  /** The body as the proxy sent it, or undefined when it sent none. */
  readonly body: Uint8Array | string | undefined;
  /** True when the proxy says the body was cut short (allow_partial_message). */
  readonly bodyTruncated: boolean;
}

export type ModelRead =
  | { readonly kind: 'model'; readonly model: string }
  | { readonly kind: 'uncertain'; readonly reason: string };

export function readModel(req: ModelRequest): ModelRead {
  if (req.body === undefined) return { kind: 'uncertain', reason: 'the request body was not sent to the gateway\'s key check' };
  if (req.bodyTruncated) return { kind: 'uncertain', reason: 'the request body was too large to read the model' };
  try {
    const text = typeof req.body === 'string' ? req.body : Buffer.from(req.body).toString('utf8');
    const doc: unknown = JSON.parse(text);
    if (doc !== null && typeof doc === 'object' && !Array.isArray(doc)) {
      const m = (doc as Record<string, unknown>).model;
      if (typeof m === 'string') return { kind: 'model', model: m };
    }
  } catch {
    /* fallthrough */
  }
  return { kind: 'uncertain', reason: 'the request body names no model' };
}

/** The provider-qualified form a pattern is compared against: bare Anthropic/Google names get their provider. */
export function qualifyModel(model: string, family: Family): string {
  const m = model.toLowerCase();
  if (m.includes('/')) return m;
  if (family === 'anthropic') return `anthropic/${m}`;
  if (family === 'google') return `google/${m}`;
  return m;
}

/** Allowed-model patterns: `provider/model`, `provider/*` or `*`, case-insensitive. */
export function modelAllowed(allowed: readonly string[], model: string, family: Family): boolean {
  const q = qualifyModel(model, family);
  for (const raw of allowed) {
    const p = raw.toLowerCase();
    if (p === '*' || p === q) return true;
    if (p.endsWith('/*') && q.startsWith(p.slice(0, -1)) && q.length > p.length - 1) return true;
  }
  return false;
}
