/**
 * The slots a usage reader fills (json-reader.ts `count`, `str`): where each raw count and string of
 * a response lands, shared by the family readers (`openai.ts`, `anthropic.ts`, `google.ts`) and the
 * folding and normalising in ../usage.ts.
 */
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
export const NUMBER_SLOTS = 12;
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
