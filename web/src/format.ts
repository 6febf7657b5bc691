/** Display and input conversions of the page (no DOM). */
import type { BareModelReading, Limit } from './api.ts';

/** Integer micro-units as a decimal with 2 to 6 places: 12_500_000 → "12.50", 1 → "0.000001". */
export function money(micros: number): string {
  const neg = micros < 0;
  const abs = Math.abs(Math.trunc(micros));
  const units = Math.floor(abs / 1_000_000);
  let frac = String(abs % 1_000_000).padStart(6, '0').replace(/0+$/, '');
  if (frac.length < 2) frac = frac.padEnd(2, '0');
  return `${neg ? '-' : ''}${units.toLocaleString('en-US')}.${frac}`;
}

/** Micro-units as the amount to put back into an input ("12.5"). */
export function amountInput(micros: number): string {
  return money(micros).replace(/,/g, '').replace(/\.?0+$/, '');
}

const PERIOD_WORDS: Record<Limit['period'], string> = { day: 'today', week: 'this week', month: 'this month', total: 'in total' };
export const PERIODS: Limit['period'][] = ['day', 'week', 'month', 'total'];
export const periodWord = (p: Limit['period']) => PERIOD_WORDS[p] ?? p;

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function when(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : dateTime.format(d);
}

/** The options of `whenZoned` (dateStyle/timeStyle cannot be combined with a zone name). */
export const ZONED: Intl.DateTimeFormatOptions = { year: 'numeric', month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit', timeZoneName: 'short' };
const withZone = new Intl.DateTimeFormat(undefined, ZONED);

/** An instant with its time zone ("Dec 31, 2099, 1:00 AM GMT+1"): an expiry is an instant, not a day. */
export function whenZoned(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : withZone.format(d);
}

/** The browser's time zone as people read it ("Europe/Paris"). */
export const timeZoneName = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'your time zone';

const pad = (n: number) => String(n).padStart(2, '0');

/** An instant as a datetime-local input's value, in the browser's time zone ("2030-01-31T09:30"). */
export function localInput(ms: number | string | null): string {
  if (ms === null) return '';
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return '';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A datetime-local input's value (the browser's time zone) as an instant (epoch ms; NaN when malformed). */
export function fromLocalInput(value: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(value);
  if (!m) return NaN;
  return new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6] ?? 0)).getTime();
}

/** A rolled key's name (the console names it in the roll; the page shows it before): the rule is the console's. */
export { rolledName } from '../../src/core/key-rules.ts';
import { windowUseWords } from '../../src/core/key-rules.ts';

/** One CSV line (RFC 4180 quoting; text that a spreadsheet would run as a formula gets a leading '). */
export function csvLine(cells: (string | number | null)[]): string {
  return cells
    .map((c) => {
      if (c === null) return '';
      if (typeof c === 'number') return String(c);
      const t = /^[=+\-@\t\r]/.test(c) && !/^-?\d+(?:\.\d+)?$/.test(c) ? `'${c}` : c;
      return /[",\r\n]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
    })
    .join(',');
}

/** Micro-units as an exact decimal for CSV ("-0.000007"). */
export function decimal(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const frac = String(abs % 1_000_000).padStart(6, '0');
  return `${sign}${Math.floor(abs / 1_000_000)}.${frac}`;
}

export const isExpired = (iso: string | null, now = Date.now()) => iso !== null && Date.parse(iso) <= now;

export type Field = 'name' | 'models' | 'expires' | 'limit' | 'rate' | 'token_rate';

/** Which form field an API error message names (the API names the field in bad-input messages). */
export function fieldOf(message: string): Field | null {
  if (/\bexpir/i.test(message)) return 'expires';
  if (/\btoken[ _]rate\b/i.test(message)) return 'token_rate';
  if (/\brate\b/i.test(message)) return 'rate';
  if (/\b(limit|amount|period)/i.test(message)) return 'limit';
  if (/\bmodels?\b/i.test(message)) return 'models';
  if (/\bname\b/i.test(message)) return 'name';
  return null;
}

/** The API's refusal of a key rate looser than the account's, in the words of the person typing it; other messages as they are. */
export function rateRefusalWords(message: string): string {
  const m = /^(token rate|rate) (\S+) exceeds the account's (?:token )?rate (\S+);/i.exec(message);
  if (!m) return message;
  const what = m[1]!.toLowerCase() === 'rate' ? 'request rate' : 'token rate';
  return `Your account allows at most ${m[3]}: choose a ${what} within it (${m[2]} is more).`;
}

/** A window's use for the Rates column, digits grouped: " (3 used this window)" (key-rules.ts, `windowUseWords`). */
export const useWords = (use: { used: number; held?: number } | null | undefined): string => windowUseWords(use, (v) => v.toLocaleString());

/** A rate for the Rates column: "1 request per second", "5,000 tokens per day". */
export function rateWords(count: number, noun: 'request' | 'token', per: string): string {
  return `${count.toLocaleString()} ${count === 1 ? noun : `${noun}s`} per ${per}`;
}

/**
 * What a plain name at the OpenAI entry counts as in this deployment, for the Models help: "Here a
 * plain gpt-4o-mini at the OpenAI entry counts as openai/gpt-4o-mini." or that it counts as no
 * provider's; null when the sidecars differ, none reported or the answer is not loaded (the page
 * then says it generically).
 */
export function plainNameWords(openai: BareModelReading | undefined): string | null {
  if (openai?.rule === 'provider' && openai.provider) return `Here a plain gpt-4o-mini at the OpenAI entry counts as ${openai.provider}/gpt-4o-mini.`;
  if (openai?.rule === 'none') return "Here a plain gpt-4o-mini at the OpenAI entry is not read as any provider's: list the plain name too to allow it.";
  return null;
}
