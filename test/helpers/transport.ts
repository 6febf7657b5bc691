/**
 * Which gRPC transport the shared gRPC suites start (`KEYGATE_GRPC_TRANSPORT` values). The suites
 * run once per transport: `test/*.grpc-js.test.ts`-style variant files set it and import the suite.
 */
import type { Config } from '../../src/config.ts';

export const TRANSPORT_UNDER_TEST_ENV = 'KEYGATE_TEST_GRPC_TRANSPORT';

export function transportFlag(): { grpcTransport?: Config['grpcTransport'] } {
  const t = process.env[TRANSPORT_UNDER_TEST_ENV];
  return t ? { grpcTransport: t as Config['grpcTransport'] } : {};
}
