/**
 * Prebuilt deny frames. A deny's CheckResponse depends on the family, the deny and the fixed
 * options, and on the request id, which it carries in headers and in the body. For the denies an
 * attack produces in bulk (malformed or unknown key, no key: a deny without detail or message) the
 * frame is encoded once per (family, code, status, length of the request id) and each answer is a
 * copy with the request id written in place.
 *
 * Where the id goes is found, not assumed: the frame is encoded with two probe ids of the same
 * length ("aaa…", "bbb…"), and the bytes that differ are the id's places. The template is kept only
 * when a third, mixed probe encoded directly equals the template filled in with it; otherwise (or
 * for an id with characters JSON would escape) the frame is encoded each time, as before.
 */
import { SAFE_REQUEST_ID, type CheckOutcome } from '../../authorizer.ts';
import type { Deny } from '../../core/decision.ts';

const MIXED = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._:@=+/-';

interface Template {
  readonly frame: Buffer;
  /** Start of each place the id goes. */
  readonly at: readonly number[];
}

export class DenyFrames {
  readonly #encode: (outcome: CheckOutcome) => Buffer;
  /** Per key: the template, or null when this shape cannot be templated. Bounded by codes × families × id lengths. */
  readonly #templates = new Map<string, Template | null>();

  constructor(encode: (outcome: CheckOutcome) => Buffer) {
    this.#encode = encode;
  }

  frame(outcome: CheckOutcome, d: Deny): Buffer {
    const id = outcome.requestId;
    // A deny with its own text or a per-request wait (429 `retry-after`) is encoded each time.
    if (d.detail !== undefined || d.message !== undefined || d.retryAfterMs !== undefined || !SAFE_REQUEST_ID.test(id)) return this.#encode(outcome);
    const k = `${outcome.family}|${d.code}|${d.status}|${id.length}`;
    let t = this.#templates.get(k);
    if (t === undefined) {
      t = this.#build(outcome, id.length);
      this.#templates.set(k, t);
    }
    return t === null ? this.#encode(outcome) : fill(t, id);
  }

  #build(outcome: CheckOutcome, n: number): Template | null {
    const a = this.#encode({ ...outcome, requestId: 'a'.repeat(n) });
    const b = this.#encode({ ...outcome, requestId: 'b'.repeat(n) });
    if (a.length !== b.length) return null;
    const at: number[] = [];
    for (let i = 0; i < a.length; ) {
      if (a[i] === b[i]) {
        i++;
        continue;
      }
      let j = i;
      while (j < a.length && a[j] !== b[j]) j++;
      if ((j - i) % n !== 0) return null;
      for (let p = i; p < j; p += n) at.push(p);
      i = j;
    }
    const t: Template = { frame: a, at };
    const probe = MIXED.repeat(Math.ceil(n / MIXED.length)).slice(0, n);
    return fill(t, probe).equals(this.#encode({ ...outcome, requestId: probe })) ? t : null;
  }
}

function fill(t: Template, id: string): Buffer {
  const out = Buffer.allocUnsafe(t.frame.length);
  t.frame.copy(out);
  for (const p of t.at) out.write(id, p, id.length, 'latin1');
  return out;
}
