/** The grpc-contract suite against the h2 gRPC transport (KEYGATE_GRPC_TRANSPORT=h2). */
import { TRANSPORT_UNDER_TEST_ENV } from './helpers/transport.ts';

process.env[TRANSPORT_UNDER_TEST_ENV] = 'h2';
await import('./grpc-contract.test.ts');
