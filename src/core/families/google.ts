/** The Google protocol family (Gemini API, Vertex AI). */
import { GOOGLE as GOOGLE_ENDPOINTS } from './google-endpoints.ts';
import type { ModelEndpointRow, ProtocolFamily } from './types.ts';

const READ = ['GET', 'HEAD'];
const GOOGLE_METHOD_FORMS = [
  '/{version}/models/{model}',
  '/{version}/publishers/{*}/models/{model}',
  '/{version}/projects/{*}/locations/{*}/publishers/{*}/models/{model}',
];

/** Gemini and Vertex AI path forms (read by src/core/model/path.ts), then the OpenAI-compatible body forms. */
const MODEL_ENDPOINTS: readonly ModelEndpointRow[] = [
  ...GOOGLE_METHOD_FORMS.map((e): ModelEndpointRow => ({ methods: ['POST', 'GET'], template: e.replace('{model}', '{model}:{*}'), place: 'google' })),
  ...GOOGLE_METHOD_FORMS.map((e): ModelEndpointRow => ({ methods: READ, template: e, place: 'google' })),
  { methods: READ, template: '/{version}/models/{model}/operations/{*}', place: 'google' },
  ...['/chat/completions', '/embeddings', '/images/generations'].map((e): ModelEndpointRow => ({ methods: ['POST'], template: `/openai${e}`, place: 'body' })),
];

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
  model: { endpoints: MODEL_ENDPOINTS, bareProvider: 'google', resourcePrefix: 'models/', pathForm: 'gemini', ownPublisher: 'google' },
  catalog: GOOGLE_ENDPOINTS,
  streamUsageOption: false,
  providerName: 'gcp.gemini',
};
