/**
 * The Anthropic family's endpoints (the `/anthropic` entry, and bare provider paths). Sources:
 * - the official SDK's resource files, `@anthropic-ai/sdk` 1.12.0
 *   (`node_modules/@anthropic-ai/sdk/resources/**`), and the API reference
 *   (https://docs.anthropic.com/en/api);
 * - Anthropic's OpenAI SDK compatibility endpoint (`/v1/chat/completions`), which keygate's model
 *   rule already reads at this entry.
 *
 * Admin paths (`/v1/organizations/**`) and the agent platform's object families are subtrees of one
 * class (`{**}`); their member paths are in the SDK files named above.
 */
import { row, withTrees, type FamilyCatalog } from './endpoint-rows.ts';

const STATEFUL_TREES = [
  'files', 'messages/batches', 'skills', 'organizations', 'agents', 'sessions', 'environments', 'memory_stores',
  'vaults', 'deployments', 'deployment_runs', 'dreams', 'tunnels', 'user_profiles',
];

export const ANTHROPIC: FamilyCatalog = {
  family: 'anthropic',
  sources: [
    '@anthropic-ai/sdk (npm) 1.12.0: node_modules/@anthropic-ai/sdk/resources/**',
    'https://docs.anthropic.com/en/api (Messages, Models, Message Batches, Files, Admin)',
    'https://docs.anthropic.com/en/api/openai-sdk (OpenAI SDK compatibility)',
  ],
  rows: withTrees([
    row('POST', '/v1/messages', 'metered', 'body', 'messages', { refs: 'anthropic' }),
    row('POST', '/v1/chat/completions', 'metered', 'body', 'chat', { refs: 'openai' }),
    row('POST', '/v1/messages/count_tokens', 'free', 'body', null, { refs: 'anthropic' }),
    row('GET', '/v1/models', 'free'),
    row('GET', '/v1/models/{model}', 'free', 'path'),
    // Batches are billed out of band; the legacy Text Completions response carries no usage.
    row('POST', '/v1/messages/batches', 'unbillable', 'none', null, { refs: 'anthropic' }),
    row('POST', '/v1/complete', 'unbillable', 'body'),
  ], '/v1', STATEFUL_TREES, 'stateful'),
};
