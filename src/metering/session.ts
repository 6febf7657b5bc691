/**
 * One metered request: a state machine fed the decoded messages of one ext_proc stream (request
 * headers and body, response headers and body chunks, trailers) and its end, answering each
 * message at once and, at the end, giving the booking of what the upstream served, or nothing.
 * Pure: no I/O, no clock; the request id generator is injected. The only asynchronous part is
 * content decoding (Node's zlib), awaited by `end()`.
 *
 * Answers: every phase gets its empty answer (no mutation), except an OpenAI streamed chat or
 * completions request body that does not ask for usage, which is answered with the body changed
 * to ask for it (`forceIncludeUsage`; off with the option), or — when that cannot be guaranteed
 * (the body in parts, not JSON, too large, `stream`/`stream_options` repeated) — with an immediate
 * 400 `USAGE_NOT_GUARANTEED` in OpenAI's error shape (nothing then goes upstream; nothing is
 * booked). In `observability_mode` nothing is answered (Envoy does not wait).
 *
 * Nothing to book (`close: true`, the stream may be ended with gRPC OK): no identity, an endpoint
 * metering does not read, a response status of 400 or above; and at the end, a stream that never
 * saw response headers.
 *
 * Memory per session, fixed: the response reader (a JsonReader, about 1.5 KiB), the SSE reader
 * (under 100 bytes), the request reader (only when the request body is sent), a decoder's state when the response is encoded (gzip and
 * deflate: zlib's 32 KiB window and state, plus one 16 KiB output chunk at a time; br: the window
 * its sender declares, at most 16 MiB), a 16 KiB batch of encoded input and at most
 * `maxPendingBytes` of input waiting inside zlib. No
 * body is kept: a request body asked about usage is read from its message and the changed copy is
 * the answer.
 */
import { createHash } from 'node:crypto';
import { familyModule, type Family } from '../core/families/index.ts';
import { BOOK_ID_PATTERN } from '../schema/money.ts';
import { BOOKING_ID_PATTERN } from '../core/booking-id.ts';
import { ContentDecoder, contentEncodingOf, type DecodeFailure } from './content-decoding.ts';
import { continueAnswer, headerOf, type AuthzMetadata, type MeterAnswer, type ProcessingRequest } from './messages.ts';
import { forceIncludeUsage, refusedMessage, type RefusedReason } from '../core/include-usage.ts';
import { denyResponse } from '../core/deny-response.ts';
import { readModel } from '../core/model/index.ts';
import { DENY_STATUS } from '../core/codes.ts';
import { JsonReader, type RecordView } from './json-reader.ts';
import { SseReader } from './sse.ts';
import { foldRecord, isPlainModel, meteredEndpoint, MODEL, normalise, PENDING_STATUS, REQUEST_SCHEMA, responseSchema, UsageState, type Anomalies, type EndpointKind, type MeteredEndpoint, type TokenCounts } from './usage.ts';

export interface MeterOptions {
  /** Set `stream_options.include_usage` in OpenAI streamed requests (KEYGATE_METER_FORCE_USAGE). */
  readonly forceUsage: boolean;
  readonly keyIdHeader: string;
  readonly accountHeader: string;
  /** The largest SSE event read (larger: skipped, counted). */
  readonly maxEventBytes: number;
  /** The most decoded bytes of one encoded response. */
  readonly maxDecodedBytes: number;
  /** The most encoded input waiting to be decoded. */
  readonly maxPendingBytes: number;
  /** `domain` of a refusal's error body (Google's shape; KEYGATE_ERROR_DOMAIN). */
  readonly errorDomain: string;
  /**
   * A booking id for a stream whose ext_authz metadata carried none (a deployment that does not
   * forward it): one per stream, never a client's header (must match the usage-record id pattern).
   */
  readonly newRequestId: () => string;
}

export const DEFAULT_METER_OPTIONS: Omit<MeterOptions, 'newRequestId'> = {
  forceUsage: true,
  keyIdHeader: 'x-keygate-key-id',
  accountHeader: 'x-keygate-account-id',
  maxEventBytes: 1024 * 1024,
  maxDecodedBytes: 64 * 1024 * 1024,
  maxPendingBytes: 1024 * 1024,
  errorDomain: 'keygate',
};

/** What the usage log and the books get for one metered response. */
export interface Booking extends TokenCounts {
  /** The id the booking is idempotent on: keygate's (the allow's `booking_id`, or minted per stream). */
  readonly booking_id: string;
  /** Envoy's `x-request-id`, a label in the usage log only ('' when the request had none). */
  readonly request_id: string;
  readonly key_id: string;
  readonly account: string;
  /** The model priced: the response's, else the path's, else the request's; null when unknown (priced by `*`). */
  readonly model: string | null;
  /** The provider family of the entry (for the price lookup `provider/name`). */
  readonly family: Family;
}

export type NoBooking = 'no-identity' | 'not-metered' | 'error-status' | 'no-response-headers' | 'usage-not-guaranteed' | 'not-terminal' | 'no-usage-reader';

/** Facts about a metered response for metrics and the log (no key material). */
export interface MeterNotes {
  /** The `x-request-id` label: as sent, hashed (outside the usage-record id pattern), or absent. */
  requestId: 'as-sent' | 'hashed' | 'absent';
  /** The booking id: the allow's (forwarded metadata), or minted by metering (none forwarded: counted). */
  bookingId: 'authz' | 'minted';
  /** The identity headers and the forwarded metadata named different keys (the metadata won). */
  identityMismatch: boolean;
  modelFrom: 'response' | 'path' | 'request' | 'metadata' | 'unknown';
  /** The response named a model that does not start with the one requested. */
  modelDiffers: boolean;
  /** The response body ended before its last chunk (client gone, upstream reset, stream closed). */
  cut: boolean;
  /** Decoding or reading failed part way (what was read before counts). */
  failure: DecodeFailure | 'unreadable' | 'undecodable-message' | null;
  oversizedEvents: number;
  anomalies: Anomalies;
  /** How the request body was answered when asked about usage (refused: 400 USAGE_NOT_GUARANTEED, and why). */
  forcedUsage: 'changed' | 'unchanged' | 'refused' | null;
  refusedBecause: RefusedReason | null;
  /** The request's W3C trace context as the proxy sent it (bounded lengths; validated by the tracer), for a span. */
  trace: { readonly parent: string; readonly state: string | undefined } | null;
  /** The metered endpoint's kind, once the request headers were read. */
  endpointKind: EndpointKind | null;
  /** The model the request asked for (path or body), when read. */
  requestedModel: string | null;
  /**
   * An OpenAI response this request created (`POST /responses`, its `id`): recorded as owned by the
   * account (`src/schema/owned.ts`) whether or not anything is booked now.
   */
  ownedResponse: { readonly id: string; readonly account: string; readonly keyId: string } | null;
}

export type MeterOutcome =
  | { readonly kind: 'booking'; readonly booking: Booking; readonly notes: MeterNotes }
  | { readonly kind: 'none'; readonly reason: NoBooking; readonly notes: MeterNotes };

/** The answer to one message: what to send (null: none) and whether the stream can be ended. */
export interface MeterStep {
  readonly reply: MeterAnswer | null;
  readonly close: boolean;
}

const NO_REPLY_OPEN: MeterStep = Object.freeze({ reply: null, close: false });
const NO_REPLY_CLOSE: MeterStep = Object.freeze({ reply: null, close: true });

/**
 * The booking id of an OpenAI response's usage: a function of the response id (`r:` + SHA-256 of
 * `openai:<id>` in hex), so that its usage is booked once whichever request (the create, a
 * retrieve, a resumed stream, a cancel) and whichever sidecar carried its terminal state.
 */
export function responseBookingId(responseId: string): string {
  return `r:${createHash('sha256').update(`openai:${responseId}`, 'utf8').digest('hex')}`;
}

/** The usage log's label of a request id: as sent when it is a usage-record id, else `h:` + its SHA-256 in hex. */
export function bookingRequestId(sent: string): { id: string; hashed: boolean } {
  if (BOOK_ID_PATTERN.test(sent)) return { id: sent, hashed: false };
  return { id: `h:${createHash('sha256').update(sent, 'utf8').digest('hex')}`, hashed: true };
}

export class MeterSession {
  private readonly opts: MeterOptions;
  private endpoint: MeteredEndpoint | null = null;
  private requestIdSent: string | undefined;
  private identityHeaders: { keyId?: string; accountId?: string } = {};
  private metadata: AuthzMetadata | null = null;
  private sawRequestHeaders = false;
  private requestBodyChunks = 0;
  /** The request body is read (a metered endpoint with an identity); its reader is made with the first body message. */
  private readRequest = false;
  private requestReader: JsonReader | null = null;
  private requestText: number | null = null;
  private requestModel: string | null = null;
  /** The request's path and Content-Type (images and audio: their model is read from the whole body, `readModel`). */
  private requestPath = '';
  private requestContentType: string | undefined;
  private status = 0;
  private sawResponseHeaders = false;
  private responseEnded = false;
  private noBooking: NoBooking | null = null;
  private readonly usage = new UsageState();
  private reader: JsonReader | null = null;
  private sse: SseReader | null = null;
  private decoder: ContentDecoder | null = null;
  /** Where response body bytes go (decoder, SSE reader or JSON reader); null: nothing more is read. */
  private feed: ((b: Uint8Array) => void) | null = null;
  private readonly notes: MeterNotes = {
    requestId: 'as-sent',
    bookingId: 'authz',
    identityMismatch: false,
    modelFrom: 'unknown',
    modelDiffers: false,
    cut: false,
    failure: null,
    oversizedEvents: 0,
    anomalies: this.usage.anomalies,
    forcedUsage: null,
    refusedBecause: null,
    trace: null,
    endpointKind: null,
    requestedModel: null,
    ownedResponse: null,
  };
  private outcome: Promise<MeterOutcome> | null = null;

  constructor(opts: MeterOptions) {
    this.opts = opts;
  }

  /**
   * Whether the next message's ext_authz metadata is wanted: Envoy forwards the same metadata with
   * every message, so once the session has it the transport may skip decoding it.
   */
  get wantsMetadata(): boolean {
    return this.metadata === null;
  }

  /** A message the transport could not decode ends the stream (nothing can answer it). */
  undecodable(): MeterStep {
    this.notes.failure ??= 'undecodable-message';
    this.stopReading();
    return NO_REPLY_CLOSE;
  }

  /** One decoded ProcessingRequest. */
  handle(req: ProcessingRequest): MeterStep {
    if (req.metadata !== null) this.metadata = req.metadata;
    const phase = req.phase;
    if (phase === null) return NO_REPLY_OPEN;
    let reply: MeterAnswer = continueAnswer(phase);
    switch (phase) {
      case 'request_headers':
        this.requestHeaders(req.headers!);
        break;
      case 'request_body': {
        const changed = this.requestBody(req.body!, req.endOfStream, req.observabilityMode);
        if (changed !== null) reply = changed;
        break;
      }
      case 'response_headers':
        this.responseHeaders(req.headers!, req.endOfStream);
        break;
      case 'response_body':
        this.responseBody(req.body!, req.endOfStream);
        break;
      case 'response_trailers':
        this.responseEnded = true;
        break;
      case 'request_trailers':
        break;
    }
    const close = this.noBooking !== null;
    return req.observabilityMode ? (close ? NO_REPLY_CLOSE : NO_REPLY_OPEN) : { reply, close };
  }

  private identity(): { keyId: string; accountId: string } | null {
    const m = this.metadata;
    const h = this.identityHeaders;
    if (m?.keyId !== undefined && m.accountId !== undefined) {
      if ((h.keyId !== undefined && h.keyId !== m.keyId) || (h.accountId !== undefined && h.accountId !== m.accountId)) this.notes.identityMismatch = true;
      return { keyId: m.keyId, accountId: m.accountId };
    }
    if (h.keyId !== undefined && h.accountId !== undefined && h.keyId !== '' && h.accountId !== '') return { keyId: h.keyId, accountId: h.accountId };
    return null;
  }

  private requestHeaders(headers: string[]): void {
    this.sawRequestHeaders = true;
    this.requestIdSent = headerOf(headers, 'x-request-id');
    this.identityHeaders = { keyId: headerOf(headers, this.opts.keyIdHeader), accountId: headerOf(headers, this.opts.accountHeader) };
    this.requestPath = headerOf(headers, ':path') ?? '';
    this.requestContentType = headerOf(headers, 'content-type');
    this.endpoint = meteredEndpoint(this.requestPath);
    this.notes.endpointKind = this.endpoint?.kind ?? null;
    const parent = headerOf(headers, 'traceparent');
    if (parent !== undefined && parent.length <= 128) {
      const state = headerOf(headers, 'tracestate');
      this.notes.trace = { parent, state: state !== undefined && state.length <= 512 ? state : undefined };
    }
    if (this.identity() === null) this.noBooking = 'no-identity';
    else if (this.endpoint === null) this.noBooking = 'not-metered';
    else {
      // a stream without a request body (a GET, or Envoy not configured to send it) makes no
      // reader: it is made when one comes
      this.readRequest = true;
    }
  }

  private requestRecord(r: RecordView): void {
    this.requestText = r.text;
    const m = r.strings[MODEL];
    if (m !== null && m !== undefined && isPlainModel(m) && !readsWholeBodyModel(this.endpoint!.kind)) this.requestModel = m;
  }

  /**
   * Images and audio: answers that name no model, priced by the requested one (SPEC 16), read from
   * the whole body as the Check reads it (`readModel`: strict JSON, or the multipart form's one
   * plain `model` field found with Buffer.indexOf, file parts never copied). A body in parts (the
   * first part of a large upload) or not strictly readable: no model (the booking is unpriced,
   * marked so, with its tokens).
   */
  private bodyModel(body: Buffer, whole: boolean): void {
    const r = readModel({ family: this.endpoint!.family, method: 'POST', path: this.requestPath, contentType: this.requestContentType, body, bodyTruncated: !whole });
    if (r.kind === 'model' && isPlainModel(r.model)) this.requestModel = r.model;
  }

  private requestBody(body: Buffer, eos: boolean, observability: boolean): MeterAnswer | null {
    if (this.noBooking !== null || !this.readRequest) return null;
    const ep = this.endpoint!;
    const first = this.requestBodyChunks++ === 0;
    if (readsWholeBodyModel(ep.kind)) {
      if (first) this.bodyModel(body, eos);
      // a form is no JSON: only a JSON body is read for its text (a cut answer's input estimate)
      if (isMultipart(this.requestContentType)) return null;
    }
    this.requestReader ??= new JsonReader(REQUEST_SCHEMA, (r) => this.requestRecord(r));
    this.requestReader.write(body);
    if (!this.opts.forceUsage || observability || !familyModule(ep.family).streamUsageOption || (ep.kind !== 'chat' && ep.kind !== 'completions')) return null;
    // usage cannot be switched off: the body is rewritten to ask for it, or the request refused
    const f = first && eos ? forceIncludeUsage(body) : ({ kind: 'refused', reason: 'in-parts' } as const);
    this.notes.forcedUsage = f.kind;
    if (f.kind === 'changed') return { kind: 'replace-request-body', body: f.body, removeContentLength: false };
    if (f.kind === 'unchanged') return null;
    this.notes.refusedBecause = f.reason;
    this.noBooking = 'usage-not-guaranteed';
    this.stopReading();
    const d = { allow: false as const, code: 'USAGE_NOT_GUARANTEED' as const, status: DENY_STATUS.USAGE_NOT_GUARANTEED, detail: refusedMessage(f) };
    const r = denyResponse(ep.family, d, this.requestIdSent ?? '', { errorDomain: this.opts.errorDomain });
    return { kind: 'immediate', status: r.status, headers: r.headers, body: r.body, details: `keygate: usage not guaranteed (${f.reason})` };
  }

  private responseHeaders(headers: string[], eos: boolean): void {
    if (this.noBooking !== null) return;
    this.sawResponseHeaders = true;
    const status = Number(headerOf(headers, ':status'));
    this.status = Number.isInteger(status) ? status : 0;
    if (this.status >= 400 || this.status === 0) {
      this.noBooking = 'error-status';
      return;
    }
    if (this.endpoint === null) {
      // response headers without request headers: nothing says what this is
      this.noBooking = this.identity() === null ? 'no-identity' : 'not-metered';
      return;
    }
    if (eos) this.responseEnded = true;
    const enc = contentEncodingOf(headerOf(headers, 'content-encoding'));
    if (enc === null) {
      this.notes.failure = 'unsupported-encoding'; // nothing read: no reader made
      return;
    }
    const ep = this.endpoint;
    const reader = new JsonReader(responseSchema(ep.kind), (r) => foldRecord(ep.kind, r, this.usage));
    this.reader = reader;
    const type = (headerOf(headers, 'content-type') ?? '').toLowerCase();
    let sink: (b: Uint8Array) => void;
    if (type.startsWith('text/event-stream')) {
      const sse = new SseReader(
        {
          begin: () => reader.reset(),
          data: (b, s, e) => reader.write(b, s, e),
          end: () => {},
          oversized: () => reader.reset(),
        },
        this.opts.maxEventBytes,
      );
      this.sse = sse;
      sink = (b) => sse.write(b);
    } else sink = (b) => reader.write(b);
    if (enc === 'identity') this.feed = sink;
    else {
      const d = new ContentDecoder(enc, sink, this.opts);
      this.decoder = d;
      this.feed = (b) => d.write(b);
    }
  }

  private responseBody(body: Buffer, eos: boolean): void {
    if (this.noBooking !== null || !this.sawResponseHeaders) return;
    if (this.feed !== null && body.length > 0) this.feed(body);
    if (eos) this.responseEnded = true;
  }

  private stopReading(): void {
    this.feed = null;
  }

  /**
   * The processing stream ended (or was abandoned): the outcome, once the response is read to
   * where it got. Call once; later calls return the same promise.
   */
  end(): Promise<MeterOutcome> {
    this.outcome ??= this.finish();
    return this.outcome;
  }

  /** The allow's booking id when the metadata forwarded one of keygate's form; else one minted for this stream. */
  private bookingId(): string {
    const b = this.metadata?.bookingId;
    if (b !== undefined && BOOKING_ID_PATTERN.test(b)) return b;
    this.notes.bookingId = 'minted';
    return this.opts.newRequestId();
  }

  private async finish(): Promise<MeterOutcome> {
    this.feed = null;
    if (this.decoder !== null) {
      // a cut stream is decoded as far as it goes too (it then fails as truncated)
      await this.decoder.end();
      if (this.decoder.failure !== null) this.notes.failure ??= this.decoder.failure;
    }
    const notes = this.notes;
    if (this.noBooking !== null) return { kind: 'none', reason: this.noBooking, notes };
    if (!this.sawResponseHeaders) return { kind: 'none', reason: this.sawRequestHeaders ? 'no-response-headers' : 'no-identity', notes };
    const id = this.identity();
    if (id === null) return { kind: 'none', reason: 'no-identity', notes };
    const ep = this.endpoint!;
    notes.cut = !this.responseEnded;
    let bookingId: string | null = null;
    if (ep.kind === 'responses') {
      // OpenAI Responses (docs/metering.md, "Background and stored responses")
      const rid = this.usage.responseId ?? ep.responseId ?? null;
      const creating = ep.responseId === null || ep.responseId === undefined;
      if (rid !== null && creating) notes.ownedResponse = { id: rid, account: id.accountId, keyId: id.keyId };
      const status = this.usage.status;
      // queued or running in the background, or read again before it ended: nothing to book or
      // estimate yet; its terminal state, whichever request carries it, is booked
      if (status !== null && PENDING_STATUS.has(status) && (this.usage.background || !creating)) return { kind: 'none', reason: 'not-terminal', notes };
      if (rid !== null) bookingId = responseBookingId(rid);
    }
    if (this.sse !== null) notes.oversizedEvents = this.sse.oversizedEvents;
    if (this.reader !== null) {
      if (this.reader.failed && notes.failure === null && this.sse === null) notes.failure = 'unreadable';
      this.usage.text += this.reader.text;
    }
    if (this.requestText === null && this.requestReader !== null && this.requestBodyChunks > 0) this.requestText = this.requestReader.text;
    const counts = normalise(ep.family, ep.kind, this.usage, this.requestText);
    // a family without usage readers is never read as another's: nothing is booked
    if (counts === null) return { kind: 'none', reason: 'no-usage-reader', notes };
    let model: string | null = null;
    if (this.usage.model !== null) {
      model = this.usage.model;
      notes.modelFrom = 'response';
    } else if (ep.pathModel !== null && isPlainModel(ep.pathModel)) {
      model = ep.pathModel;
      notes.modelFrom = 'path';
    } else if (this.requestModel !== null) {
      model = this.requestModel;
      notes.modelFrom = 'request';
    } else if (this.metadata?.model !== undefined && isPlainModel(this.metadata.model)) {
      model = this.metadata.model;
      notes.modelFrom = 'metadata';
    }
    const asked = ep.pathModel ?? this.requestModel ?? this.metadata?.model ?? null;
    notes.requestedModel = asked;
    if (notes.modelFrom === 'response' && asked !== null && !stripGooglePrefix(model!).toLowerCase().startsWith(stripGooglePrefix(asked).toLowerCase())) notes.modelDiffers = true;
    let requestId = '';
    if (this.requestIdSent === undefined || this.requestIdSent === '') notes.requestId = 'absent';
    else {
      const b = bookingRequestId(this.requestIdSent);
      requestId = b.id;
      if (b.hashed) notes.requestId = 'hashed';
    }
    return {
      kind: 'booking',
      booking: { booking_id: bookingId ?? this.bookingId(), request_id: requestId, key_id: id.keyId, account: id.accountId, model, family: ep.family, ...counts },
      notes,
    };
  }
}

/** The endpoints whose model is read from the whole request body (their answers name none). */
function readsWholeBodyModel(kind: EndpointKind): boolean {
  return kind === 'images' || kind === 'audio';
}

function isMultipart(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.trimStart().toLowerCase().startsWith('multipart/');
}

function stripGooglePrefix(m: string): string {
  return m.startsWith('models/') ? m.slice(7) : m;
}
