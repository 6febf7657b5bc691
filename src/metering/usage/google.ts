/**
 * Google's usage readers: `…/models/{model}:generateContent` and `:streamGenerateContent` (the model
 * is in the path). `promptTokenCount` includes `cachedContentTokenCount`; `candidatesTokenCount`
 * excludes `thoughtsTokenCount`; `toolUsePromptTokenCount` (grounding, URL context) is input
 * outside `promptTokenCount`: added to `input`.
 */
import { arr, byModality, count, obj, str, TEXT } from '../json-reader.ts';
import type { FamilyUsage, UsageParts } from '../usage.ts';
import { AUDIO_IN, AUDIO_OUT, CACHED, IMAGE_IN, IMAGE_OUT, IN, MODEL, OUT, REASONING, TOOL_USE } from './slots.ts';

/** Google's usage readers (`EndpointKind`). */
export type GoogleKind = 'generate' | 'stream-generate';

const MODEL_PATH = /\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;

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

export const GOOGLE_USAGE: FamilyUsage<GoogleKind> = {
  endpoint(p) {
    const m = MODEL_PATH.exec(p);
    if (!m) return null;
    let model: string | null;
    try {
      model = decodeURIComponent(m[1]!);
    } catch {
      model = null;
    }
    return { family: 'google', kind: m[2] === 'generateContent' ? 'generate' : 'stream-generate', pathModel: model };
  },
  schemas: { generate: GOOGLE, 'stream-generate': GOOGLE },
  parts(v): UsageParts {
    const reasoning = v(REASONING);
    return { input: v(IN) + v(TOOL_USE), cached: v(CACHED), cacheWrite: 0, output: v(OUT) + reasoning, reasoning, toolUse: true };
  },
};
