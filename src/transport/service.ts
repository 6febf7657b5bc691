/**
 * A gRPC method as every gRPC transport serves it: the transport owns the wire (HTTP/2, framing,
 * decompression, limits, deadlines, resets) and hands a registered method's handler de-framed
 * message bytes; the handler answers with framed message bytes and a status. A transport knows
 * no service; the services are listed in `envoy/services/registry.ts`.
 *
 * Kinds: `unary` and `server-stream` get exactly one request message, delivered once the client
 * half-closed (none or a second one → UNIMPLEMENTED, answered by the transport); `bidi` gets each
 * message as soon as it is complete, then `halfClose`.
 */
export type MethodKind = 'unary' | 'server-stream' | 'bidi';

/** One call, as its handler sees it. */
export interface Call {
  /** The client's `grpc-timeout` in ms when the transport leaves the deadline to the handler; else undefined. */
  readonly deadlineMs: number | undefined;
  /**
   * Sends one framed message (the 5-byte gRPC prefix and the encoded bytes, uncompressed:
   * `frameMessage` in `grpc/codec.ts`), so a cached answer goes out without a copy. Returns false
   * when the peer's flow-control window is full: stop and wait for `drain`. Past the per-call send
   * bound the transport cancels the call (`cancel` is called). Ignored once the call is closed.
   */
  send(frame: Buffer): boolean;
  /** Ends the call with a gRPC status (OK: trailers after what was sent). Once; later calls are ignored. */
  end(code: number, message?: string): void;
  /** True once ended, cancelled, reset or its connection is gone: nothing more can be sent. */
  readonly closed: boolean;
}

/** What a handler does with its call's events. All are called on the event loop, one at a time. */
export interface CallListener {
  /**
   * One request message: de-framed, decompressed, within the receive limit. The bytes may be a
   * view of a pooled buffer: valid until this returns, or until the promise it returns settles
   * (a handler that reads them while it decides) — copy what must outlive that.
   */
  message(bytes: Buffer): void | Promise<unknown>;
  /** `bidi`: the client half-closed (sends no more); the call stays open until `end`. */
  halfClose?(): void;
  /**
   * The call is over without the handler's `end`: client cancel or reset, connection lost,
   * deadline or receive bound passed (the transport answered), or shutdown. Nothing can be sent.
   */
  cancel?(): void;
  /** `send` returned false and the window opened again. */
  drain?(): void;
}

export interface ServiceMethod {
  /** HTTP/2 `:path`: `/package.Service/Method`. */
  readonly path: string;
  readonly kind: MethodKind;
  /** A call to this method started (headers accepted). Cheap: one listener object per call. */
  open(call: Call): CallListener;
}

/** The methods a gRPC transport serves, and what the transport tells them. */
export interface ServiceSet {
  readonly methods: readonly ServiceMethod[];
  /** Calls being answered (for the graceful stop's drain). */
  readonly inFlight: number;
  /** Readiness as reported by the health service. */
  setServing(serving: boolean): void;
  /** Ends the long calls (watches, streams) for a stop: UNAVAILABLE. */
  shutdown(): void;
}
