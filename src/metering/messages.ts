/**
 * What the meter reads of one ext_proc message and what it answers, typed: the transport
 * (`src/transport/envoy/ext-proc.ts`) decodes each `ProcessingRequest` into a `ProcessingRequest`
 * and encodes each `MeterAnswer` into a `ProcessingResponse`. Metering knows no protobuf.
 */

export type Phase =
  | 'request_headers'
  | 'response_headers'
  | 'request_body'
  | 'response_body'
  | 'request_trailers'
  | 'response_trailers';

/** What ext_authz forwarded: the allow's identity, model and booking id (absent fields stay undefined). */
export interface AuthzMetadata {
  keyId?: string;
  accountId?: string;
  model?: string;
  /** `booking_id` (gRPC Check), or `x-keygate-booking-id` (HTTP authz through `dynamic_metadata_from_headers`). */
  bookingId?: string;
}

/** One decoded ProcessingRequest, the fields metering reads. */
export interface ProcessingRequest {
  /** The phase carried, or null when the oneof is absent (nothing to answer). */
  phase: Phase | null;
  /** Header names (lower case as Envoy sends them) and values, in order: [name, value, name, value…]. */
  headers: string[] | null;
  /** The body chunk (a view of the message buffer: copy it to keep it past the handler). */
  body: Buffer | null;
  endOfStream: boolean;
  /** Null when absent, or when not decoded (`MeterStream.wantsMetadata` was false). */
  metadata: AuthzMetadata | null;
  observabilityMode: boolean;
}

/** A value of the headers list: the last header of that name, or undefined. */
export function headerOf(headers: readonly string[] | null, name: string): string | undefined {
  if (headers === null) return undefined;
  for (let i = headers.length - 2; i >= 0; i -= 2) if (headers[i] === name) return headers[i + 1];
  return undefined;
}

/**
 * The answer to one message: `continue` (the phase's empty answer: nothing changed; one shared
 * object per phase, `continueAnswer`), the request body replaced, or an immediate response (Envoy
 * answers the client with it and sends nothing upstream).
 */
export type MeterAnswer =
  | { readonly kind: 'continue'; readonly phase: Phase }
  | { readonly kind: 'replace-request-body'; readonly body: Uint8Array; readonly removeContentLength: boolean }
  | {
      readonly kind: 'immediate';
      readonly status: number;
      readonly headers: ReadonlyArray<readonly [string, string]>;
      readonly body: string;
      readonly details: string;
    };

/** Every phase a ProcessingResponse answers, in the order of the ProcessingRequest oneof (fields 2..7). */
export const ANSWER_PHASES: readonly Phase[] = Object.freeze([
  'request_headers',
  'response_headers',
  'request_body',
  'response_body',
  'request_trailers',
  'response_trailers',
] as Phase[]);

const CONTINUE = Object.freeze(
  Object.fromEntries(ANSWER_PHASES.map((phase) => [phase, Object.freeze({ kind: 'continue', phase })])) as Record<Phase, MeterAnswer>,
);

/** The answer to one phase that changes nothing (shared constant: compare by identity). */
export function continueAnswer(phase: Phase): MeterAnswer {
  return CONTINUE[phase];
}
