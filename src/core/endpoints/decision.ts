/**
 * The endpoint rule's answers (row 8 of the decision, docs/endpoints.md): 403 ENDPOINT_NOT_ALLOWED
 * with a message naming the class that refused and what would open it, and 400 USAGE_NOT_GUARANTEED
 * for a body keygate must read but cannot read whole. Pure.
 */
import { DENY_STATUS } from '../codes.ts';
import type { Deny } from '../decision.ts';

/** Why the endpoint rule refused: the metrics label (bounded: these five). */
export type EndpointRefusal = 'unknown' | 'stateful' | 'unbillable' | 'owned' | 'unreadable';
export const ENDPOINT_REFUSALS: readonly EndpointRefusal[] = ['unknown', 'stateful', 'unbillable', 'owned', 'unreadable'];

export const ENDPOINT_MESSAGES: Readonly<Record<Exclude<EndpointRefusal, 'unreadable'>, string>> = {
  unknown:
    'This endpoint is not in the gateway\'s endpoint catalog, so no API key may call it. If it should be open, ask the gateway\'s operator to add it to the catalog (KEYGATE_ENDPOINTS).',
  stateful:
    'This endpoint reads or changes objects stored at the provider (endpoint class "stateful"), which the gateway\'s shared provider credential holds for every account. It opens when your account has its own credential for this provider.',
  unbillable:
    'This endpoint is model work whose usage the gateway cannot read from the response (endpoint class "unbillable"). It opens when your account\'s billing is "external" (your own router books each request).',
  // One message for an object of another account and one that never existed (and for a reference
  // in a body): the answer must not tell them apart.
  owned:
    'No object with this id was created by this account through the gateway (endpoint class "owned"): a response, conversation or file is open only to the account that created it here. Use an id your account created, or an account with its own provider credential.',
};

/** The refusal as a Deny (carries the key id, so built per refusal; never on an allowed request's path). */
export function endpointDeny(refusal: Exclude<EndpointRefusal, 'unreadable'>, keyId: string): Deny {
  return { allow: false, code: 'ENDPOINT_NOT_ALLOWED', status: DENY_STATUS.ENDPOINT_NOT_ALLOWED, keyId, message: ENDPOINT_MESSAGES[refusal], refusal };
}

/** A body the rule must read and cannot: `reason` is keygate's own text (never the body's). */
export function unreadableDeny(reason: string, keyId: string): Deny {
  return { allow: false, code: 'USAGE_NOT_GUARANTEED', status: DENY_STATUS.USAGE_NOT_GUARANTEED, keyId, detail: `keygate must read this request's body, and ${reason}.`, refusal: 'unreadable' };
}
