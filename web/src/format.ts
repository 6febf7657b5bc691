/** Display and input conversions of the page (no DOM). */
import type { Limit } from './api.ts';

/** Integer micro-units as a decimal with 2 to 6 places: 12_500_000 → "12.50", 1 → "0.000001". */
export function money(micros: number): string {
  const neg = micros < 0;
  const abs = Math.abs(Math.trunc(micros));
  const units = Math.floor(abs / 1_000_000);
  let frac = String(abs % 1_000_000).padStart(6, '0').replace(/0+$/, '');
  if (frac.length < 2) frac = frac.padEnd(2, '0');
  return `${neg ? '-' : ''}${units.toLocaleString('en-US')}.${frac}`;
}

/** A typed amount ("12.5", "0.000001") as micro-units; null when malformed or not positive. */
export function parseAmount(text: string): number | null {
  const m = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(text.trim());
  if (!m) return null;
  const micros = Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
  return micros > 0 ? micros : null;
}

/** Micro-units as the amount to put back into an input ("12.5"). */
export function amountInput(micros: number): string {
  return money(micros).replace(/,/g, '').replace(/\.?0+$/, '');
}

const PERIOD_WORDS: Record<Limit['period'], string> = { day: 'today', week: 'this week', month: 'this month', total: 'in total' };
export const PERIODS: Limit['period'][] = ['day', 'week', 'month', 'total'];
export const periodWord = (p: Limit['period']) => PERIOD_WORDS[p] ?? p;

/** The models field ("openai/*, anthropic/claude-sonnet-4") as a list; empty = every model. */
export function parseModels(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((m) => m.trim())
    .filter(Boolean);
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const dateOnly = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeZone: 'UTC' });

export function when(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : dateTime.format(d);
}

/** Expiry dates are whole UTC days: the key stops working at 00:00 UTC on the chosen date. */
export function expiryLabel(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const midnight = d.getUTCHours() === 0 && d.getUTCMinutes() === 0 && d.getUTCSeconds() === 0 && d.getUTCMilliseconds() === 0;
  return midnight ? `${dateOnly.format(d)} (00:00 UTC)` : dateTime.format(d);
}

/** The value of a date input for an ISO instant (its UTC date). */
export const dateInput = (iso: string | null) => (iso ? iso.slice(0, 10) : '');

/** A date input's value (YYYY-MM-DD) as the instant the key stops working. */
export const expiryFromDate = (date: string) => `${date}T00:00:00.000Z`;

export const isExpired = (iso: string | null, now = Date.now()) => iso !== null && Date.parse(iso) <= now;

export type Field = 'name' | 'models' | 'expires' | 'limit';

/** Which form field an API error message names (the API names the field in bad-input messages). */
export function fieldOf(message: string): Field | null {
  if (/\bexpir/i.test(message)) return 'expires';
  if (/\b(limit|amount|period)/i.test(message)) return 'limit';
  if (/\bmodels?\b/i.test(message)) return 'models';
  if (/\bname\b/i.test(message)) return 'name';
  return null;
}
