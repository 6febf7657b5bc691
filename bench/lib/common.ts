/** Small pieces every bench script shares. */

/** Envoy sends the ext_authz filter's timeout as grpc-timeout, and its own user agent. */
export const ENVOY_HEADERS = { 'grpc-timeout': '250m', 'user-agent': 'envoy/1.34.1' };

export function median(xs: readonly number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2;
}
