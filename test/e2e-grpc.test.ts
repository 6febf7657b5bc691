/** The SDK suite through the gRPC harness: a proxy that calls keygate's Check exactly as Envoy's ext_authz filter does. */
import { startGrpcProxy } from './helpers/grpc-proxy.ts';
import { sdkSuite } from './helpers/sdk-suite.ts';

sdkSuite({
  name: 'Envoy ext_authz (gRPC harness)',
  sendsBody: true,
  start: ({ grpcPort, upstreamPort }) =>
    startGrpcProxy({
      checkTarget: `127.0.0.1:${grpcPort}`,
      upstreamPort,
      withRequestBody: { maxRequestBytes: 1024 * 1024, allowPartialMessage: true },
      routes: [
        { prefix: '/v1/messages', contextExtensions: { protocol: 'anthropic' } },
        { prefix: '/v1/chat/', contextExtensions: { protocol: 'openai' } },
      ],
    }),
});
