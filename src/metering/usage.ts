/**
 * What metering reads from each provider's responses, and how the counts are normalised. Each
 * family's readers (paths, schemas, what its counts include) are in `usage/<family>.ts`.
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
import { FAMILIES, pathOnly, type Family } from '../core/families/index.ts';
import { PRICE_MODEL_PATTERN } from '../schema/prices.ts';
import { MAX_TOKEN_COUNT } from '../schema/money.ts';
import { DEEP_TEXT, obj, SEEN, BAD, str, type JsonNode, type RecordView } from './json-reader.ts';
import { OWNED_ID_PATTERN } from '../schema/owned.ts';
import { ANTHROPIC_USAGE, type AnthropicKind } from './usage/anthropic.ts';
import { GOOGLE_USAGE, type GoogleKind } from './usage/google.ts';
import { OPENAI_USAGE, type OpenAIKind } from './usage/openai.ts';
import {
  AUDIO_IN, AUDIO_OUT, BACKGROUND, CACHE_WRITE, CACHE_WRITE_1H, CACHED, ID, IMAGE_IN, IMAGE_OUT, IN, MODEL, NUMBER_SLOTS, OUT, REASONING, SERVICE_TIER, STATUS, TOOL_USE, TYPE, WEB_SEARCH,
} from './usage/slots.ts';

/**
 * The usage readers, by name (the endpoint catalog names the reader of each metered path):
 * `chat`, `completions`, `embeddings`, `responses` (OpenAI), `images` (OpenAI image generation and
 * edits), `audio` (OpenAI audio transcription and translation with token usage), `messages`
 * (Anthropic), `generate`, `stream-generate` (Google).
 */
export type EndpointKind = OpenAIKind | AnthropicKind | GoogleKind;

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

export * from './usage/slots.ts';

/** What a family's usage readers know (src/metering/usage/<family>.ts). */
export interface FamilyUsage<K extends EndpointKind = EndpointKind> {
  /** The family's metered endpoint of a request path (query removed), or null (not one of this family's). */
  endpoint(path: string): (MeteredEndpoint & { readonly kind: K }) | null;
  /** The response schema of each of the family's readers. */
  readonly schemas: Readonly<Record<K, JsonNode>>;
  /** The family's raw counts as normalised parts (`v(slot)`: the count seen, else 0). */
  parts(v: (slot: number) => number): UsageParts;
}

/** A family's counts before the common checks (see the header: what each count includes). */
export interface UsageParts {
  readonly input: number;
  readonly cached: number;
  readonly cacheWrite: number;
  readonly output: number;
  readonly reasoning: number;
  /** The family reports tool-use prompt tokens (a part of input). */
  readonly toolUse: boolean;
}

/** A family's readers as normalising sees them (their schemas are reached by kind: `responseSchema`). */
export type FamilyReaders = Omit<FamilyUsage, 'schemas'>;

/** The usage readers of each family: a family without its readers does not compile. */
const USAGE: { readonly [F in Family]: FamilyReaders } = { openai: OPENAI_USAGE, anthropic: ANTHROPIC_USAGE, google: GOOGLE_USAGE };

/** The readers of family `name`, or null: a family without readers is never read as another. */
export function familyUsage(name: string): FamilyReaders | null {
  return Object.hasOwn(USAGE, name) ? USAGE[name as Family] : null;
}

/** The metered endpoint of a request path, or null (not metered): the first family (registry order) that meters it. */
export function meteredEndpoint(path: string): MeteredEndpoint | null {
  const p = pathOnly(path);
  for (let i = 0; i < FAMILIES.length; i++) {
    const e = USAGE[FAMILIES[i]!].endpoint(p);
    if (e !== null) return e;
  }
  return null;
}

/** Every reader's response schema. */
const SCHEMAS: Readonly<Record<EndpointKind, JsonNode>> = { ...OPENAI_USAGE.schemas, ...ANTHROPIC_USAGE.schemas, ...GOOGLE_USAGE.schemas };

// ---------------------------------------------------------------- schemas

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
  return SCHEMAS[kind];
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
 * (`requestText`, null when keygate did not see the request body: then 0). null: `family` has
 * no usage readers (never read as another family's: nothing is booked).
 */
export function normalise(family: Family, kind: EndpointKind, u: UsageState, requestText: number | null): TokenCounts | null {
  const reader = familyUsage(family);
  if (reader === null) return null;
  const c = u.counts;
  const seen = (s: number) => u.seen[s] === 1;
  const v = (s: number) => (seen(s) ? c[s]! : 0);
  let estimated = false;
  const parts = reader.parts(v);
  let { input, cached, cacheWrite, output, reasoning } = parts;
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
  const toolUse = parts.toolUse ? part(TOOL_USE, input) : 0;
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
