/**
 * The Envoy services keygate serves, on every gRPC transport (h2 and grpc-js): one line per
 * method here. A new service is a module beside these (its mapping and a `ServiceMethod` per
 * method, see `../../service.ts`) and its methods added to the list below.
 */
import type { Logger } from 'pino';
import type { Authorizer } from '../../../authorizer.ts';
import type { ResponseOptions } from '../../response-options.ts';
import type { ServiceMethod, ServiceSet } from '../../service.ts';
import { CheckAnswers } from './check-answer.ts';
import { CheckMethod } from './check.ts';
import { Health } from './health.ts';
import { Deadlines } from '../../grpc/deadlines.ts';
import { systemClock, type Clock } from '../../../core/clock.ts';

/** `extra`: methods served beside these (tests); `clock`: the clock call deadlines run on. */
export function envoyServices(
  authorizer: Authorizer,
  opts: ResponseOptions,
  log: Logger,
  extra: readonly ServiceMethod[] = [],
  clock: Clock = systemClock,
): ServiceSet {
  const check = new CheckMethod(authorizer, new CheckAnswers(opts), log, new Deadlines(clock));
  const health = new Health();
  return {
    methods: [check, health.check, health.watch, ...extra],
    get inFlight() {
      return check.inFlight;
    },
    setServing: (serving) => health.setServing(serving),
    shutdown: () => health.shutdown(),
  };
}
