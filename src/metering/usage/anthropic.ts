/**
 * Anthropic's usage reader: `/messages` (JSON, or the streamed `message_start` / `message_delta`
 * events). `input_tokens` excludes `cache_read_input_tokens` and `cache_creation_input_tokens`.
 */
import { arr, count, obj, str, TEXT } from '../json-reader.ts';
import type { FamilyUsage, UsageParts } from '../usage.ts';
import { CACHE_WRITE, CACHE_WRITE_1H, CACHED, IN, MODEL, OUT, SERVICE_TIER, TYPE, WEB_SEARCH } from './slots.ts';

/** Anthropic's usage readers (`EndpointKind`). */
export type AnthropicKind = 'messages';

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

export const ANTHROPIC_USAGE: FamilyUsage<AnthropicKind> = {
  endpoint: (p) => (p.endsWith('/messages') ? { family: 'anthropic', kind: 'messages', pathModel: null } : null),
  schemas: { messages: ANTHROPIC },
  parts(v): UsageParts {
    const cached = v(CACHED);
    const cacheWrite = v(CACHE_WRITE);
    return { input: v(IN) + cached + cacheWrite, cached, cacheWrite, output: v(OUT), reasoning: 0, toolUse: false };
  },
};
