/** The OpenAI protocol family (and the OpenAI-compatible APIs behind its entry). */
import { OPENAI as OPENAI_ENDPOINTS } from '../endpoints/openai.ts';
import type { ProtocolFamily } from './types.ts';

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
  model: { bareProvider: null, resourcePrefix: null, pathForm: 'resource', ownPublisher: null },
  catalog: OPENAI_ENDPOINTS,
  streamUsageOption: true,
  providerName: 'openai',
};
