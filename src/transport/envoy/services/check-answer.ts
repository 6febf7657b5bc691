/**
 * `CheckOutcome` → the framed CheckResponse bytes: the one encoder of a Check's answer. An allow
 * response is made of its `AllowParts` and the fixed options only (`allowResponse` sees nothing
 * else), so its bytes are kept under `allowKey` of those same parts (bounded; dropped whole when
 * full); an allow of a rate-limited key is encoded each time (its headers change per request); a deny carries the request id and comes from a prebuilt frame with the id written in
 * (`DenyFrames`).
 */
import type { CheckOutcome } from '../../../authorizer.ts';
import { checkResponseFields, frameMessage } from '../../grpc/codec.ts';
import { DenyFrames } from '../../grpc/deny-frames.ts';
import type { ResponseOptions } from '../../response-options.ts';
import { allowKey, allowParts, allowResponse, checkResponse } from '../check.ts';

/** Encoded allow responses kept. */
const ALLOW_FRAMES_MAX = 10_000;

export class CheckAnswers {
  readonly #opts: ResponseOptions;
  readonly #allowFrames = new Map<string, Buffer>();
  readonly #denyFrames: DenyFrames;
  /** Allows of rate-limited keys encoded per request (tests: keys without rates never add to it). */
  ratedBuilt = 0;

  constructor(opts: ResponseOptions) {
    this.#opts = opts;
    this.#denyFrames = new DenyFrames((o) => frameMessage(checkResponseFields(checkResponse(o, opts))));
  }

  /** The framed CheckResponse for `outcome` (shared bytes: never written to). */
  frame(outcome: CheckOutcome): Buffer {
    const d = outcome.decision;
    if (!d.allow) return this.#denyFrames.frame(outcome, d);
    const parts = allowParts(d);
    // A rate-limited key's allow carries headers that change with every request (remaining, reset):
    // built each time, never kept. Keys and accounts without rates (`rate` absent) keep this cache.
    if (d.rate != null) {
      this.ratedBuilt++;
      return frameMessage(checkResponseFields(allowResponse(parts, this.#opts, d.rate)));
    }
    const k = allowKey(parts);
    let frame = this.#allowFrames.get(k);
    if (frame === undefined) {
      frame = frameMessage(checkResponseFields(allowResponse(parts, this.#opts)));
      if (this.#allowFrames.size >= ALLOW_FRAMES_MAX) this.#allowFrames.clear();
      this.#allowFrames.set(k, frame);
    }
    return frame;
  }
}
