/**
 * The Google family's endpoints (the `/google` entry, and bare provider paths): the Gemini API
 * (`/{version}/models/{model}:{method}`) and Vertex AI's publisher-model forms. Sources:
 * - the official SDK, `@google/genai` 3.1.0 (`node_modules/@google/genai/dist/index.mjs`: every
 *   `formatMap('…')` path), and the API references (https://ai.google.dev/api,
 *   https://cloud.google.com/vertex-ai/docs/reference/rest);
 * - the OpenAI compatibility endpoints (Gemini `/{version}/openai/…`, Vertex
 *   `…/endpoints/openapi/chat/completions`), which keygate's model rule already reads.
 *
 * Custom methods are `{model}:verb`. Vertex project paths other than the publisher models
 * (`projects/{p}/locations/{l}/…`: batch prediction, tuning, cached contents, endpoints) are one
 * stateful subtree.
 */
import { row, rows, type EndpointRow, type FamilyCatalog } from './endpoint-rows.ts';

/** Custom methods on a model: [verb, class, usage reader, reads references]. */
const MODEL_METHODS: readonly (readonly [string, EndpointRow['class'], EndpointRow['usage'], boolean])[] = [
  ['generateContent', 'metered', 'generate', true],
  ['streamGenerateContent', 'metered', 'stream-generate', true],
  ['countTokens', 'free', null, true],
  ['computeTokens', 'free', null, true],
  // No usage in the response, or billed out of band (batches, long-running predictions).
  ['embedContent', 'unbillable', null, true],
  ['batchEmbedContents', 'unbillable', null, true],
  ['asyncBatchEmbedContent', 'unbillable', null, true],
  ['batchGenerateContent', 'unbillable', null, true],
  ['predict', 'unbillable', null, false],
  ['predictLongRunning', 'unbillable', null, false],
  ['fetchPredictOperation', 'stateful', null, false],
  ['bidiGenerateContent', 'unbillable', null, false],
];

/** The model forms: Gemini, Vertex publisher, Vertex project publisher. */
const MODEL_BASES = [
  '/{version}/models/{model}',
  '/{version}/publishers/{id}/models/{model}',
  '/{version}/projects/{id}/locations/{id}/publishers/{id}/models/{model}',
];

const STATEFUL_TREES = ['files', 'cachedContents', 'tunedModels', 'batches', 'operations', 'fileSearchStores', 'corpora', 'generatedFiles', 'tuningJobs', 'batchPredictionJobs', 'authTokens'];

const modelRows = (base: string): EndpointRow[] => [
  ...MODEL_METHODS.map(([verb, cls, usage, refs]) => row('POST', `${base}:${verb}`, cls, 'path', usage, refs ? { refs: 'google' } : {})),
  row('GET', base, 'free', 'path'),
  row('GET', `${base}/operations/{**}`, 'stateful', 'path'), // a long-running prediction's result
];

export const GOOGLE: FamilyCatalog = {
  family: 'google',
  sources: [
    '@google/genai (npm) 3.1.0: node_modules/@google/genai/dist/index.mjs',
    'https://ai.google.dev/api (Gemini API)',
    'https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest (Vertex AI)',
  ],
  rows: [
    ...MODEL_BASES.flatMap(modelRows),
    row('GET', '/{version}/models', 'free'),
    row('GET', '/{version}/publishers/{id}/models', 'free'),
    // OpenAI compatibility (Gemini, Vertex).
    row('POST', '/{version}/openai/chat/completions', 'metered', 'body', 'chat', { refs: 'openai' }),
    row('POST', '/{version}/openai/embeddings', 'unbillable', 'body'),
    row('POST', '/{version}/openai/images/generations', 'unbillable', 'body'),
    row('GET', '/{version}/openai/models', 'free'),
    row('GET', '/{version}/openai/models/{model}', 'free', 'path'),
    row('POST', '/{version}/projects/{id}/locations/{id}/endpoints/openapi/chat/completions', 'metered', 'body', 'chat', { refs: 'openai' }),
    // Stateful: files (and their uploads), caches, tuned models, batches, operations, stores.
    ...STATEFUL_TREES.flatMap((t) => [...rows(['GET', 'POST'], `/{version}/${t}`, 'stateful'), ...rows(['GET', 'POST', 'PATCH', 'DELETE'], `/{version}/${t}/{**}`, 'stateful')]),
    row('POST', '/{version}/files:register', 'stateful'),
    ...rows(['GET', 'POST'], '/upload/{version}/{**}', 'stateful'),
    ...rows(['GET', 'POST', 'PATCH', 'DELETE'], '/{version}/projects/{id}/locations/{id}/{**}', 'stateful'),
  ],
};
