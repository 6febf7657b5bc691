/** The `grpc-timeout` header (gRPC over HTTP/2): up to 8 digits and a unit, H M S m u n. */
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };
const TIMEOUT = /^(\d{1,8})([HMSmun])$/;

/** The timeout in whole ms (rounded up: a deadline is never earlier than asked), or undefined when malformed. */
export function parseGrpcTimeout(value: string): number | undefined {
  // A proxy sends the same value on every call (Envoy: the route's timeout): the last one is kept.
  if (value === last) return lastMs;
  const m = TIMEOUT.exec(value);
  if (!m) return undefined;
  last = value;
  lastMs = Math.max(0, Math.ceil(Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!));
  return lastMs;
}

let last: string | undefined;
let lastMs: number | undefined;
