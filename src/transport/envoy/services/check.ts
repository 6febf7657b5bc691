/**
 * `envoy.service.auth.v3.Authorization/Check` (unary): CheckRequest bytes → `CheckInput` → the
 * authorizer → `CheckAnswers` → CheckResponse bytes. A deadline the transport leaves to it
 * (`call.deadlineMs`) answers DEADLINE_EXCEEDED when the decision is not ready in time.
 */
import type { Logger } from 'pino';
import type { Authorizer } from '../../../authorizer.ts';
import { decodeCheckRequest, WireError } from '../../grpc/codec.ts';
import { Deadlines, type Deadline } from '../../grpc/deadlines.ts';
import type { Call, CallListener, ServiceMethod } from '../../service.ts';
import { checkInputFromEnvoy } from '../check.ts';
import { CHECK_PATH, GrpcStatus as Status } from '../grpc.ts';
import type { CheckAnswers } from './check-answer.ts';

export class CheckMethod implements ServiceMethod {
  readonly path = CHECK_PATH;
  readonly kind = 'unary' as const;
  readonly #authorizer: Authorizer;
  readonly #answers: CheckAnswers;
  readonly #log: Logger;
  readonly #deadlines: Deadlines;
  #inFlight = 0;

  constructor(authorizer: Authorizer, answers: CheckAnswers, log: Logger, deadlines = new Deadlines()) {
    this.#authorizer = authorizer;
    this.#answers = answers;
    this.#log = log;
    this.#deadlines = deadlines;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  open(call: Call): CallListener {
    return { message: (bytes) => this.#check(call, bytes) };
  }

  /** Resolves once the decision is made (the request's bytes are read until then). */
  #check(call: Call, bytes: Buffer): Promise<void> | undefined {
    let input;
    try {
      input = checkInputFromEnvoy(decodeCheckRequest(bytes, { lazyHeaders: true }));
    } catch (err) {
      this.#log.warn({ err: { message: (err as Error).message } }, 'unreadable CheckRequest');
      call.end(Status.INTERNAL, err instanceof WireError ? 'Error deserializing request' : 'unreadable CheckRequest');
      return undefined;
    }
    this.#inFlight++;
    let timer: Deadline | undefined;
    if (call.deadlineMs !== undefined) timer = this.#deadlines.add(call.deadlineMs, () => call.end(Status.DEADLINE_EXCEEDED, 'Deadline exceeded'));
    return this.#authorizer.check(input).then(
      (outcome) => {
        this.#inFlight--;
        if (timer) this.#deadlines.finish(timer);
        if (call.closed) return;
        call.send(this.#answers.frame(outcome));
        call.end(Status.OK);
      },
      (err: unknown) => {
        this.#inFlight--;
        if (timer) this.#deadlines.finish(timer);
        this.#log.error({ err: { message: (err as Error)?.message } }, 'check failed');
        call.end(Status.INTERNAL, 'internal error');
      },
    );
  }
}
