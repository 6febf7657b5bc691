/**
 * OpenAI's usage readers: `/chat/completions`, `/completions`, `/embeddings`, `/responses` (and a
 * stored or background response read again), `/images/generations|edits`,
 * `/audio/transcriptions|translations`. Prompt/input tokens already include cached tokens;
 * completion/output include reasoning.
 */
import { OWNED_ID_PATTERN } from '../../schema/owned.ts';
import { arr, count, flag, obj, str, TEXT } from '../json-reader.ts';
import type { FamilyUsage, UsageParts } from '../usage.ts';
import { AUDIO_IN, AUDIO_OUT, BACKGROUND, CACHE_WRITE, CACHED, ID, IMAGE_IN, IMAGE_OUT, IN, MODEL, OUT, REASONING, SERVICE_TIER, STATUS, TEXT_IN, TYPE } from './slots.ts';

/** OpenAI's usage readers (`EndpointKind`). */
export type OpenAIKind = 'chat' | 'completions' | 'embeddings' | 'responses' | 'images' | 'audio';

/** A stored or background response read again: `GET …/responses/{id}` (JSON or `stream=true`), `POST …/responses/{id}/cancel`. */
const RESPONSE_PATH = /\/responses\/([^/]+)(?:\/cancel)?$/;

const openaiUsage = obj({
  prompt_tokens: count(IN),
  completion_tokens: count(OUT),
  prompt_tokens_details: obj({ cached_tokens: count(CACHED), cache_write_tokens: count(CACHE_WRITE), audio_tokens: count(AUDIO_IN), image_tokens: count(IMAGE_IN) }),
  completion_tokens_details: obj({ reasoning_tokens: count(REASONING), audio_tokens: count(AUDIO_OUT) }),
});
const toolCalls = arr(obj({ function: obj({ arguments: TEXT }) }));
const openaiMessage = obj({ content: TEXT, refusal: TEXT, tool_calls: toolCalls });
const OPENAI_CHAT = obj({
  model: str(MODEL),
  service_tier: str(SERVICE_TIER),
  usage: openaiUsage,
  choices: arr(obj({ message: openaiMessage, delta: openaiMessage, text: TEXT })),
});
const OPENAI_EMBEDDINGS = obj({ model: str(MODEL), usage: openaiUsage });

const responsesUsage = obj({
  input_tokens: count(IN),
  output_tokens: count(OUT),
  input_tokens_details: obj({ cached_tokens: count(CACHED) }),
  output_tokens_details: obj({ reasoning_tokens: count(REASONING) }),
});
const responsesOutput = arr(obj({ content: arr(obj({ text: TEXT, refusal: TEXT })), arguments: TEXT, summary: arr(obj({ text: TEXT })) }));
const OPENAI_RESPONSES = obj({
  type: str(TYPE),
  id: str(ID),
  status: str(STATUS),
  background: flag(BACKGROUND),
  model: str(MODEL),
  service_tier: str(SERVICE_TIER),
  usage: responsesUsage,
  output: responsesOutput,
  // streamed: every event's `response` (its usage counts only in the final events), text deltas
  response: obj({ id: str(ID), status: str(STATUS), background: flag(BACKGROUND), model: str(MODEL), service_tier: str(SERVICE_TIER), usage: responsesUsage }),
  delta: TEXT,
});

/**
 * OpenAI images (`/images/generations`, `/images/edits`): JSON `usage`, or streamed (`stream: true`)
 * the `image_generation.completed` / `image_edit.completed` event's `usage`. The image data
 * (`b64_json`, megabytes) is skipped unread.
 */
const OPENAI_IMAGES = obj({
  type: str(TYPE),
  model: str(MODEL),
  usage: obj({
    input_tokens: count(IN),
    output_tokens: count(OUT),
    input_tokens_details: obj({ text_tokens: count(TEXT_IN), image_tokens: count(IMAGE_IN) }),
    output_tokens_details: obj({ image_tokens: count(IMAGE_OUT) }),
  }),
});

/**
 * OpenAI audio transcription and translation: JSON `{text, usage}` where the model bills by token
 * (`usage.type: "tokens"`: `input_tokens`, `output_tokens`); streamed, the `transcript.text.done`
 * event's `usage` (text from `transcript.text.delta`). A `usage` by duration carries no tokens: the
 * output is then estimated from the text.
 */
const OPENAI_AUDIO = obj({
  type: str(TYPE),
  model: str(MODEL),
  text: TEXT,
  delta: TEXT,
  usage: obj({ input_tokens: count(IN), output_tokens: count(OUT) }),
});

export const OPENAI_USAGE: FamilyUsage<OpenAIKind> = {
  endpoint(p) {
    if (p.endsWith('/chat/completions')) return { family: 'openai', kind: 'chat', pathModel: null };
    if (p.endsWith('/completions')) return { family: 'openai', kind: 'completions', pathModel: null };
    if (p.endsWith('/embeddings')) return { family: 'openai', kind: 'embeddings', pathModel: null };
    if (p.endsWith('/images/generations') || p.endsWith('/images/edits')) return { family: 'openai', kind: 'images', pathModel: null };
    if (p.endsWith('/audio/transcriptions') || p.endsWith('/audio/translations')) return { family: 'openai', kind: 'audio', pathModel: null };
    if (p.endsWith('/responses')) return { family: 'openai', kind: 'responses', pathModel: null, responseId: null };
    const r = RESPONSE_PATH.exec(p);
    if (r && r[1] !== 'input_tokens' && OWNED_ID_PATTERN.test(r[1]!)) return { family: 'openai', kind: 'responses', pathModel: null, responseId: r[1]! };
    return null;
  },
  schemas: { chat: OPENAI_CHAT, completions: OPENAI_CHAT, embeddings: OPENAI_EMBEDDINGS, responses: OPENAI_RESPONSES, images: OPENAI_IMAGES, audio: OPENAI_AUDIO },
  parts: (v): UsageParts => ({ input: v(IN), cached: v(CACHED), cacheWrite: v(CACHE_WRITE), output: v(OUT), reasoning: v(REASONING), toolUse: false }),
};
