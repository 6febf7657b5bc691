/**
 * A rate as people type it, `N/UNIT` (`5/s`, `1000/m`; UNIT exactly s, m, h or d): the CLI's
 * `--rate`, the web page's Rate and Token rate fields and the record form share this one rule.
 * Pure; no I/O, no zod (the page bundles this file).
 */
export const RATE_UNITS = ['second', 'minute', 'hour', 'day'] as const;
export type RateUnit = (typeof RATE_UNITS)[number];

/** The unit's letter in the CLI and record form (exactly these four). */
export const UNIT_LETTER: Readonly<Record<RateUnit, 's' | 'm' | 'h' | 'd'>> = { second: 's', minute: 'm', hour: 'h', day: 'd' };
const LETTER_UNIT: Readonly<Record<string, RateUnit>> = { s: 'second', m: 'minute', h: 'hour', d: 'day' };

/** Largest request rate per window (the counters stay far inside the exact integer range). */
export const MAX_RATE_REQUESTS = 1_000_000_000;
/** Largest token rate per window. */
export const MAX_RATE_TOKENS = 1_000_000_000_000;

/** A rate: `count` requests (or tokens) per window of one `per`. */
export interface Rate {
  readonly count: number;
  readonly per: RateUnit;
}

export type RateKind = 'requests' | 'tokens';

const RATE_TEXT = /^([1-9]\d{0,12})\/([smhd])$/;

export function maxRateOf(kind: RateKind): number {
  return kind === 'requests' ? MAX_RATE_REQUESTS : MAX_RATE_TOKENS;
}

/** `5/s` → {count 5, per second}; an error naming what is wrong otherwise. Also the record form. */
export function parseRateText(text: string, kind: RateKind = 'requests'): Rate | { readonly error: string } {
  const what = kind === 'requests' ? 'rate' : 'token rate';
  const m = RATE_TEXT.exec(text);
  if (!m) return { error: `${what} must be N/UNIT with N a positive integer and UNIT one of s, m, h, d (e.g. 5/s, 1000/m); got ${JSON.stringify(text.slice(0, 40))}` };
  const count = Number(m[1]);
  if (count > maxRateOf(kind)) return { error: `${what} must be at most ${maxRateOf(kind)} per window; got ${count}` };
  return { count, per: LETTER_UNIT[m[2]!]! };
}

/** {5, second} → `5/s`. */
export function formatRate(r: Rate): string {
  return `${r.count}/${UNIT_LETTER[r.per]}`;
}

/** What is wrong with a typed rate (the form's words; empty = no rate, fine), or null. */
export function rateProblem(text: string, kind: RateKind): string | null {
  const t = text.trim();
  if (t === '') return null;
  const r = parseRateText(t, kind);
  if (!('error' in r)) return null;
  const what = kind === 'requests' ? 'requests' : 'tokens';
  if (/^[1-9]\d*\/[smhd]$/.test(t)) return `Use at most ${maxRateOf(kind).toLocaleString('en-US')} ${what} per window.`;
  // 0/s or -5/s: the form is right, the number is not; say so rather than repeat the form.
  if (/^(-\s*\d+|0+)\/[smhd]$/.test(t)) return `Use at least 1 ${kind === 'requests' ? 'request' : 'token'} per window. Empty has no limit.`;
  return `Write ${what} per unit as N/UNIT, like 5/s or 1000/m (unit s, m, h or d). Empty has no limit.`;
}
