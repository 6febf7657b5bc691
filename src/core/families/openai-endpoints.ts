/**
 * The OpenAI family's endpoints (the `/openai` entry, and bare provider paths). Sources:
 * - the official SDK's resource files, `openai` 7.57.0 (`node_modules/openai/resources/**`: every
 *   `_client.get|post|delete|getAPIList(path)` call), and the API reference
 *   (https://platform.openai.com/docs/api-reference);
 * - Azure OpenAI's deployment paths (`/openai/deployments/{deployment}/…`) and the legacy engines
 *   form, which keygate's model rule already reads (docs/models.md);
 * - router forms without the `/v1` version (`/chat/completions`, …), as LiteLLM-style routers serve.
 *
 * Admin paths (`/v1/organization/**`, `/v1/projects/**`) and whole object families are subtrees of
 * one class (`{**}`); their member paths are listed in the SDK files named above.
 */
import { CRUD, row, rows, withTrees, type EndpointRow, type FamilyCatalog } from './endpoint-rows.ts';

const STATEFUL_TREES = [
  'files', 'uploads', 'vector_stores', 'assistants', 'threads', 'containers', 'conversations', 'evals', 'batches',
  'fine_tuning', 'skills', 'vaults', 'videos', 'chatkit', 'agents', 'webhook_endpoints', 'organization', 'projects',
  'audio/voices', 'audio/voice_consents', 'live', 'realtime/calls', 'safety', 'decisions', 'content_provenance_checks',
];

/** Metered body endpoints: path (after the version), usage reader, body references. */
const METERED: readonly (readonly [string, EndpointRow['usage'], boolean])[] = [
  ['chat/completions', 'chat', true],
  ['completions', 'completions', false],
  ['embeddings', 'embeddings', false],
  ['responses', 'responses', true],
  ['images/generations', 'images', false],
  ['images/edits', 'images', false],
  ['audio/transcriptions', 'transcription', false],
  ['audio/translations', 'transcription', false],
];

const rowsOf = (prefix: string): EndpointRow[] =>
  METERED.map(([p, usage, refs]) => row('POST', `${prefix}/${p}`, 'metered', 'body', usage, refs ? { refs: 'openai' } : {}));

export const OPENAI: FamilyCatalog = {
  family: 'openai',
  sources: [
    'openai (npm) 7.57.0: node_modules/openai/resources/**',
    'https://platform.openai.com/docs/api-reference',
    'https://learn.microsoft.com/azure/ai-services/openai/reference (deployments)',
  ],
  rows: withTrees([
    // Model work whose usage the response carries.
    ...rowsOf('/v1'),
    ...rowsOf(''), // routers without the version segment
    // Free: model listings and info, token counting, moderation (OpenAI charges nothing for it).
    row('GET', '/v1/models', 'free'),
    row('GET', '/v1/models/{model}', 'free', 'path'),
    row('GET', '/v1/models/{model}/{**}', 'free', 'path'), // a model id with `/` (router names, `%2F` encoded or not)
    row('GET', '/models', 'free'),
    row('POST', '/v1/responses/input_tokens', 'free', 'body', null, { refs: 'openai' }),
    row('POST', '/v1/moderations', 'free', 'body'),
    row('POST', '/moderations', 'free', 'body'),
    // Owned: a background or stored response this account created through keygate.
    row('GET', '/v1/responses/{id}', 'owned', 'none', 'responses', { owner: 'openai' }),
    row('DELETE', '/v1/responses/{id}', 'owned', 'none', null, { owner: 'openai' }),
    row('POST', '/v1/responses/{id}/cancel', 'owned', 'none', 'responses', { owner: 'openai' }),
    row('GET', '/v1/responses/{id}/input_items', 'owned', 'none', null, { owner: 'openai' }),
    // Unbillable: model work whose usage never passes through the response keygate sees.
    row('POST', '/v1/responses/compact', 'unbillable', 'body', null, { refs: 'openai' }),
    row('POST', '/v1/images/variations', 'unbillable', 'body'),
    row('POST', '/v1/audio/speech', 'unbillable', 'body'),
    row('POST', '/v1/batches', 'unbillable', 'none', null, { refs: 'openai' }),
    row('POST', '/v1/fine_tuning/jobs', 'unbillable', 'body', null, { refs: 'openai' }),
    row('POST', '/v1/fine_tuning/alpha/graders/run', 'unbillable', 'body'),
    row('POST', '/v1/realtime/sessions', 'unbillable', 'body'),
    row('POST', '/v1/realtime/transcription_sessions', 'unbillable', 'body'),
    row('POST', '/v1/realtime/client_secrets', 'unbillable', 'body'),
    row('POST', '/v1/realtime/translations/client_secrets', 'unbillable', 'body'),
    row('POST', '/v1/realtime/calls', 'unbillable', 'body'),
    row('GET', '/v1/realtime', 'unbillable', 'none'), // the WebSocket upgrade (`?model=` in the query)
    row('POST', '/v1/videos', 'unbillable', 'body'),
    row('POST', '/v1/videos/edits', 'unbillable', 'body'),
    row('POST', '/v1/videos/extensions', 'unbillable', 'body'),
    row('POST', '/v1/videos/{id}/remix', 'unbillable', 'body'),
    row('POST', '/v1/evals/{id}/runs', 'unbillable', 'none'),
    // Stateful: stored chat completions and every provider object family (files, batches, …).
    row('GET', '/v1/chat/completions', 'stateful'),
    ...rows(CRUD, '/v1/chat/completions/{id}', 'stateful'),
    row('GET', '/v1/chat/completions/{id}/messages', 'stateful'),
    row('DELETE', '/v1/models/{model}', 'stateful', 'path'), // deletes a fine-tuned model
    row('POST', '/v1/fine_tuning/alpha/graders/validate', 'stateful'),
    // Azure OpenAI deployments (the model is the deployment) and the legacy engines form.
    ...(['chat/completions', 'completions', 'embeddings'] as const).flatMap((p) => {
      const usage = p === 'chat/completions' ? 'chat' : p;
      return [
        row('POST', `/openai/deployments/{model}/${p}`, 'metered', 'path', usage, p === 'chat/completions' ? { refs: 'openai' } : {}),
        row('POST', `/v1/engines/{model}/${p}`, 'metered', 'path', usage),
        row('POST', `/engines/{model}/${p}`, 'metered', 'path', usage),
      ];
    }),
    row('POST', '/openai/deployments/{model}/images/generations', 'metered', 'path', 'images'),
    row('POST', '/openai/deployments/{model}/audio/transcriptions', 'metered', 'path', 'transcription'),
    row('POST', '/openai/deployments/{model}/audio/translations', 'metered', 'path', 'transcription'),
    row('POST', '/openai/deployments/{model}/audio/speech', 'unbillable', 'path'),
  ], '/v1', STATEFUL_TREES, 'stateful'),
};
