/** A one-at-a-time Check client (grpc-js, Envoy's protos) sending the bench's Envoy-shaped requests. */
import * as grpc from '@grpc/grpc-js';
import { authorizationService } from '../../proto/envoy-protos.ts';
import type { CheckResponse } from '../../src/transport/envoy/check.ts';
import { envoyCheckRequest, type BenchRequest } from './bodies.ts';

export class CheckClient {
  readonly #client: grpc.Client;
  constructor(target: string) {
    const Ctor = grpc.makeGenericClientConstructor(authorizationService().service, 'Authorization');
    this.#client = new Ctor(target, grpc.credentials.createInsecure());
  }

  check(r: BenchRequest, deadlineMs = 5000): Promise<Partial<CheckResponse>> {
    return new Promise((resolve, reject) => {
      (this.#client as unknown as Record<string, Function>).Check!(
        envoyCheckRequest(r),
        { deadline: Date.now() + deadlineMs },
        (err: grpc.ServiceError | null, res: Partial<CheckResponse>) => (err ? reject(err) : resolve(res)),
      );
    });
  }

  close(): void {
    this.#client.close();
  }
}
