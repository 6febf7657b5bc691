/** The OpenAI protocol family (and the OpenAI-compatible APIs behind its entry). */
import { OPENAI as OPENAI_ENDPOINTS } from './openai-endpoints.ts';
import type { ModelEndpointRow, ProtocolFamily } from './types.ts';

const POST = ['POST'];
const RESOURCE = ['GET', 'HEAD', 'DELETE'];

/** Body endpoints of the OpenAI API (JSON, or multipart for audio and image uploads). */
const OPENAI_BODY = [
  '/chat/completions',
  '/completions',
  '/embeddings',
  '/responses',
  '/responses/input_tokens',
  '/moderations',
  '/images/generations',
  '/images/edits',
  '/images/variations',
  '/audio/speech',
  '/audio/transcriptions',
  '/audio/translations',
];
const AZURE = [
  '/chat/completions',
  '/completions',
  '/embeddings',
  '/images/generations',
  '/audio/speech',
  '/audio/transcriptions',
  '/audio/translations',
];
const ENGINES = ['/chat/completions', '/completions', '/embeddings'];

const MODEL_ENDPOINTS: readonly ModelEndpointRow[] = [
  ...AZURE.map((e): ModelEndpointRow => ({ methods: POST, template: `/openai/deployments/{model}${e}`, place: 'path' })),
  ...ENGINES.map((e): ModelEndpointRow => ({ methods: POST, template: `/engines/{model}${e}`, place: 'path' })),
  { methods: RESOURCE, template: '/v1/models/{model+}', place: 'resource' },
  ...OPENAI_BODY.map((e): ModelEndpointRow => ({ methods: POST, template: e, place: 'body' })),
];

const OPENAI_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  429: 'rate_limit_error',
  503: 'server_error',
};

export const OPENAI: ProtocolFamily<'openai'> = {
  name: 'openai',
  // the default family: a path no other family claims is OpenAI's (families/index.ts)
  paths: { exact: [], prefixes: [], modelMethod: false },
  deny: {
    body: (status, msg, code) => `{"error":{"message":${msg},"type":"${OPENAI_TYPE[status]}","param":null,"code":${code}}}`,
    requestIdHeader: false,
  },
  model: { endpoints: MODEL_ENDPOINTS, bareProvider: null, resourcePrefix: null, pathForm: 'resource', ownPublisher: null },
  catalog: OPENAI_ENDPOINTS,
  streamUsageOption: true,
  providerName: 'openai',
};
