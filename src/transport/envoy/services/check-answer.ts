/**
 * `CheckOutcome` → the framed CheckResponse bytes: the one encoder of a Check's answer. An allow
 * response is made of its `AllowParts` and the fixed options only (`allowResponse` sees nothing
 * else), so its bytes are kept under `allowKey` of those same parts (bounded; dropped whole when
 * full) and by the allow's identity for a cached key's plain allow; an allow of a rate-limited key is
 * assembled from kept parts and its per-request headers; a deny carries the request id and comes from a prebuilt frame with the id written in
 * (`DenyFrames`).
 */
import type { CheckOutcome } from '../../../authorizer.ts';
import type { Allow, AllowRate } from '../../../core/decision.ts';
import { checkResponseFields, encodeMessage, frameMessage, headerOptions, type Field } from '../../grpc/codec.ts';
import { DenyFrames } from '../../grpc/deny-frames.ts';
import type { ResponseOptions } from '../../response-options.ts';
import { allowKey, allowParts, allowResponse, checkResponse, overwrite, type AllowParts } from '../check.ts';
import { BOOKING_ID_HEX } from '../../../core/booking-id.ts';
import { PLACEHOLDER_BOOKING_ID, writeBookingHex } from '../../booking-id.ts';

/** Encoded allow responses kept. */
const ALLOW_FRAMES_MAX = 10_000;

export class CheckAnswers {
  readonly #opts: ResponseOptions;
  readonly #allowFrames = new Map<string, Buffer>();
  /**
   * The same bytes by the allow's identity: a cached key's plain allow is one object per grant
   * (`allow()` in core/decision.ts), so its answer is one WeakMap lookup (no parts, no key string).
   */
  readonly #byAllow = new WeakMap<Allow, Buffer>();
  /** Rated allows: the parts that do not change per request, by parts and limit (bounded like the frames). */
  readonly #ratedParts = new Map<string, RatedParts>();
  readonly #denyFrames: DenyFrames;
  /** Allows of rate-limited keys encoded per request (tests: keys without rates never add to it). */
  ratedBuilt = 0;

  constructor(opts: ResponseOptions) {
    this.#opts = opts;
    this.#denyFrames = new DenyFrames((o) => frameMessage(checkResponseFields(checkResponse(o, opts))));
  }

  /**
   * The framed CheckResponse for `outcome` (a deny: shared bytes, never written to). An allow is a
   * fresh copy of its kept bytes with a fresh booking id in its last bytes (`stamp`).
   */
  frame(outcome: CheckOutcome): Buffer {
    const d = outcome.decision;
    if (!d.allow) return this.#denyFrames.frame(outcome, d);
    return stamp(this.#allowFrame(d));
  }

  /** The allow's bytes with the placeholder booking id (kept: never written to). */
  #allowFrame(d: Allow): Buffer {
    const known = this.#byAllow.get(d);
    if (known !== undefined) return known;
    const parts = allowParts(d);
    if (d.upstream !== undefined) return this.#withCredential(d, parts);
    // A rate-limited key's allow carries headers that change with every request (remaining, reset):
    // built each time, never kept. Keys and accounts without rates (`rate` absent) keep this cache.
    if (d.rate != null) {
      this.ratedBuilt++;
      return this.#rated(parts, d.rate);
    }
    const k = allowKey(parts);
    let frame = this.#allowFrames.get(k);
    if (frame === undefined) {
      frame = frameMessage(checkResponseFields(allowResponse(parts, this.#opts)));
      if (!endsWithPlaceholder(frame)) throw new Error('CheckAnswers: the booking id is not the last bytes of an allow');
      if (this.#allowFrames.size >= ALLOW_FRAMES_MAX) this.#allowFrames.clear();
      this.#allowFrames.set(k, frame);
    }
    if (d.model === null) this.#byAllow.set(d, frame);
    return frame;
  }

  /**
   * An allow carrying an account's own credential: its bytes hold the secret, so they are kept only
   * by the allow's identity (a plain allow is one object per credential version and grant: dropped
   * with them), never under `allowKey` in the long-lived maps; a rated or model-read one is built
   * each time.
   */
  #withCredential(d: Allow, parts: AllowParts): Buffer {
    if (d.rate != null) {
      this.ratedBuilt++;
      return frameMessage(checkResponseFields(allowResponse(parts, this.#opts, d.rate)));
    }
    const frame = frameMessage(checkResponseFields(allowResponse(parts, this.#opts)));
    if (d.model === null) this.#byAllow.set(d, frame);
    return frame;
  }

  /**
   * A rated allow: only its `x-ratelimit-*` headers (OkHttpResponse.response_headers_to_add, the last
   * field of ok_response) change per request. The rest is encoded once per (parts, limit) and kept:
   * status, ok_response's fields before those headers, dynamic_metadata; each answer is those bytes
   * with the headers encoded after ok_response's fields. Same bytes as encoding the whole response
   * (test/unit/envoy-check.test.ts).
   */
  #rated(parts: AllowParts, rate: AllowRate): Buffer {
    const k = allowKey(parts) + (rate.limit === null ? '-' : `${rate.limit.count}/${rate.limit.per}`);
    let t = this.#ratedParts.get(k);
    if (t === undefined) {
      const fields = checkResponseFields(allowResponse(parts, this.#opts, { headers: [], limit: rate.limit }));
      const [st, ok, meta] = fields;
      if (fields.length !== 3 || st![0] !== 1 || ok![0] !== 3 || meta![0] !== 4) {
        return frameMessage(checkResponseFields(allowResponse(parts, this.#opts, rate)));
      }
      t = { status: encodeMessage(st![1] as readonly Field[]), ok: encodeMessage(ok![1] as readonly Field[]), meta: encodeMessage(meta![1] as readonly Field[]) };
      if (this.#ratedParts.size >= ALLOW_FRAMES_MAX) this.#ratedParts.clear();
      this.#ratedParts.set(k, t);
    }
    const headers = rate.headers.length === 0 ? t.ok : Buffer.concat([t.ok, encodeMessage(headerOptions(rate.headers.map(([n, v]) => overwrite(n, v)), 6))]);
    return frameMessage([
      [1, t.status],
      [3, headers],
      [4, t.meta],
    ]);
  }
}

const PLACEHOLDER = Buffer.from(PLACEHOLDER_BOOKING_ID, 'latin1');

function endsWithPlaceholder(frame: Buffer): boolean {
  return frame.length >= PLACEHOLDER.length && frame.subarray(frame.length - PLACEHOLDER.length).equals(PLACEHOLDER);
}

/**
 * A copy of an allow's bytes with a fresh booking id: the dynamic metadata's last entry is
 * `booking_id` and the metadata is the answer's last field, so the id's hex digits are the last
 * `BOOKING_ID_HEX` bytes (same length for every id: no length in the frame changes).
 */
function stamp(frame: Buffer): Buffer {
  const out = Buffer.allocUnsafe(frame.length);
  frame.copy(out);
  writeBookingHex(out, out.length - BOOKING_ID_HEX);
  return out;
}

/** The kept bytes of a rated allow: the status, ok_response's fields before the rate headers, the metadata. */
interface RatedParts {
  readonly status: Buffer;
  readonly ok: Buffer;
  readonly meta: Buffer;
}
