/**
 * The gRPC side of Envoy's ext_authz, shared by every gRPC server keygate has: the method and
 * health service names, the gRPC status codes used, and the server limits (one copy for all).
 */
import type { ResponseOptions } from '../response-options.ts';

export const AUTHORIZATION_SERVICE = 'envoy.service.auth.v3.Authorization';
/** The HTTP/2 path of the one method Envoy calls. */
export const CHECK_PATH = `/${AUTHORIZATION_SERVICE}/Check`;
export const HEALTH_CHECK_PATH = '/grpc.health.v1.Health/Check';
export const HEALTH_WATCH_PATH = '/grpc.health.v1.Health/Watch';

/** Names reported in grpc.health.v1 (the overall "" and the Authorization service). */
export const HEALTH_SERVICES = ['', AUTHORIZATION_SERVICE] as const;

/** gRPC status codes keygate uses, on the call and in CheckResponse.status. */
export const GrpcStatus = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** Limits every gRPC server applies (the receive limit is configured: `GrpcServerOptions`). */
export const GRPC_SERVER_LIMITS = {
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS per connection. */
  maxConcurrentStreams: 1000,
  /** The largest answer: an ext_proc request body rewritten to ask for usage (at most 16 MiB plus the inserted bytes). */
  maxSendBytes: 17 * 1024 * 1024,
  /** Client pings closer together than this without data are refused (keepalive abuse). */
  minPingIntervalWithoutDataMs: 5000,
  /** node:http2's cap on one connection's HTTP/2 state (frames queued, header tables), in MiB; past it new streams are refused. */
  maxSessionMemoryMiB: 64,
  /** A connection with no traffic this long is closed gracefully (GOAWAY); Envoy reconnects on demand. */
  idleConnectionTimeoutMs: 300_000,
  /**
   * Incoming RST_STREAMs one connection may send (node:http2's rapid-reset guard: a burst, then a
   * rate per second; past it the connection is closed with GOAWAY). Envoy cancels an ext_proc stream
   * whenever its client goes away mid-response, on the connection its Checks share; node's defaults
   * (1,000, then 33 a second) would drop a busy gateway's connection. Still bounded: a peer resetting
   * faster than this is cut off.
   */
  streamResetBurst: 10_000,
  streamResetRate: 2_000,
} as const;

export interface GrpcServerOptions extends ResponseOptions {
  readonly host: string;
  readonly port: number;
  readonly maxReceiveBytes: number;
  /** The whole request message must arrive within this of the stream's headers. */
  readonly receiveTimeoutMs: number;
  /** Request bytes held at once across all connections (declared lengths of messages being received). */
  readonly maxBufferedBytes: number;
  /** The same, per connection. */
  readonly maxConnectionBufferedBytes: number;
}
