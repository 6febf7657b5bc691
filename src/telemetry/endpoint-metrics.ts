/**
 * `keygate_endpoint_refusals_total{refusal, family}`: the endpoint rule's refusals by why (`unknown`,
 * `stateful`, `unbillable`, `owned`, `unreadable`) and entry family — bounded labels, every pair
 * present from the start. Per account they are in the opt-in account metrics (by code).
 */
import { Counter, type Registry } from 'prom-client';
import type { DecisionObserver } from '../authorizer.ts';
import { ENDPOINT_REFUSALS } from '../core/endpoints/decision.ts';
import { FAMILIES } from '../core/families/index.ts';

export function endpointRefusalObserver(registry: Registry): DecisionObserver {
  const c = new Counter({
    name: 'keygate_endpoint_refusals_total',
    help: 'Requests the endpoint rule refused (row 8), by why (unknown, stateful, unbillable, owned, unreadable) and entry family.',
    labelNames: ['refusal', 'family'] as const,
    registers: [registry],
  });
  for (const refusal of ENDPOINT_REFUSALS) for (const family of FAMILIES) c.inc({ refusal, family }, 0);
  return (outcome) => {
    const d = outcome.decision;
    if (!d.allow && d.refusal !== undefined) c.inc({ refusal: d.refusal, family: outcome.family });
  };
}
