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

export const GOOGLE: ProtocolFamily<'google'> = {
  name: 'google',
  // `/v1beta/…`, and `…/models/{model}:{method}` (Gemini API, Vertex `publishers/google/models/…`)
  paths: { exact: ['/v1beta'], prefixes: ['/v1beta/'], modelMethod: true },
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
