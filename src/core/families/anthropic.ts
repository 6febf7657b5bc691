/** The Anthropic protocol family (Messages API). */
import { ANTHROPIC as ANTHROPIC_ENDPOINTS } from './anthropic-endpoints.ts';
import type { ModelEndpointRow, ProtocolFamily } from './types.ts';

const POST = ['POST'];

/** The Messages API, and Anthropic's OpenAI-compatible chat endpoint. */
const MODEL_ENDPOINTS: readonly ModelEndpointRow[] = [
  { methods: ['GET', 'HEAD', 'DELETE'], template: '/v1/models/{model+}', place: 'resource' },
  { methods: POST, template: '/messages', place: 'body' },
  { methods: POST, template: '/messages/count_tokens', place: 'body' },
  { methods: POST, template: '/complete', place: 'body' },
  { methods: POST, template: '/chat/completions', place: 'body' },
];

const ANTHROPIC_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  429: 'rate_limit_error',
  503: 'api_error',
};

export const ANTHROPIC: ProtocolFamily<'anthropic'> = {
  name: 'anthropic',
  paths: { exact: ['/v1/complete', '/v1/messages'], prefixes: ['/v1/messages/', '/v1/messages?'], modelMethod: false },
  deny: {
    body: (status, msg, code, requestId, _domain, q) =>
      `{"type":"error","error":{"type":"${ANTHROPIC_TYPE[status]}","message":${msg},"code":${code}},"request_id":${q(requestId)}}`,
    requestIdHeader: true,
  },
  model: { endpoints: MODEL_ENDPOINTS, bareProvider: 'anthropic', resourcePrefix: null, pathForm: 'resource', ownPublisher: null },
  catalog: ANTHROPIC_ENDPOINTS,
  streamUsageOption: false,
  providerName: 'anthropic',
};
