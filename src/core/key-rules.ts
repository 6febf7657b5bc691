/**
 * The rules of a key's settings in the words of the person typing them: one source for the web
 * page's form (which checks every field at once, before sending) and the console library (which
 * checks again before any write). Pure; no I/O, no zod (the page bundles this file).
 */
import { modelPatternError } from './model/pattern-rules.ts';

/** Limits the console enforces (the schema's `LIMITS`; docs/redis-schema.md §Limits). */
export const KEY_LIMITS = {
  nameMaxChars: 128,
  activeKeysPerAccount: 100,
  modelsPerKey: 100,
  modelPatternMaxChars: 256,
} as const;

/** Largest amount of one credit, usage record or limit: 10^15 micro-units (one billion currency units). */
export const MAX_AMOUNT_MICROS = 1_000_000_000_000_000;

/** Characters that are never part of a name: C0/C1 controls, line/paragraph separators, bidi overrides. */
export const NAME_FORBIDDEN = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/**
 * The name a roll gives the new key when none is asked for: "NAME (rolled)", and when the old
 * name already ends so, the next number: "NAME (rolled 2)", "NAME (rolled 3)"… — so the old key
 * (in its grace) and the new one never share a name. The name is cut (by characters, with no
 * space left before the suffix) so that the whole stays within the name limit.
 */
export function rolledName(name: string): string {
  const max = KEY_LIMITS.nameMaxChars;
  const m = / \(rolled(?: ([1-9]\d{0,8}))?\)$/.exec(name);
  const base = m ? name.slice(0, m.index) : name;
  const n = m ? (m[1] === undefined ? 2 : Number(m[1]) + 1) : 1;
  const suffix = n === 1 ? ' (rolled)' : ` (rolled ${n})`;
  return [...base].slice(0, Math.max(0, max - suffix.length)).join('').trimEnd() + suffix;
}

/** What is wrong with a key name, or null. */
export function nameProblem(name: string): string | null {
  const n = name.trim().normalize('NFC');
  if (n === '') return 'Give the key a name, so you can recognise it later.';
  const length = [...n].length;
  if (length > KEY_LIMITS.nameMaxChars) return `Use at most ${KEY_LIMITS.nameMaxChars} characters (this name has ${length}).`;
  if (NAME_FORBIDDEN.test(n)) return 'Remove the invisible control characters from the name.';
  return null;
}

/** The models field as typed: comma-separated; empty = every model. */
export function splitModels(text: string): string[] {
  return text.trim() === '' ? [] : text.split(',').map((m) => m.trim());
}

/** What is wrong with a list of model patterns (each problem once, in the user's words), or null. */
export function modelsProblem(models: readonly string[]): string | null {
  if (models.some((m) => m === '')) return 'There is an empty entry between two commas: remove it.';
  const bad = models.filter((m) => m.length > KEY_LIMITS.modelPatternMaxChars || modelPatternError(m.toLowerCase()) !== null);
  if (bad.length > 0) {
    const shown = bad.slice(0, 3).map((m) => `“${m.length > 40 ? `${m.slice(0, 40)}…` : m}”`).join(', ');
    return `${shown} ${bad.length === 1 ? 'is not a model name' : 'are not model names'}. Use provider/model (like openai/gpt-4o-mini), provider/* or a bare name, separated by commas.`;
  }
  if (new Set(models.map((m) => m.toLowerCase())).size > KEY_LIMITS.modelsPerKey) return `List at most ${KEY_LIMITS.modelsPerKey} models.`;
  return null;
}

/** A typed amount ("12.5", "0.000001") as micro-units, or null when it is not a positive amount within the bound. */
export function parseAmountText(text: string): number | null {
  const m = /^(\d{1,10})(?:\.(\d{1,6}))?$/.exec(text.trim());
  if (!m) return null;
  const micros = Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
  return micros > 0 && micros <= MAX_AMOUNT_MICROS ? micros : null;
}

export function amountProblem(text: string): string | null {
  return parseAmountText(text) === null ? 'Enter a positive amount with at most 6 decimals, like 25 or 12.50 (at most 1,000,000,000).' : null;
}

/** What is wrong with an expiry instant (epoch ms), or null. */
export function expiryProblem(ms: number, nowMs: number): string | null {
  if (!Number.isFinite(ms)) return 'Choose a date and time.';
  if (ms <= nowMs) return 'Choose a time in the future: a key cannot expire in the past.';
  if (ms > Date.UTC(9999, 11, 31, 23, 59, 59, 999)) return 'Choose a date before the year 10000.';
  return null;
}

/**
 * A rate window's use in words, as `keys show` and the page's Rates column say it:
 * " (3 used this window)", " (26 used this window, up to 25 of them reserved ahead by sidecars)";
 * '' without a use. `n` writes a number (the page groups digits; the CLI does not).
 */
export function windowUseWords(use: { used: number; held?: number } | null | undefined, n: (v: number) => string = String): string {
  if (!use) return '';
  const held = use.held ? `, up to ${n(use.held)} of them reserved ahead by sidecars` : '';
  return ` (${n(use.used)} used this window${held})`;
}
