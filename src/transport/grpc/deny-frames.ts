/**
 * Prebuilt deny frames. A deny's CheckResponse depends on the family, the deny and the fixed
 * options, and on the request id, which it carries in headers and in the body. For the denies an
 * attack produces in bulk (malformed or unknown key, no key: a deny without detail or message) the
 * frame is encoded once per (family, code, status, length of the request id) and each answer is a
 * copy with the request id written in place. A deny with a whole message of its own (the endpoint
 * rule's refusals: a fixed text each) is templated the same way per message, from its second use.
 *
 * Where the id goes is found, not assumed: the frame is encoded with two probe ids of the same
 * length ("aaa…", "bbb…"), and the bytes that differ are the id's places. The template is kept only
 * when a third, mixed probe encoded directly equals the template filled in with it; otherwise (or
 * for an id with characters JSON would escape) the frame is encoded each time, as before.
 */
import { SAFE_REQUEST_ID, type CheckOutcome } from '../../authorizer.ts';
import type { Deny } from '../../core/decision.ts';

const MIXED = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._:@=+/-';

/** Whole messages templated (and messages remembered as seen once) at most. */
const MAX_MESSAGES = 64;

interface Template {
  readonly frame: Buffer;
  /** Start of each place the id goes. */
  readonly at: readonly number[];
}

export class DenyFrames {
  readonly #encode: (outcome: CheckOutcome) => Buffer;
  /** Per key: the template, or null when this shape cannot be templated. Bounded by codes × families × id lengths. */
  readonly #templates = new Map<string, Template | null>();
  /** Per whole message (`Deny.message`): its templates, as `#templates`; at most MAX_MESSAGES messages. */
  readonly #withMessage = new Map<string, Map<string, Template | null>>();
  /** Messages seen once (a message is templated from its second deny). */
  readonly #seenMessages = new Set<string>();

  constructor(encode: (outcome: CheckOutcome) => Buffer) {
    this.#encode = encode;
  }

  frame(outcome: CheckOutcome, d: Deny): Buffer {
    const id = outcome.requestId;
    // A deny with detail or a per-request wait (429 `retry-after`) is encoded each time.
    if (d.detail !== undefined || d.retryAfterMs !== undefined || !SAFE_REQUEST_ID.test(id)) return this.#encode(outcome);
    let templates = this.#templates;
    if (d.message !== undefined) {
      // A deny with a whole message of its own (the endpoint rule's: one fixed text per refusal) is
      // templated per message from the second time that message is seen; a one-off text (a model
      // deny names the model asked) is encoded once, as before. Both maps are bounded (cleared when full).
      const m = this.#withMessage.get(d.message);
      if (m === undefined) {
        if (!this.#seenMessages.has(d.message)) {
          if (this.#seenMessages.size >= MAX_MESSAGES) this.#seenMessages.clear();
          this.#seenMessages.add(d.message);
          return this.#encode(outcome);
        }
        if (this.#withMessage.size >= MAX_MESSAGES) this.#withMessage.clear();
        this.#withMessage.set(d.message, (templates = new Map()));
      } else templates = m;
    }
    const k = `${outcome.family}|${d.code}|${d.status}|${id.length}`;
    let t = templates.get(k);
    if (t === undefined) {
      t = this.#build(outcome, id.length);
      templates.set(k, t);
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
