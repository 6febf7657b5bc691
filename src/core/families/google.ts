/** The Google protocol family (Gemini API, Vertex AI). */
import { GOOGLE as GOOGLE_ENDPOINTS } from '../endpoints/google.ts';
import type { ProtocolFamily } from './types.ts';

const GOOGLE_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'FAILED_PRECONDITION',
  403: 'PERMISSION_DENIED',
  429: 'RESOURCE_EXHAUSTED',
  503: 'UNAVAILABLE',
};

/** `/v1beta/…`, and `…/models/{model}:{method}` (Gemini API, Vertex `publishers/google/models/…`). */
function claimsPath(p: string): boolean {
  if (p.startsWith('/v1beta/') || p === '/v1beta') return true;
  const m = p.lastIndexOf('/models/');
  return m !== -1 && p.indexOf(':', m + 8) !== -1;
}

export const GOOGLE: ProtocolFamily<'google'> = {
  name: 'google',
  claimsPath,
  deny: {
    body: (status, msg, code, requestId, errorDomain, q) =>
      `{"error":{"code":${status},"message":${msg},"status":"${GOOGLE_STATUS[status]}",` +
      `"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":${code},"domain":${q(errorDomain)},` +
      `"metadata":{"code":${code},"request_id":${q(requestId)}}}]}}`,
    requestIdHeader: false,
  },
  model: { bareProvider: 'google', resourcePrefix: 'models/', pathForm: 'gemini', ownPublisher: 'google' },
  catalog: GOOGLE_ENDPOINTS,
  streamUsageOption: false,
  providerName: 'gcp.gemini',
};
