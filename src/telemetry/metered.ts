/**
 * What the metering service tells the rest of the sidecar about each booked response, and the hub
 * it tells it through. The metering service calls `MeteredHub.booked(response)` once per booking
 * written; observers (per-account spend and token metrics, the OpenTelemetry span and GenAI token
 * metrics) subscribe only when they are on, so with none subscribed a booking costs one empty loop.
 * Observers must not throw and must not keep the object past the call.
 */
import type { Family } from '../core/families/index.ts';

/** The kind of generation call a metered endpoint is (the GenAI `gen_ai.operation.name` follows from it). */
export type MeteredOperation = 'chat' | 'completions' | 'embeddings' | 'responses' | 'images' | 'audio' | 'messages' | 'generate' | 'stream-generate';

/** One booked response: ids, tokens and price, never key material. */
export interface MeteredResponse {
  /** The booking's request id. */
  readonly requestId: string;
  readonly accountId: string;
  readonly keyId: string;
  readonly family: Family;
  readonly operation: MeteredOperation;
  /** The model the request named, when read. */
  readonly requestModel: string | null;
  /** The model the response named (else the one priced), when known. */
  readonly responseModel: string | null;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Micro-units booked for it (0 when the account is not metered or the model has no price). */
  readonly costMicros: number;
  /** The `traceparent` (and `tracestate`) of the request as the metering filter saw it, if any. */
  readonly traceparent?: string;
  readonly tracestate?: string;
  /** Wall-clock milliseconds of the response's first message to the metering service, and of its booking. */
  readonly startedAtMs: number;
  readonly endedAtMs: number;
}

export type MeteredObserver = (response: MeteredResponse) => void;

export class MeteredHub {
  readonly #observers: MeteredObserver[] = [];

  observe(fn: MeteredObserver): void {
    this.#observers.push(fn);
  }

  /** Called by the metering service once a booking is written. */
  booked(response: MeteredResponse): void {
    const list = this.#observers;
    for (let i = 0; i < list.length; i++) list[i]!(response);
  }

  get observed(): boolean {
    return this.#observers.length > 0;
  }
}

/** What the report reads of a booking (`Booking` of src/metering/session.ts; the meter reports to this hub, telemetry does not import it). */
export interface BookedFields {
  readonly request_id: string;
  readonly account: string;
  readonly key_id: string;
  readonly family: Family;
  readonly model: string | null;
  readonly input_tokens: number;
  readonly output_tokens: number;
}

/**
 * The report of a booking: its ids, family and normalised counts (input with cached and cache
 * writes, output with reasoning: what the account was charged for), plus what the metering service
 * knows beside it.
 */
export function meteredResponseOf(
  booking: BookedFields,
  more: {
    readonly operation: MeteredOperation;
    readonly requestModel: string | null;
    readonly costMicros: number;
    readonly startedAtMs: number;
    readonly endedAtMs: number;
    readonly traceparent?: string;
    readonly tracestate?: string;
  },
): MeteredResponse {
  return {
    requestId: booking.request_id,
    accountId: booking.account,
    keyId: booking.key_id,
    family: booking.family,
    responseModel: booking.model,
    inputTokens: booking.input_tokens,
    outputTokens: booking.output_tokens,
    ...more,
  };
}
