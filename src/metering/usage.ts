/**
 * What metering reads from each provider's responses, and how the counts are normalised.
 *
 * Endpoints (by the request path, its query ignored): OpenAI `/chat/completions`, `/completions`,
 * `/embeddings`, `/responses`; Anthropic `/messages`; Google `…/models/{model}:generateContent` and
 * `:streamGenerateContent`. For each, a schema of the paths read (`JsonNode`, see json-reader.ts)
 * and a rule that folds each record (a JSON body, an SSE event's data, an element of Google's
 * streamed array) into a `UsageState`: the latest value of each count wins, never summed.
 *
 * Normalised counts: `input` = all input tokens including cache reads and writes; `cached_input` =
 * the part read from a cache; `cache_write` = the part written to a cache; `output` = all output
 * including reasoning; `reasoning` = the reasoning part.
 * - OpenAI: prompt/input tokens already include cached tokens; completion/output include reasoning.
 * - Anthropic: `input_tokens` excludes `cache_read_input_tokens` and `cache_creation_input_tokens`.
 * - Google: `promptTokenCount` includes `cachedContentTokenCount`; `candidatesTokenCount`
 *   excludes `thoughtsTokenCount`; `toolUsePromptTokenCount` (grounding, URL context) is input
 *   outside `promptTokenCount`: added to `input`.
 * Section 16's classes, each a part of the count above it: `cache_write_1h` (Anthropic
 * `usage.cache_creation.ephemeral_1h_input_tokens`, a part of cache writes); `input_audio`,
 * `input_image` (OpenAI `prompt_tokens_details.audio_tokens` / `image_tokens`; Google
 * `promptTokensDetails` by modality AUDIO / IMAGE); `output_audio`, `output_image` (OpenAI
 * `completion_tokens_details.audio_tokens`; Google `candidatesTokensDetails`); `tool_use_prompt`
 * (Google); `web_search_requests` (Anthropic `usage.server_tool_use.web_search_requests`, calls);
 * and the response's `service_tier` (OpenAI top level; Anthropic `usage.service_tier`). OpenAI's
 * `prompt_tokens_details.cache_write_tokens` are cache writes (a part of `prompt_tokens`).
 */
import type { Family } from '../core/families/index.ts';
import { pathOnly } from '../core/families/index.ts';
import { PRICE_MODEL_PATTERN } from '../schema/prices.ts';
import { MAX_TOKEN_COUNT } from '../schema/money.ts';
import { arr, byModality, count, DEEP_TEXT, flag, obj, SEEN, BAD, str, TEXT, type JsonNode, type RecordView } from './json-reader.ts';
import { OWNED_ID_PATTERN } from '../schema/owned.ts';

/**
 * The usage readers, by name (the endpoint catalog names the reader of each metered path):
 * `chat`, `completions`, `embeddings`, `responses` (OpenAI), `images` (OpenAI image generation and
 * edits), `audio` (OpenAI audio transcription and translation with token usage), `messages`
 * (Anthropic), `generate`, `stream-generate` (Google).
 */
export type EndpointKind = 'chat' | 'completions' | 'embeddings' | 'responses' | 'images' | 'audio' | 'messages' | 'generate' | 'stream-generate';

/** Every usage reader's name (`EndpointKind`). */
export const USAGE_READERS: readonly EndpointKind[] = ['chat', 'completions', 'embeddings', 'responses', 'images', 'audio', 'messages', 'generate', 'stream-generate'];

export interface MeteredEndpoint {
  readonly family: Family;
  readonly kind: EndpointKind;
  /** The model named in the path (Google), else null. */
  readonly pathModel: string | null;
  /**
   * OpenAI Responses: the response id in the path (`GET /responses/{id}`, `POST /responses/{id}/cancel`:
   * a stored or background response read again), else null (`POST /responses` creates one).
   */
  readonly responseId?: string | null;
}

// number slots
export const IN = 0;
export const OUT = 1;
export const CACHED = 2;
export const CACHE_WRITE = 3;
export const REASONING = 4;
export const CACHE_WRITE_1H = 5;
export const AUDIO_IN = 6;
export const AUDIO_OUT = 7;
export const IMAGE_IN = 8;
export const IMAGE_OUT = 9;
export const TOOL_USE = 10;
export const WEB_SEARCH = 11;
/** Number slots folded into a response's usage (slots 0-11). */
const NUMBER_SLOTS = 12;
/** OpenAI Responses: the response's `background` flag (1: true); read, not folded. */
export const BACKGROUND = 12;
/** OpenAI images: the text part of the input (`IN` is the whole, `IMAGE_IN` the image part); read, not folded. */
export const TEXT_IN = 13;
// (14 is the reader's modality scratch slot)
// string slots
export const MODEL = 0;
export const TYPE = 1;
export const SERVICE_TIER = 2;
/** OpenAI Responses: the response's `id` and `status`. */
export const ID = 3;
export const STATUS = 4;
// (5 is the reader's modality scratch string slot)

const MODEL_PATH = /\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;
/** A stored or background response read again: `GET …/responses/{id}` (JSON or `stream=true`), `POST …/responses/{id}/cancel`. */
const RESPONSE_PATH = /\/responses\/([^/]+)(?:\/cancel)?$/;

/** The metered endpoint of a request path, or null (not metered). */
export function meteredEndpoint(path: string): MeteredEndpoint | null {
  const p = pathOnly(path);
  if (p.endsWith('/chat/completions')) return { family: 'openai', kind: 'chat', pathModel: null };
  if (p.endsWith('/completions')) return { family: 'openai', kind: 'completions', pathModel: null };
  if (p.endsWith('/embeddings')) return { family: 'openai', kind: 'embeddings', pathModel: null };
  if (p.endsWith('/images/generations') || p.endsWith('/images/edits')) return { family: 'openai', kind: 'images', pathModel: null };
  if (p.endsWith('/audio/transcriptions') || p.endsWith('/audio/translations')) return { family: 'openai', kind: 'audio', pathModel: null };
  if (p.endsWith('/responses')) return { family: 'openai', kind: 'responses', pathModel: null, responseId: null };
  const r = RESPONSE_PATH.exec(p);
  if (r && r[1] !== 'input_tokens' && OWNED_ID_PATTERN.test(r[1]!)) return { family: 'openai', kind: 'responses', pathModel: null, responseId: r[1]! };
  if (p.endsWith('/messages')) return { family: 'anthropic', kind: 'messages', pathModel: null };
  const m = MODEL_PATH.exec(p);
  if (m) {
    let model: string | null;
    try {
      model = decodeURIComponent(m[1]!);
    } catch {
      model = null;
    }
    return { family: 'google', kind: m[2] === 'generateContent' ? 'generate' : 'stream-generate', pathModel: model };
  }
  return null;
}

// ---------------------------------------------------------------- schemas

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

const anthropicUsage = obj({
  input_tokens: count(IN),
  output_tokens: count(OUT),
  cache_read_input_tokens: count(CACHED),
  cache_creation_input_tokens: count(CACHE_WRITE),
  cache_creation: obj({ ephemeral_1h_input_tokens: count(CACHE_WRITE_1H) }),
  server_tool_use: obj({ web_search_requests: count(WEB_SEARCH) }),
  service_tier: str(SERVICE_TIER),
});
const ANTHROPIC = obj({
  type: str(TYPE),
  model: str(MODEL),
  usage: anthropicUsage,
  content: arr(obj({ text: TEXT, thinking: TEXT })),
  message: obj({ model: str(MODEL), usage: anthropicUsage }),
  delta: obj({ text: TEXT, partial_json: TEXT, thinking: TEXT }),
});

const GOOGLE = obj({
  modelVersion: str(MODEL),
  usageMetadata: obj({
    promptTokenCount: count(IN),
    candidatesTokenCount: count(OUT),
    cachedContentTokenCount: count(CACHED),
    thoughtsTokenCount: count(REASONING),
    toolUsePromptTokenCount: count(TOOL_USE),
    promptTokensDetails: arr(byModality({ AUDIO: AUDIO_IN, IMAGE: IMAGE_IN })),
    candidatesTokensDetails: arr(byModality({ AUDIO: AUDIO_OUT, IMAGE: IMAGE_OUT })),
  }),
  candidates: arr(obj({ content: obj({ parts: arr(obj({ text: TEXT })) }) })),
});

/** The request side: the model asked for, and the text of the input (for estimation). */
export const REQUEST_SCHEMA: JsonNode = obj({
  model: str(MODEL),
  messages: DEEP_TEXT,
  prompt: DEEP_TEXT,
  input: DEEP_TEXT,
  instructions: DEEP_TEXT,
  system: DEEP_TEXT,
  contents: DEEP_TEXT,
  systemInstruction: DEEP_TEXT,
});

export function responseSchema(kind: EndpointKind): JsonNode {
  switch (kind) {
    case 'chat':
    case 'completions':
      return OPENAI_CHAT;
    case 'embeddings':
      return OPENAI_EMBEDDINGS;
    case 'responses':
      return OPENAI_RESPONSES;
    case 'images':
      return OPENAI_IMAGES;
    case 'audio':
      return OPENAI_AUDIO;
    case 'messages':
      return ANTHROPIC;
    case 'generate':
    case 'stream-generate':
      return GOOGLE;
  }
}

// ---------------------------------------------------------------- folding records

/** Anomalies seen in a response, counted for metrics and the log. */
export interface Anomalies {
  /** Counts that were negative, fractional, too large or not numbers (ignored). */
  badCounts: number;
  /** A model name that was not a short plain string (ignored). */
  badModel: number;
  /** Parts that are inconsistent (cached > input, reasoning > output), or an input or output count above MAX_TOKEN_COUNT: clamped. */
  clamped: number;
}

export function noAnomalies(): Anomalies {
  return { badCounts: 0, badModel: 0, clamped: 0 };
}

/** A service tier metering accepts from a response (`default`, `flex`, `priority`, `standard_only`…). */
const SERVICE_TIER_PATTERN = /^[a-z0-9_-]{1,32}$/;

/** The latest counts seen, per raw provider field. */
export class UsageState {
  readonly counts = new Float64Array(NUMBER_SLOTS);
  readonly seen = new Uint8Array(NUMBER_SLOTS);
  /** The response's service tier (the latest seen), or null. */
  serviceTier: string | null = null;
  /** The output count seen is not final (Anthropic's message_start). */
  outputProvisional = false;
  model: string | null = null;
  /** Code points of generated text. */
  text = 0;
  /** OpenAI Responses: the response's id (the first one read), its latest status, and whether it runs in the background. */
  responseId: string | null = null;
  status: string | null = null;
  background = false;
  readonly anomalies: Anomalies = noAnomalies();

  take(r: RecordView, slots: readonly number[]): void {
    for (const s of slots) {
      const st = r.countState[s];
      if (st === SEEN) {
        this.counts[s] = r.counts[s]!;
        this.seen[s] = 1;
      } else if (st === BAD) this.anomalies.badCounts++;
    }
  }

  takeModel(r: RecordView): void {
    const st = r.strings[SERVICE_TIER];
    // a stream repeats its tier in every record (OpenAI's chunks): the one already taken was checked
    if (st !== null && st !== undefined && st !== this.serviceTier && SERVICE_TIER_PATTERN.test(st)) this.serviceTier = st;
    const m = r.strings[MODEL];
    if (m !== null && m !== undefined) {
      // a stream repeats its model in every record: the one already taken was checked
      if (m === this.model) return;
      if (isPlainModel(m)) this.model = m;
      else this.anomalies.badModel++;
    } else if (r.stringBad[MODEL]) this.anomalies.badModel++;
  }
}

const ALL = [IN, OUT, CACHED, CACHE_WRITE, REASONING, CACHE_WRITE_1H, AUDIO_IN, AUDIO_OUT, IMAGE_IN, IMAGE_OUT, TOOL_USE, WEB_SEARCH];

/** A model name metering accepts from a response: 1–256 printable ASCII characters without spaces. */
export function isPlainModel(m: string): boolean {
  return PRICE_MODEL_PATTERN.test(m);
}

/** The states of an OpenAI response after which nothing more is served (its usage is final). */
export const TERMINAL_STATUS: ReadonlySet<string> = new Set(['completed', 'incomplete', 'failed', 'cancelled']);
/** The states of a response still being served (queued or running in the background). */
export const PENDING_STATUS: ReadonlySet<string> = new Set(['queued', 'in_progress']);

/** Folds one record of a response of `kind` into `u`. */
export function foldRecord(kind: EndpointKind, r: RecordView, u: UsageState): void {
  u.takeModel(r);
  const type = r.strings[TYPE];
  switch (kind) {
    case 'responses': {
      const id = r.strings[ID];
      if (id !== null && id !== undefined && u.responseId === null && OWNED_ID_PATTERN.test(id)) u.responseId = id;
      const status = r.strings[STATUS];
      if (status !== null && status !== undefined) u.status = status;
      if (r.countState[BACKGROUND] === SEEN && r.counts[BACKGROUND] === 1) u.background = true;
      if (type === null || type === undefined) {
        u.take(r, ALL); // a whole (non-streamed) response
        u.text += r.text;
        return;
      }
      // usage counts only on the final events (response.created and others carry none, or none final)
      if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') u.take(r, ALL);
      if (type.endsWith('.delta')) u.text += r.text;
      return;
    }
    case 'messages': {
      if (type === 'message_start') {
        u.take(r, ALL);
        if (r.countState[OUT] === SEEN) u.outputProvisional = true;
      } else if (type === 'message_delta') {
        // cumulative: each field present replaces the one before
        u.take(r, ALL);
        if (r.countState[OUT] === SEEN) u.outputProvisional = false;
      } else if (type === 'message' || type === null || type === undefined) {
        u.take(r, ALL);
        if (r.countState[OUT] === SEEN) u.outputProvisional = false;
      }
      u.text += r.text;
      return;
    }
    case 'audio': {
      u.take(r, ALL);
      // streamed, the deltas are the text (the done event repeats it whole)
      if (type !== 'transcript.text.done') u.text += r.text;
      return;
    }
    default:
      u.take(r, kind === 'embeddings' ? [IN] : ALL);
      u.text += r.text;
  }
}

// ---------------------------------------------------------------- normalising

export interface TokenCounts {
  input_tokens: number;
  cached_input_tokens: number;
  cache_write_tokens: number;
  output_tokens: number;
  reasoning_tokens: number;
  /** A count was estimated, or is not final. */
  estimated: boolean;
  /** Section 16's classes (parts of the counts above; 0 when not reported). */
  cache_write_1h_tokens?: number;
  input_audio_tokens?: number;
  output_audio_tokens?: number;
  input_image_tokens?: number;
  output_image_tokens?: number;
  /** Google's tool-use prompt tokens (included in input_tokens). */
  tool_use_prompt_tokens?: number;
  /** Web-search calls (Anthropic server tools). */
  web_search_requests?: number;
  /** The response's service tier, when it named one. */
  service_tier?: string | null;
}

/** Code points → tokens, the estimate: ceil(code points / 4). */
export function estimateTokens(codePoints: number): number {
  return Math.ceil(codePoints / 4);
}

/**
 * The normalised counts of a response: the latest counts seen, and for any never seen (or not
 * final), an estimate from the generated text (`u.text`) or the request's input text
 * (`requestText`, null when keygate did not see the request body: then 0).
 */
export function normalise(family: Family, kind: EndpointKind, u: UsageState, requestText: number | null): TokenCounts {
  const c = u.counts;
  const seen = (s: number) => u.seen[s] === 1;
  const v = (s: number) => (seen(s) ? c[s]! : 0);
  let estimated = false;
  let input: number;
  let cached: number;
  let cacheWrite = 0;
  let output: number;
  let reasoning: number;
  if (family === 'anthropic') {
    cached = v(CACHED);
    cacheWrite = v(CACHE_WRITE);
    input = v(IN) + cached + cacheWrite;
    output = v(OUT);
    reasoning = 0;
  } else if (family === 'google') {
    input = v(IN) + v(TOOL_USE);
    cached = v(CACHED);
    reasoning = v(REASONING);
    output = v(OUT) + reasoning;
  } else {
    input = v(IN);
    cached = v(CACHED);
    cacheWrite = v(CACHE_WRITE);
    output = v(OUT);
    reasoning = v(REASONING);
  }
  if (!seen(IN)) {
    estimated = true;
    input = Math.max(input, estimateTokens(requestText ?? 0));
  }
  if (kind === 'embeddings') output = 0;
  else if (!seen(OUT) || u.outputProvisional) {
    estimated = true;
    output = Math.max(output, estimateTokens(u.text));
  }
  // A booking carries at most MAX_TOKEN_COUNT per count, like a usage record (the reader takes parts up to 2^40 each).
  if (input > MAX_TOKEN_COUNT) {
    u.anomalies.clamped++;
    input = MAX_TOKEN_COUNT;
  }
  if (output > MAX_TOKEN_COUNT) {
    u.anomalies.clamped++;
    output = MAX_TOKEN_COUNT;
  }
  if (cached + cacheWrite > input) {
    u.anomalies.clamped++;
    cached = Math.min(cached, input);
    cacheWrite = Math.min(cacheWrite, input - cached);
  }
  if (reasoning > output) {
    u.anomalies.clamped++;
    reasoning = output;
  }
  // The parts of section 16, each within its whole (a part above it is clamped and counted).
  const part = (slot: number, whole: number) => {
    const x = v(slot);
    if (x > whole) u.anomalies.clamped++;
    return Math.min(x, whole);
  };
  const cw1h = part(CACHE_WRITE_1H, cacheWrite);
  const audioIn = part(AUDIO_IN, input);
  const imageIn = part(IMAGE_IN, input - audioIn);
  const audioOut = kind === 'embeddings' ? 0 : part(AUDIO_OUT, output);
  // an image model's output is image tokens: the whole output, unless the answer splits it
  // (`output_tokens_details.image_tokens`)
  const imageOut = kind === 'embeddings' ? 0 : kind === 'images' && !seen(IMAGE_OUT) ? output - audioOut : part(IMAGE_OUT, output - audioOut);
  const toolUse = family === 'google' ? part(TOOL_USE, input) : 0;
  const webSearch = Math.min(v(WEB_SEARCH), MAX_TOKEN_COUNT);
  const counts: TokenCounts = { input_tokens: input, cached_input_tokens: cached, cache_write_tokens: cacheWrite, output_tokens: output, reasoning_tokens: reasoning, estimated };
  if (cw1h > 0) counts.cache_write_1h_tokens = cw1h;
  if (audioIn > 0) counts.input_audio_tokens = audioIn;
  if (imageIn > 0) counts.input_image_tokens = imageIn;
  if (audioOut > 0) counts.output_audio_tokens = audioOut;
  if (imageOut > 0) counts.output_image_tokens = imageOut;
  if (toolUse > 0) counts.tool_use_prompt_tokens = toolUse;
  if (webSearch > 0) counts.web_search_requests = webSearch;
  if (u.serviceTier !== null) counts.service_tier = u.serviceTier;
  return counts;
}
