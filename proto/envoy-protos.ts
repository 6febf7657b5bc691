/**
 * Envoy's own API protos, loaded from the `@grpc/grpc-js-xds` package that ships them (never
 * copied into this repository), for the tests' Envoy-like client, the codec tests, the envoy.yaml
 * check and the bench (a development dependency: no running sidecar loads a .proto).
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { AUTHORIZATION_SERVICE } from '../src/transport/envoy/grpc.ts';

const require = createRequire(import.meta.url);

/** Include paths of Envoy's API and its dependencies inside `@grpc/grpc-js-xds/deps`. */
export function envoyProtoDirs(): string[] {
  const root = join(dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');
  return ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => join(root, d));
}

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: Number,
  defaults: false,
  oneofs: false,
  includeDirs: envoyProtoDirs(),
};

export function loadEnvoyProtos(files: string[]): protoLoader.PackageDefinition {
  return protoLoader.loadSync(files, LOADER_OPTIONS);
}

export const EXT_AUTHZ_PROTO = 'envoy/service/auth/v3/external_auth.proto';

let cached: { definition: protoLoader.PackageDefinition; service: grpc.ServiceDefinition } | undefined;

/** The `envoy.service.auth.v3.Authorization` service definition. */
export function authorizationService(): { definition: protoLoader.PackageDefinition; service: grpc.ServiceDefinition } {
  if (!cached) {
    const definition = loadEnvoyProtos([EXT_AUTHZ_PROTO]);
    const service = definition[AUTHORIZATION_SERVICE] as grpc.ServiceDefinition;
    cached = { definition, service };
  }
  return cached;
}
