/** The hostile-grpc suite against the connect gRPC transport (KEYGATE_GRPC_TRANSPORT=connect). */
import { TRANSPORT_UNDER_TEST_ENV } from './helpers/transport.ts';

process.env[TRANSPORT_UNDER_TEST_ENV] = 'connect';
await import('./hostile-grpc.test.ts');
