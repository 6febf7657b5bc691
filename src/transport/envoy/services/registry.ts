/**
 * The Envoy services keygate serves, on every gRPC transport (h2 and grpc-js), built from what the
 * sidecar has: Check from the authorizer, ext_proc Process from the meter (when metering is on),
 * and the health service. A new service is a module beside these (its mapping in `../`, a
 * `ServiceMethod` per method here, see `../../service.ts`) and a line below.
 */
import type { Logger } from 'pino';
import type { Authorizer } from '../../../authorizer.ts';
import type { Meter } from '../../../metering/meter.ts';
import type { ResponseOptions } from '../../response-options.ts';
import type { ServiceSet } from '../../service.ts';
import { CheckAnswers } from './check-answer.ts';
import { CheckMethod } from './check.ts';
import { ExtProcMethod } from './ext-proc.ts';
import { Health } from './health.ts';
import { Deadlines } from '../../grpc/deadlines.ts';
import { systemClock, type Clock } from '../../../core/clock.ts';

/** What the services are built from: the authorizer (Check), the meter (ext_proc; null: metering off). */
export interface EnvoyServiceDeps {
  readonly authorizer: Authorizer;
  readonly meter: Meter | null;
}

/** `clock`: the clock call deadlines run on. */
export function envoyServices(deps: EnvoyServiceDeps, opts: ResponseOptions, log: Logger, clock: Clock = systemClock): ServiceSet {
  const check = new CheckMethod(deps.authorizer, new CheckAnswers(opts), log, new Deadlines(clock));
  const health = new Health();
  return {
    methods: [check, health.check, health.watch, ...(deps.meter !== null ? [new ExtProcMethod(deps.meter)] : [])],
    get inFlight() {
      return check.inFlight;
    },
    setServing: (serving) => health.setServing(serving),
    shutdown: () => health.shutdown(),
  };
}
