/** The early-answer suite against the grpc-js gRPC transport (KEYGATE_GRPC_TRANSPORT=grpc-js). */
import { TRANSPORT_UNDER_TEST_ENV } from './helpers/transport.ts';

process.env[TRANSPORT_UNDER_TEST_ENV] = 'grpc-js';
await import('./grpc-early-answer.test.ts');
